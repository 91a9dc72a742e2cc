import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onTestFinished } from 'vitest';
import { enqueue, type EnqueueOptions } from '../../src/ingest/enqueue.js';
import { sourcePath } from '../../src/ingest/folder.js';
import { parseTemplate } from '../../src/ingest/template.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { tempDir } from '../helpers/tmp.js';

export const FIXTURES = fileURLToPath(new URL('../../fixtures/', import.meta.url));
export const fixture = (p: string) => join(FIXTURES, p);
/** A fixture's path as items and messages show it: relative to the current folder (the repository's, in tests). */
export const shownFixture = (p: string) => sourcePath(fixture(p));

/** A real SQLite store in a fresh temp folder, closed when the test ends. */
export function tempStore(dir = tempDir()): SqliteStore {
  const store = new SqliteStore(join(dir, 'q.db'));
  onTestFinished(() => store.close());
  return store;
}

export const request = (prompt = 'Summarize: {{text}}') => ({
  prompt: parseTemplate(prompt),
  system: null,
  model: 'gpt-4o-mini',
  maxTokens: 64,
  priority: 0,
});

export function run(store: SqliteStore, sources: string[], o: Partial<EnqueueOptions> = {}) {
  return enqueue(store, { sources, request: request(), ...o });
}

export function items(store: SqliteStore): Array<{ id: string; source: string; job_key: string; meta: string | null }> {
  return store.db.prepare('SELECT id, source, job_key, meta FROM items ORDER BY seq').all() as never;
}

export function count(store: SqliteStore, table: 'jobs' | 'items'): number {
  return store.db.prepare(`SELECT count(*) FROM ${table}`).pluck().get() as number;
}
