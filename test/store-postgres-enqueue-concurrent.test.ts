import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { PostgresStore } from '../src/store/postgres/store.js';
import type { EnqueueResult } from '../src/store/types.js';
import { PG_URL, STORE_KINDS, claimOpts, freshPgUrl, row, skipUnavailable, T0 } from './helpers/stores.js';

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

/** Hold every COMMIT of `store` until `open` is called; `reached` resolves when the first one waits. */
function holdCommits(store: PostgresStore): { reached: Promise<void>; open: () => void } {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  let reachedNow!: () => void;
  const reached = new Promise<void>((r) => (reachedNow = r));
  const connect = store.pool.connect.bind(store.pool) as () => Promise<pg.PoolClient>;
  const held = new WeakSet<pg.PoolClient>();
  (store.pool as { connect: () => Promise<pg.PoolClient> }).connect = async () => {
    const client = await connect();
    if (!held.has(client)) {
      held.add(client);
      const query = client.query.bind(client) as (...a: unknown[]) => Promise<unknown>;
      (client as { query: unknown }).query = async (...a: unknown[]) => {
        if (a[0] === 'COMMIT') {
          reachedNow();
          await gate;
        }
        return query(...a);
      };
    }
    return client;
  };
  return { reached, open };
}

describe('postgres: a job handed back while an enqueue moves its item', () => {
  it.for(['release', 'fail', 'reclaim'] as const)(
    'is dropped once that enqueue commits, not left pending (or failed) with no item: %s',
    async (how, ctx) => {
      skipUnavailable(postgres, ctx);
      const url = freshPgUrl();
      const runner = await PostgresStore.open(url);
      const mover = await PostgresStore.open(url);
      try {
        const v1 = row('doc-0', 'version 1');
        await runner.enqueue([v1], T0);
        expect((await runner.claim(claimOpts({ owner: 'run-x' }))).jobs.map((j) => j.key)).toEqual([v1.key]);
        // the document changes: the enqueue moves its item to a new job, and its commit is held
        const { reached, open } = holdCommits(mover);
        const moving = mover.enqueue([row('doc-0', 'version 2')], T0 + 1);
        await reached;
        // meanwhile the run hands the old job back (or fails it, or another run reclaims it)
        const handing =
          how === 'release'
            ? runner.release('run-x', { refund: false, now: T0 + 2 })
            : how === 'fail'
              ? runner.fail(v1.key, 'run-x', 'HTTP 400: bad', null, T0 + 2)
              : runner.reclaim(T0 + 120_000, []);
        await new Promise((r) => setTimeout(r, 200));
        open();
        await Promise.all([moving, handing]);
        expect(await jobsWithoutItems(url)).toBe(0);
        expect((await runner.status()).total).toBe(1);
      } finally {
        await Promise.all([runner.close(), mover.close()]);
      }
    },
  );
});
