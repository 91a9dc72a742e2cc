import { join } from 'node:path';
import pg from 'pg';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PostgresStore } from '../src/store/postgres/store.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import type { EnqueueRow, Store } from '../src/store/types.js';
import { STORE_KINDS, freshPgUrl, row, skipUnavailable } from './helpers/stores.js';
import { tempDir } from './helpers/tmp.js';

// The PostgreSQL store's plain enqueue (src/store/postgres/enqueue.ts) first sends ids, keys, sources and fields
// while most rows come back unchanged, and the requests of the rows that changed after: what it
// stores and counts must be what one statement per batch stored, and SQLite stores.

const postgres = STORE_KINDS.find((k) => k.name === 'postgres')!;
const LONG = 'a long document '.repeat(60);

/** Bytes of the string parameters of every statement the store's connections send while `fn` runs. */
async function bytesSent(fn: () => Promise<unknown>): Promise<number> {
  let bytes = 0;
  const original = pg.Client.prototype.query;
  const spy = vi.spyOn(pg.Client.prototype, 'query').mockImplementation(function (this: pg.Client, ...args: unknown[]) {
    const params = args[1];
    if (Array.isArray(params)) for (const p of params) if (typeof p === 'string') bytes += Buffer.byteLength(p);
    return (original as (...a: unknown[]) => unknown).apply(this, args);
  } as typeof original);
  try {
    await fn();
  } finally {
    spy.mockRestore();
  }
  return bytes;
}

function docs(n: number, text: (i: number) => string, o: { prefix?: string; meta?: boolean } = {}): EnqueueRow[] {
  return Array.from({ length: n }, (_, i) =>
    row(`${o.prefix ?? 'doc'}-${String(i).padStart(5, '0')}`, text(i), { meta: o.meta ? { n: i, tag: 'ü"\\' } : null }),
  );
}

describe('postgres enqueue of a queue that has the items already', () => {
  beforeEach((ctx) => skipUnavailable(postgres, ctx));
  afterEach(() => vi.restoreAllMocks());

  it('sends no request for a batch that comes again unchanged', async () => {
    const store = await PostgresStore.open(freshPgUrl());
    const batch = docs(2000, (i) => `${LONG} ${i}`, { meta: true });
    const first = await bytesSent(() => store.enqueue(batch, 1));
    let again = await store.enqueue(batch, 2);
    const bytes = await bytesSent(async () => {
      again = await store.enqueue(batch, 3);
    });
    expect(again).toEqual({
      newJobs: 0,
      newItems: 0,
      movedItems: 0,
      unchanged: 2000,
      droppedJobs: 0,
      orphanedAnswers: 0,
      reprioritized: 0,
    });
    // each row's id, key, source and meta (~130 bytes as JSON: an unchanged item takes its source and
    // fields), not its request (over 1 KB)
    expect(first / 2000).toBeGreaterThan(1000);
    expect(bytes / 2000).toBeLessThan(200);
    await store.close();
  });

  it('stores and counts what SQLite does when batches mix unchanged, moved and new items', async () => {
    const first = docs(3000, (i) => `text ${i}`);
    // after a batch that came again unchanged: some items move (two of them to one shared new job, one
    // to the job of an unchanged item), some are new (sharing jobs with each other)
    const mixed = [
      ...first.slice(0, 1000),
      ...docs(1000, (i) => (i % 2 ? `moved ${i % 10}` : `text ${(i + 2007) % 3000}`)).map((r, i) => ({
        ...r,
        itemId: first[1000 + i]!.itemId,
      })),
      ...docs(1000, (i) => `new ${i % 500}`, { prefix: 'new', meta: true }),
      ...first.slice(2000),
    ];
    // the probe is off after a batch of new items and on after an unchanged one: mixed goes both ways
    const steps = [first, first, mixed, docs(200, (i) => `text ${i}`, { prefix: 'late' }), mixed];
    const sqlite = new SqliteStore(join(tempDir(), 'q.db'));
    const pgStore = await PostgresStore.open(freshPgUrl());
    const results = async (store: Store) => {
      const out = [];
      for (const [i, b] of steps.entries()) out.push(await store.enqueue(b, 100 + i));
      return out;
    };
    expect(await results(pgStore)).toEqual(await results(sqlite));
    // every third item: each kind of change, in less time than reading them all one by one
    const ids = [...new Set(steps.flat().map((r) => r.itemId))].filter((_, i) => i % 3 === 0);
    const items = async (store: Store) =>
      Promise.all(
        ids.map(async (id) => {
          const d = (await store.item(id))!;
          return { id: d.id, source: d.source, meta: d.meta, key: d.job.key, request: d.job.request };
        }),
      );
    expect(await items(pgStore)).toEqual(await items(sqlite));
    const counts = async (store: Store) => (({ counts, total, items }) => ({ counts, total, items }))(await store.status());
    expect(await counts(pgStore)).toEqual(await counts(sqlite));
    await Promise.all([pgStore.close(), sqlite.close()]);
  });
});
