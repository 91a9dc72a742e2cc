import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { BULK_MIN_ROWS } from '../../src/store/sqlite/bulk-load.js';
import { requestOf } from '../../src/store/sqlite/requests.js';
import { tempDir } from '../helpers/tmp.js';
import { run, tempStore } from './helpers.js';

/**
 * 3,500 documents, some identical to an earlier one (the same request, so the same job), with
 * extra fields, two priorities' worth of models and text beyond ASCII: enough for several batches
 * of a bulk load.
 */
function documents(dir: string): string {
  const lines: string[] = [];
  for (let i = 0; i < 3500; i++) {
    // some texts beyond ASCII, up to a character of two UTF-16 units: the load's writer gets requests as UTF-8 bytes
    const accents = i % 3 === 0 ? ' café, 日本語, 😀' : '';
    const text = i % 700 === 699 ? 'the same text again' : `document ${i}: ${'words '.repeat(i % 13)}${accents}`;
    lines.push(JSON.stringify({ id: `doc-${i}`, text, lang: i % 2 ? 'en' : 'fr' }));
  }
  const file = join(dir, 'docs.jsonl');
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

/** Every row of the queue but the job given beforehand, in stored order, without seq or timestamps. */
function rows(store: SqliteStore) {
  const q = (sql: string) => store.db.prepare(sql).all();
  return {
    jobs: q(`SELECT key, ${requestOf('jobs')} AS request, model, state, priority, attempts, run_after, lease_owner, lease_expires_at, output, response,
      prompt_tokens, completion_tokens, error, finished_at, cost_usd FROM jobs WHERE key <> 'unrelated' ORDER BY seq`),
    items: q("SELECT id, source, job_key, meta FROM items WHERE id <> 'unrelated' ORDER BY seq"),
    attempts: q('SELECT * FROM attempts'),
  };
}

/** The indexes and triggers of jobs and items, as created. */
function indexes(store: SqliteStore): string[] {
  return store.db
    .prepare(
      "SELECT name || ': ' || coalesce(sql, '') FROM sqlite_master WHERE type IN ('index', 'trigger') AND tbl_name IN ('jobs', 'items') ORDER BY name",
    )
    .pluck()
    .all() as string[];
}

describe('enqueue into an empty SQLite queue (bulk load)', () => {
  it('stores exactly what an enqueue into a queue with jobs stores, and says the same', async () => {
    expect(BULK_MIN_ROWS).toBeLessThanOrEqual(1000);
    const dir = tempDir();
    const file = documents(dir);

    const fresh = tempStore(tempDir());
    let sawLoad = false;
    const bulk = await run(fresh, [file], {
      batchRows: 1000,
      // between chunks, the load is recorded and its indexes are gone: the bulk path was taken
      backpressure: () => {
        sawLoad ||=
          fresh.db.prepare('SELECT count(*) FROM bulk_load').pluck().get() === 1 && !indexes(fresh).some((i) => i.startsWith('jobs_key:'));
      },
    });
    expect(sawLoad).toBe(true);

    const held = tempStore(tempDir());
    await held.enqueue([{ itemId: 'unrelated', source: 'x', key: 'unrelated', request: '{}', model: 'other', priority: 0, meta: null }], 1);
    const plain = await run(held, [file], { batchRows: 1000 });

    const { elapsedMs: _a, ...saidBulk } = bulk;
    const { elapsedMs: _b, ...saidPlain } = plain;
    expect(saidBulk).toEqual(saidPlain);
    expect(saidBulk).toMatchObject({ documents: 3500, newItems: 3500, newJobs: 3500 - 4 });
    expect(rows(fresh)).toEqual(rows(held));

    // the load left nothing behind: indexes back, record gone, foreign keys on and holding, counts right
    expect(indexes(fresh)).toEqual(indexes(held));
    expect(fresh.db.prepare('SELECT count(*) FROM bulk_load').pluck().get()).toBe(0);
    expect(fresh.db.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(fresh.db.pragma('foreign_key_check')).toEqual([]);
    const status = await fresh.status();
    expect(status.counts.pending).toBe(3496);
    expect(status.items).toBe(3500);
  });

  it('a batch the writer thread cannot store fails the enqueue with its error, and only that batch is lost', async () => {
    const dir = tempDir();
    const file = documents(dir);
    const store = tempStore(dir);
    let sabotaged = false;
    const failed = run(store, [file], {
      batchRows: 1000,
      backpressure: () => {
        if (sabotaged || store.db.prepare('SELECT count(*) FROM bulk_load').pluck().get() !== 1) return;
        // The file is one read: its first three batches are handed on before the load is seen here,
        // the last (doc-3000 to doc-3499) after. It meets a trigger that refuses one of its rows.
        store.db.exec(`CREATE TRIGGER refuse BEFORE INSERT ON items WHEN NEW.id = 'doc-3200'
          BEGIN SELECT RAISE(ABORT, 'the disk refused doc-3200'); END`);
        sabotaged = true;
      },
    });
    await expect(failed).rejects.toThrow(/the disk refused doc-3200/);
    store.db.exec('DROP TRIGGER refuse');
    // the batches before it are stored whole, nothing of it; the load was finished on the way out
    const ids = store.db.prepare('SELECT id FROM items ORDER BY seq').pluck().all() as string[];
    expect(ids).toEqual(Array.from({ length: 3000 }, (_, i) => `doc-${i}`));
    expect(store.db.prepare('SELECT count(*) FROM bulk_load').pluck().get()).toBe(0);
    expect((await store.status()).items).toBe(3000);
    // and the next enqueue adds the rest
    const again = await run(store, [file], { batchRows: 1000 });
    expect(again).toMatchObject({ newItems: 500, unchanged: 3000 });
    expect((await store.status()).items).toBe(3500);
  });

  it('a second enqueue while a load is live is refused with what to do, and the load is not disturbed', async () => {
    const dir = tempDir();
    const file = documents(dir);
    const store = tempStore(dir);
    let refusal: unknown;
    await run(store, [file], {
      batchRows: 1000,
      backpressure: async () => {
        if (refusal !== undefined || store.db.prepare('SELECT count(*) FROM bulk_load').pluck().get() !== 1) return;
        const other = new SqliteStore(join(dir, 'q.db'));
        try {
          // a status reads the counts the load keeps
          expect((await other.status()).items).toBeGreaterThan(0);
          await other.enqueue([{ itemId: 'x', source: 'x', key: 'x', request: '{}', model: 'm', priority: 0, meta: null }], 1);
          refusal = null;
        } catch (error) {
          refusal = error;
        } finally {
          await other.close();
        }
      },
    });
    expect(String(refusal)).toMatch(/is being loaded by llmq enqueue or llmq copy \(pid \d+ on .+\).*Wait for that command to finish/);
    expect(store.db.prepare('SELECT count(*) FROM items').pluck().get()).toBe(3500);
  });
});
