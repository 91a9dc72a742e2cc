import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { PostgresStore } from '../src/store/postgres/store.js';
import { OWNER, PG_URL, STORE_KINDS, T0, claimOpts, freshPgUrl, row, skipUnavailable } from './helpers/stores.js';

// A job handed back or failed whose item moved away while it ran (its document edited and enqueued
// again) is dropped, never to be sent. On PostgreSQL the hand-back and the drop are one transaction:
// apart, a process killed or a connection lost between them left the job pending with no item, and
// the next run sent it and paid for it.

const postgres = STORE_KINDS.find((k) => k.name === 'postgres')!;

async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  await client.query(`SET search_path = "${new URL(url).searchParams.get('schema')}"`);
  return client;
}

/** The states of jobs no item points at, seen from another connection. */
async function jobsWithoutItems(client: pg.Client): Promise<string[]> {
  const r = await client.query<{ state: string }>(
    'SELECT state FROM jobs j WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.job_key = j.key) ORDER BY seq',
  );
  return r.rows.map((x) => x.state);
}

describe('postgres: a job no item needs, handed back or failed', () => {
  it.for(['release', 'fail', 'reclaim'] as const)(
    '%s: is never seen pending without its item, even while an enqueue holds up the drop',
    async (how, ctx) => {
      skipUnavailable(postgres, ctx);
      const url = freshPgUrl();
      const store = await PostgresStore.open(url);
      const enqueue = await connect(url);
      const look = await connect(url);
      try {
        await store.enqueue([row('doc', 'first version')], T0);
        const [job] = (await store.claim(claimOpts())).jobs;
        // the document edited while its job is out: the item moves to a new job, the old one is kept running
        await store.enqueue([row('doc', 'second version')], T0 + 1);
        expect(await jobsWithoutItems(look)).toEqual(['running']);
        // an enqueue in progress holds its turn: the drop must wait for it
        await enqueue.query('BEGIN');
        await enqueue.query(`SELECT pg_advisory_xact_lock(hashtext('llmq enqueue ' || current_schema()))`);
        const handBack =
          how === 'release'
            ? store.release(OWNER, { refund: true, now: T0 + 2 })
            : how === 'fail'
              ? store.fail(job!.key, OWNER, 'HTTP 400', null, T0 + 2)
              : store.reclaim(T0 + 2, [OWNER]);
        await new Promise((r) => setTimeout(r, 300));
        // still running as its run left it, not pending (or failed) with no item while the drop waits
        expect(await jobsWithoutItems(look)).toEqual(['running']);
        await enqueue.query('COMMIT');
        await handBack;
        expect(await jobsWithoutItems(look)).toEqual([]);
        expect((await store.status()).counts).toMatchObject({ pending: 1, running: 0, failed: 0 });
      } finally {
        await enqueue.end();
        await look.end();
        await store.close();
      }
    },
  );
});
