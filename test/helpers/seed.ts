import { canonicalJson, jobKey } from '../../src/request.js';
import { join } from 'node:path';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import type { EnqueueRow, Store } from '../../src/store/types.js';
import { tempDir } from './tmp.js';

/** A request like the ones `enqueue` renders, for document `n`. */
export function requestFor(n: number, options: { model?: string; maxTokens?: number; text?: string } = {}): string {
  return canonicalJson({
    model: options.model ?? 'gpt-4o-mini',
    max_tokens: options.maxTokens ?? 64,
    messages: [{ role: 'user', content: options.text ?? `Summarize document ${n}: the quick brown fox ${n}.` }],
  });
}

/** Put `count` distinct jobs (one item each, ids doc-0...) into the store; returns their keys in order. */
export async function seedJobs(
  store: Store,
  count: number,
  options: { model?: string; maxTokens?: number; priority?: (n: number) => number; text?: (n: number) => string } = {},
): Promise<string[]> {
  const rows: EnqueueRow[] = [];
  for (let n = 0; n < count; n++) {
    const request = requestFor(n, { ...options, text: options.text?.(n) });
    rows.push({
      itemId: `doc-${n}`,
      source: 'seed',
      meta: null,
      key: jobKey(request),
      request,
      model: options.model ?? 'gpt-4o-mini',
      priority: options.priority?.(n) ?? 0,
    });
  }
  for (let i = 0; i < rows.length; i += 1000) await store.enqueue(rows.slice(i, i + 1000), Date.now());
  return rows.map((r) => r.key);
}

/** A fresh SQLite queue in a temp folder holding `count` seeded jobs, closed: its path, for the CLI. */
export async function seededQueue(count: number, options: Parameters<typeof seedJobs>[2] = {}): Promise<string> {
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  await seedJobs(store, count, options);
  await store.close();
  return db;
}
