import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { PostgresStore } from '../src/store/postgres/store.js';
import type { EnqueueResult } from '../src/store/types.js';
import { PG_URL, STORE_KINDS, freshPgUrl, row, skipUnavailable } from './helpers/stores.js';

// Two enqueues of the same ids into one PostgreSQL queue at once. Each tells new, moved and unchanged
// items apart by what it reads first; without taking turns, one's rows committed after that read were
// unseen by the other: its jobs were left with no item (sent and paid for, never shown), and a stream's
// line without an id took the item of an earlier stream's line.

const postgres = STORE_KINDS.find((k) => k.name === 'postgres')!;

async function jobsWithoutItems(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(`SET search_path = "${new URL(url).searchParams.get('schema')}"`);
    const r = await client.query('SELECT count(*)::int AS n FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.job_key = j.key)');
    return r.rows[0].n;
  } finally {
    await client.end();
  }
}

describe('postgres: enqueues of the same ids at once', () => {
  it('leave every job an item, and a stream line never takes an item another stream holds', async (ctx) => {
    skipUnavailable(postgres, ctx);
    const url = freshPgUrl();
    const seed = await PostgresStore.open(url);
    await seed.enqueue([row('seed', 'not empty')], 1); // plain enqueues, not a bulk load
    await seed.close();
    const stores = await Promise.all([PostgresStore.open(url), PostgresStore.open(url)]);
    try {
      for (let round = 0; round < 6; round++) {
        const streams = stores.map((_, s) =>
          Array.from({ length: 900 }, (_, n) => ({
            ...row(`-:${round * 1000 + n + 1}`, `stream ${s} round ${round} line ${n}`),
            source: `-:${n + 1}`,
            positional: true,
          })),
        );
        const named = stores.map((_, s) =>
          Array.from({ length: 900 }, (_, n) => row(`doc-${round}-${n}`, `file ${s} round ${round} doc ${n}`)),
        );
        const [a, b] = (await Promise.all(stores.map((store, s) => store.enqueue(streams[s]!, 2 + round)))) as [
          EnqueueResult,
          EnqueueResult,
        ];
        expect(a.newItems + b.newItems).toBe(900);
        expect((a.keptItems?.length ?? 0) + (b.keptItems?.length ?? 0)).toBe(900);
        expect(a.movedItems + b.movedItems).toBe(0);
        await Promise.all(stores.map((store, s) => store.enqueue(named[s]!, 2 + round)));
      }
      expect(await jobsWithoutItems(url)).toBe(0);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });
});
