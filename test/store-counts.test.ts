import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { PostgresStore } from '../src/store/postgres/store.js';
import { MIGRATIONS as SQLITE_MIGRATIONS } from '../src/store/sqlite/migrations.js';
import { tallyJobs, type StateTokensRow } from '../src/store/tally.js';
import { batchOwner } from '../src/store/batches.js';
import type { AttemptRecord, RunStats, Store } from '../src/store/types.js';
import { STORE_KINDS, T0, freshPgUrl, pgSchemaAtVersion, row, rows, skipUnavailable, NO_STATS } from './helpers/stores.js';
import { tempDir } from './helpers/tmp.js';

// What status shows, counted afresh over jobs and items: what the maintained counts must always equal.
const FRESH_TALLY = `SELECT model, state, count(*) AS n, coalesce(sum(prompt_tokens), 0) AS p, coalesce(sum(completion_tokens), 0) AS c,
  sum(cost_usd) AS usd, sum(CASE WHEN cost_usd IS NULL THEN prompt_tokens END) AS up,
  sum(CASE WHEN cost_usd IS NULL THEN completion_tokens END) AS uc, sum(CASE WHEN attempts > 0 THEN 1 ELSE 0 END) AS r
  FROM jobs GROUP BY model, state`;
// answered jobs no item points at: out of done and total (StatusSnapshot.orphanedAnswers)
const FRESH_ORPHANED = `SELECT count(*) AS n FROM jobs j WHERE j.state = 'done' AND NOT EXISTS (SELECT 1 FROM items i WHERE i.job_key = j.key)`;
const FRESH_FAILURES = `SELECT coalesce(error, 'unknown error') AS error, count(*) AS count FROM jobs WHERE state = 'failed' GROUP BY 1`;

async function raw<T>(store: Store, sql: string): Promise<T[]> {
  if (store instanceof SqliteStore) return store.db.prepare(sql).all() as T[];
  return (await (store as PostgresStore).pool.query(sql)).rows as T[];
}

/** The counted part of status, with the stored cost rounded (sums of floats in another order differ in the last bits). */
async function counted(store: Store) {
  const s = await store.status();
  return {
    counts: s.counts,
    total: s.total,
    orphanedAnswers: s.orphanedAnswers,
    items: s.items,
    tokens: s.tokens,
    retrying: s.retrying,
    oldestPendingAt: s.oldestPendingAt,
    byModel: s.byModel.map((m) => ({ ...m, storedUsd: Number(m.storedUsd.toFixed(12)) })).sort((a, b) => a.model.localeCompare(b.model)),
    failures: Object.fromEntries(s.failures.map((f) => [f.error, Number(f.count)])),
  };
}

async function fresh(store: Store) {
  const [orphaned] = await raw<{ n: number }>(store, FRESH_ORPHANED);
  const tally = tallyJobs(await raw<StateTokensRow>(store, FRESH_TALLY), Number(orphaned!.n));
  const [items] = await raw<{ n: number }>(store, 'SELECT count(*) AS n FROM items');
  const [oldest] = await raw<{ v: number | null }>(store, `SELECT min(created_at) AS v FROM jobs WHERE state = 'pending'`);
  const failures = await raw<{ error: string; count: number }>(store, FRESH_FAILURES);
  return {
    counts: tally.counts,
    total: tally.total,
    orphanedAnswers: tally.orphanedAnswers,
    items: Number(items!.n),
    tokens: tally.tokens,
    retrying: tally.retrying,
    oldestPendingAt: oldest!.v === null ? null : Number(oldest!.v),
    byModel: tally.byModel
      .map((m) => ({ ...m, storedUsd: Number(m.storedUsd.toFixed(12)) }))
      .sort((a, b) => a.model.localeCompare(b.model)),
    failures: Object.fromEntries(failures.map((f) => [f.error, Number(f.count)])),
  };
}

/** A small seeded generator, so a failing sequence can be replayed. */
function random(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 2 ** 32;
  };
  return { next, int: (n: number) => Math.floor(next() * n), pick: <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)]! };
}

const RUNS = ['run-a', 'run-b'];
const MODELS = ['gpt-a', 'gpt-b'];
const ERRORS = ['HTTP 400: bad request', 'context too long', '503 Service Unavailable'];

/**
 * One random step through a path that changes jobs or items. Each returns its name, so a mismatch
 * says which step broke the counts.
 */
async function step(store: Store, r: ReturnType<typeof random>, t: number): Promise<string> {
  const held = async (owner?: string) =>
    (
      await raw<{ key: string; lease_owner: string; attempts: number }>(
        store,
        `SELECT key, lease_owner, attempts FROM jobs WHERE state = 'running' ORDER BY seq`,
      )
    ).filter((j) => !owner || j.lease_owner === owner);
  const attempt = (key: string, owner: string, n: number, o: Partial<AttemptRecord> = {}): AttemptRecord => ({
    key,
    runId: owner,
    attempt: n,
    startedAt: t - 100,
    endedAt: t,
    status: 500,
    outcome: 'retry',
    error: '500',
    usage: null,
    ...o,
  });
  const owner = r.pick(RUNS);
  switch (r.int(11)) {
    case 0:
    case 1: {
      // enqueue: new documents, changed ones (their old job dropped when no item needs it), repeats
      const n = 1 + r.int(6);
      const batch = Array.from({ length: n }, () => row(`doc-${r.int(30)}`, `text ${r.int(40)}`, { model: r.pick(MODELS) }));
      await store.enqueue(batch, t);
      return `enqueue ${n}`;
    }
    case 2: {
      // claim, failing jobs whose attempts are used up
      await store.claim({ owner, limit: 1 + r.int(5), now: t, leaseUntil: t + 1000, maxAttempts: 2 });
      return 'claim';
    }
    case 3: {
      // answers, with and without a cost, held or not (an answer paid for is kept)
      const jobs = await held();
      const picks = jobs.filter(() => r.next() < 0.5);
      await Promise.all(
        picks.map((j) => {
          const usage = { promptTokens: 10 + r.int(100), completionTokens: r.int(50) };
          return store.complete(j.key, {
            owner: j.lease_owner,
            output: 'ok',
            response: '{}',
            usage,
            attempt: attempt(j.key, j.lease_owner, j.attempts, {
              outcome: 'done',
              status: 200,
              error: null,
              usage,
              costUsd: r.next() < 0.5 ? null : r.next() / 1000,
            }),
          });
        }),
      );
      return `complete ${picks.length}`;
    }
    case 4: {
      // a try that did not finish the job, counted or given back; then maybe a retry
      const j = (await held())[0];
      if (!j) return 'recordAttempt (none held)';
      const countAttempt = r.next() < 0.5;
      await store.recordAttempt(attempt(j.key, j.lease_owner, j.attempts), { countAttempt, error: r.pick(ERRORS) });
      if (r.next() < 0.5) await store.startRetry(j.key, j.lease_owner, t, t + 1000);
      return 'recordAttempt';
    }
    case 5: {
      // fail a held job
      const j = (await held())[r.int(3)];
      if (!j) return 'fail (none held)';
      const error = r.pick(ERRORS);
      await store.fail(
        j.key,
        j.lease_owner,
        error,
        r.next() < 0.5 ? attempt(j.key, j.lease_owner, j.attempts, { outcome: 'failed', error }) : null,
        t,
      );
      return 'fail';
    }
    case 6: {
      // give jobs back: some or all, refunded or not (orphans are dropped)
      const jobs = await held(owner);
      const keys = r.next() < 0.5 ? jobs.filter(() => r.next() < 0.5).map((j) => j.key) : undefined;
      await store.release(owner, { refund: r.next() < 0.5, now: t, ...(keys ? { keys } : {}) });
      return 'release';
    }
    case 7: {
      // leases that lapsed, or a dead owner's jobs, back to pending
      await store.reclaim(r.next() < 0.5 ? t + 2000 : t, r.next() < 0.5 ? [owner] : []);
      return 'reclaim';
    }
    case 8: {
      // failed jobs back to pending: all, by exact reason, or by text
      const which = r.int(3);
      await store.retryFailed(which === 0 ? {} : which === 1 ? { errorIs: r.pick(ERRORS) } : { errorContains: 'gave up' }, t);
      return 'retryFailed';
    }
    case 9: {
      // the batch lane: jobs leased to a batch, some answered, the rest requeued when it ends
      const id = `b${t}`;
      await store.batches.begin({ id, runId: owner, baseUrl: 'http://127.0.0.1:1/v1', now: t });
      const { jobs } = await store.claim({ owner: batchOwner(id), limit: 1 + r.int(4), now: t, leaseUntil: t + 1000, maxAttempts: 3 });
      for (const j of jobs.slice(0, r.int(jobs.length + 1))) {
        if (r.next() < 0.5) {
          const usage = { promptTokens: 7, completionTokens: 3 };
          await store.complete(j.key, {
            owner: batchOwner(id),
            output: 'ok',
            response: '{}',
            usage,
            attempt: attempt(j.key, batchOwner(id), j.attempts, { outcome: 'done', status: 200, error: null, usage, costUsd: 0.0001 }),
          });
        } else {
          await store.fail(j.key, batchOwner(id), 'batch said no', null, t);
        }
      }
      await store.batches.end(id, {
        state: r.next() < 0.5 ? 'ended' : 'abandoned',
        providerStatus: null,
        done: 0,
        failed: 0,
        error: null,
        now: t,
        refund: r.next() < 0.5,
        jobError: r.next() < 0.5 ? 'expired in the batch' : null,
      });
      return 'batch';
    }
    default: {
      // a heartbeat (PostgreSQL folds the counts there)
      await store.heartbeat(owner, t, t + 1000, NO_STATS);
      return 'heartbeat';
    }
  }
}

describe.each(STORE_KINDS)('status counts [$name]', (kind) => {
  it.for([1, 2])(
    'equal a fresh count over jobs after every step of a random sequence (seed %i), and after a copy',
    { timeout: 120_000 },
    async (seed, ctx) => {
      skipUnavailable(kind, ctx);
      const { store } = await kind.fresh();
      for (const run of RUNS) await store.startRun({ id: run, host: 'h', pid: 1, startedAt: T0, options: {} });
      const r = random(seed);
      const steps: string[] = [];
      const orphans = new Set<number>();
      for (let i = 0; i < 150; i++) {
        steps.push(await step(store, r, T0 + i * 1000));
        const now = await counted(store);
        expect(now, `after steps ${steps.slice(-5).join(', ')} (step ${i}, seed ${seed})`).toEqual(await fresh(store));
        orphans.add(now.orphanedAnswers);
      }
      // answers went out of done as their items moved to new jobs, and some came back as items moved back
      expect(Math.max(...orphans)).toBeGreaterThan(1);
      // the paths above reached every state and every kind of change
      expect(new Set(steps.map((s) => s.split(' ')[0]))).toEqual(
        new Set(['enqueue', 'claim', 'complete', 'recordAttempt', 'fail', 'release', 'reclaim', 'retryFailed', 'batch', 'heartbeat']),
      );
      const s = await counted(store);
      expect(s.counts.done * s.counts.failed * s.counts.pending).toBeGreaterThan(0);
      // PostgreSQL's change rows were folded by that status: one row per group left, none for an emptied group
      if (store instanceof PostgresStore) {
        const [groups] = await raw<{ rows: number; groups: number }>(
          store,
          `SELECT count(*) AS rows, count(DISTINCT (model, state)) AS groups FROM job_counts`,
        );
        expect(groups!.rows).toBe(groups!.groups);
        expect(groups!.groups).toBe((await raw(store, 'SELECT DISTINCT model, state FROM jobs')).length);
      }

      // `llmq copy` writes rows as they are: the copy's counts are its rows'
      const copy = (await kind.fresh()).store;
      for (const [dump, load] of [
        [store.copier.dumpJobs(), (b: never[]) => copy.copier.loadJobs(b)],
        [store.copier.dumpItems(), (b: never[]) => copy.copier.loadItems(b)],
      ] as const) {
        const batch: never[] = [];
        for await (const x of dump as AsyncIterable<never>) batch.push(x);
        await load(batch);
      }
      await copy.copier.markOrphans();
      expect(await counted(copy)).toEqual(await fresh(copy));
      expect((await counted(copy)).counts).toEqual(s.counts);
    },
  );
});

/** Jobs in every state, some tried, answered with and without a cost, failed for two reasons, written as a v4 database holds them. */
const V4_JOBS = `INSERT INTO jobs (key, request, model, state, attempts, prompt_tokens, completion_tokens, cost_usd, error, created_at, updated_at)
VALUES ('k1', '{}', 'm1', 'pending', 0, NULL, NULL, NULL, NULL, 5, 5), ('k2', '{}', 'm1', 'pending', 1, NULL, NULL, NULL, '503', 3, 3),
       ('k3', '{}', 'm1', 'running', 1, NULL, NULL, NULL, NULL, 1, 1), ('k4', '{}', 'm1', 'done', 1, 100, 20, 0.25, NULL, 1, 1),
       ('k5', '{}', 'm2', 'done', 2, 50, 5, NULL, NULL, 1, 1), ('k6', '{}', 'm2', 'failed', 3, NULL, NULL, NULL, 'HTTP 400', 1, 1),
       ('k7', '{}', 'm2', 'failed', 1, NULL, NULL, NULL, NULL, 1, 1), ('k8', '{}', 'm2', 'failed', 1, NULL, NULL, NULL, 'HTTP 400', 1, 1);
INSERT INTO items (id, source, job_key, created_at, updated_at) VALUES ('a', 's', 'k1', 1, 1), ('b', 's', 'k2', 1, 1), ('c', 's', 'k4', 1, 1),
  ('d', 's', 'k4', 1, 1), ('e', 's', 'k6', 1, 1)`;

const EXPECTED_V4 = {
  // k5 is done and no item points at it: out of done and total
  counts: { pending: 2, running: 1, done: 1, failed: 3 },
  total: 7,
  orphanedAnswers: 1,
  items: 5,
  tokens: { prompt: 150, completion: 25 },
  retrying: 1,
  oldestPendingAt: 3,
  failures: { 'HTTP 400': 2, 'unknown error': 1 },
};

describe('status counts of an answer to a job changed since its claim', () => {
  // A run's answer moves the counts from what its claim saw (sqlite/count-moves.ts). A job changed
  // since then, by hand or by another writer, must be answered the way the trigger counts.
  it.for([
    ['its model', `UPDATE jobs SET model = 'gpt-b' WHERE state = 'running'`],
    ['its attempts', `UPDATE jobs SET attempts = 0 WHERE state = 'running'`],
    ['its prompt tokens', `UPDATE jobs SET prompt_tokens = 5 WHERE state = 'running'`],
    ['its completion tokens', `UPDATE jobs SET completion_tokens = 5 WHERE state = 'running'`],
    ['its cost', `UPDATE jobs SET cost_usd = 0.5 WHERE state = 'running'`],
    ['its state', `UPDATE jobs SET state = 'pending', lease_owner = NULL WHERE state = 'running'`],
  ])('sqlite: %s changed by hand, then answered: equal a fresh count', async ([, edit]) => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await store.startRun({ id: 'run-a', host: 'h', pid: 1, startedAt: T0, options: {} });
    await store.enqueue([row('doc-1', 'one', { model: 'gpt-a' }), row('doc-2', 'two', { model: 'gpt-a' })], T0);
    const { jobs } = await store.claim({ owner: 'run-a', limit: 2, now: T0, leaseUntil: T0 + 1000, maxAttempts: 3 });
    store.db.exec(edit!);
    const usage = { promptTokens: 7, completionTokens: 3 };
    for (const j of jobs) {
      const a: AttemptRecord = {
        key: j.key,
        runId: 'run-a',
        attempt: j.attempts,
        startedAt: T0,
        endedAt: T0 + 5,
        status: 200,
        outcome: 'done',
        error: null,
        usage,
        costUsd: 0.001,
      };
      expect(await store.complete(j.key, { owner: 'run-a', output: 'ok', response: '{}', usage, attempt: a })).toBe(true);
    }
    // every column of job_counts, not only what status shows (it sums no running job's tokens)
    const kept = store.db
      .prepare(`SELECT model, state, jobs, retried, prompt_tokens, completion_tokens, round(cost_usd, 9) AS usd, unpriced_prompt,
          unpriced_completion FROM job_counts
        WHERE jobs <> 0 OR retried <> 0 OR prompt_tokens <> 0 OR completion_tokens <> 0 OR round(cost_usd, 9) <> 0
          OR unpriced_prompt <> 0 OR unpriced_completion <> 0 ORDER BY model, state`)
      .all();
    const counted = store.db
      .prepare(`SELECT model, state, count(*) AS jobs, sum(attempts > 0) AS retried, coalesce(sum(prompt_tokens), 0) AS prompt_tokens,
          coalesce(sum(completion_tokens), 0) AS completion_tokens, round(coalesce(sum(cost_usd), 0), 9) AS usd,
          coalesce(sum(iif(cost_usd IS NULL, prompt_tokens, 0)), 0) AS unpriced_prompt,
          coalesce(sum(iif(cost_usd IS NULL, completion_tokens, 0)), 0) AS unpriced_completion
        FROM jobs GROUP BY model, state ORDER BY model, state`)
      .all();
    expect(kept).toEqual(counted);
    expect((await store.status()).counts.done).toBe(2);
    await store.close();
  });
});

describe('status counts of a database from before they were kept', () => {
  it('sqlite: a v4 database with jobs gets its counts on open', async () => {
    const path = join(tempDir(), 'q.db');
    const db = new Database(path);
    db.exec('CREATE TABLE llmq_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
    for (const m of SQLITE_MIGRATIONS.filter((x) => x.version <= 4)) {
      db.exec(m.sql);
      db.prepare('INSERT INTO llmq_migrations VALUES (?, ?, ?)').run(m.version, m.name, 0);
    }
    db.exec(V4_JOBS);
    db.close();
    const store = new SqliteStore(path);
    expect(await counted(store)).toEqual(await fresh(store));
    expect(await counted(store)).toMatchObject(EXPECTED_V4);
    await store.close();
  });

  it('postgres: a v4 schema with jobs gets its counts on open', async (ctx) => {
    skipUnavailable(STORE_KINDS.find((k) => k.name === 'postgres')!, ctx);
    const url = freshPgUrl();
    await pgSchemaAtVersion(url, 4, (client) => client.query(V4_JOBS));
    const store = await PostgresStore.open(url);
    expect(await counted(store)).toEqual(await fresh(store));
    expect(await counted(store)).toMatchObject(EXPECTED_V4);
    await store.close();
  });
});

describe('postgres status counts when a fold fails', () => {
  it('the heartbeat and status go on, and status sums the rows left unfolded', async (ctx) => {
    skipUnavailable(STORE_KINDS.find((k) => k.name === 'postgres')!, ctx);
    const store = await PostgresStore.open(freshPgUrl());
    await store.enqueue(rows(3), T0);
    // every fold now fails inside its DELETE, as a lock or statement timeout would
    await store.pool.query(`CREATE FUNCTION no_fold() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'fold refused'; END $$;
      CREATE TRIGGER no_fold BEFORE DELETE ON job_counts FOR EACH ROW EXECUTE FUNCTION no_fold();`);
    await store.startRun({ id: 'run-1', host: 'h', pid: 1, startedAt: T0, options: {} });
    const { jobs } = await store.claim({ owner: 'run-1', limit: 2, now: T0, leaseUntil: T0 + 60_000, maxAttempts: 3 });
    expect(jobs).toHaveLength(2);
    await expect(store.heartbeat('run-1', T0 + 1000, T0 + 61_000, {} as RunStats)).resolves.toEqual([]);
    expect(await counted(store)).toEqual(await fresh(store));
    expect((await store.status()).counts).toMatchObject({ pending: 1, running: 2 });
    await store.close();
  });
});
