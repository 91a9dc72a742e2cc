import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { PostgresStore } from '../src/store/postgres/store.js';
import { tryOf } from './helpers/attempts.js';
import type { AttemptRecord, Store } from '../src/store/types.js';
import { docRow } from './helpers/populate.js';
import { STORE_KINDS, freshPgUrl, pgSchemaAtVersion, skipUnavailable, sqliteAtVersion } from './helpers/stores.js';

// The export's latency_ms is the job's last attempt's. The migration export_latency keeps it on the
// job (a trigger on attempts); jobs last tried before it have NULL there and are looked up as before.

const RUN = 'run-latency';
const T0 = 1_754_000_000_000;

async function exported(store: Store): Promise<Record<string, number | null>> {
  const out: Record<string, number | null> = {};
  for await (const page of store.exportPages({ latency: true, response: false })) for (const r of page) out[r.id] = r.latencyMs;
  return out;
}

async function kept(store: Store): Promise<Record<string, number | null>> {
  const sql = 'SELECT i.id, j.latency_ms FROM items i JOIN jobs j ON j.key = i.job_key ORDER BY i.id';
  const rows =
    store instanceof SqliteStore
      ? (store.db.prepare(sql).all() as Array<{ id: string; latency_ms: number | null }>)
      : (await (store as PostgresStore).pool.query(sql)).rows;
  return Object.fromEntries(rows.map((r) => [r.id, r.latency_ms === null ? null : Number(r.latency_ms)]));
}

const attempt = (key: string, n: number, ms: number, outcome: AttemptRecord['outcome']): AttemptRecord =>
  tryOf(key, n, ms, outcome, { runId: RUN, startedAt: T0 + n * 100_000 });

/** a: answered at once; b: retried then answered; c: retried then failed; d: never tried. */
async function answerSome(store: Store): Promise<void> {
  const rows = ['a', 'b', 'c', 'd'].map((id) => docRow(id, `document ${id}`));
  await store.enqueue(rows, T0);
  const [a, b, c] = rows.map((r) => r.key) as [string, string, string];
  await store.startRun({ id: RUN, host: 'h', pid: 1, startedAt: T0, options: {} });
  await store.claim({ owner: RUN, limit: 3, now: T0, leaseUntil: T0 + 3_600_000, maxAttempts: 5 });
  const usage = { promptTokens: 10, completionTokens: 2 };
  await store.complete(a, { owner: RUN, output: 'A', response: '{}', usage, attempt: { ...attempt(a, 1, 111, 'done'), usage } });
  for (const key of [b, c]) {
    await store.recordAttempt(attempt(key, 1, 30_000, 'retry'), { countAttempt: true, error: '503 Service Unavailable' });
    await store.startRetry(key, RUN, T0 + 31_000, T0 + 3_600_000);
  }
  await store.complete(b, { owner: RUN, output: 'B', response: '{}', usage, attempt: { ...attempt(b, 2, 222, 'done'), usage } });
  await store.fail(c, RUN, '400 bad', { ...attempt(c, 2, 333, 'failed'), error: '400 bad' }, T0 + 300_000);
}

const EXPECTED = { a: 111, b: 222, c: 333, d: null };

describe.each(STORE_KINDS)('exported latency on $name', (kind) => {
  it("is the job's last attempt's, kept on the job as attempts are recorded", async (ctx) => {
    skipUnavailable(kind, ctx);
    const { store } = await kind.fresh();
    await answerSome(store);
    expect(await exported(store)).toEqual(EXPECTED);
    // read from the job, not looked up in attempts row by row
    expect(await kept(store)).toEqual(EXPECTED);
  });
});

/** Jobs tried before the migration: x answered after a retry, y retried and pending again, z never tried. */
const V6_ROWS = `INSERT INTO jobs (key, request, model, state, attempts, created_at, updated_at)
  VALUES ('kx', '{}', 'm', 'done', 2, 1, 1), ('ky', '{}', 'm', 'pending', 1, 1, 1), ('kz', '{}', 'm', 'pending', 0, 1, 1);
INSERT INTO items (id, source, job_key, created_at, updated_at) VALUES ('x', 's', 'kx', 1, 1), ('y', 's', 'ky', 1, 1), ('z', 's', 'kz', 1, 1);
INSERT INTO attempts (job_key, run_id, attempt, started_at, ended_at, latency_ms, status, outcome)
  VALUES ('kx', 'r', 1, 1, 2, 5000, 503, 'retry'), ('ky', 'r', 1, 1, 2, 7000, 503, 'retry'), ('kx', 'r', 2, 3, 4, 44, 200, 'done')`;

/** After the migration: y is tried again and answered, so its latency is the new attempt's. */
async function answerY(store: Store): Promise<void> {
  await store.startRun({ id: RUN, host: 'h', pid: 1, startedAt: T0, options: {} });
  await store.claim({ owner: RUN, limit: 1, now: T0, leaseUntil: T0 + 3_600_000, maxAttempts: 5 });
  const usage = { promptTokens: 1, completionTokens: 1 };
  await store.complete('ky', { owner: RUN, output: 'Y', response: '{}', usage, attempt: { ...attempt('ky', 2, 66, 'done'), usage } });
}

describe('exported latency of jobs tried before the migration export_latency', () => {
  it('sqlite: looked up for jobs tried before, kept for attempts after', async () => {
    const store = new SqliteStore(sqliteAtVersion(6, V6_ROWS));
    try {
      expect(await exported(store)).toEqual({ x: 44, y: 7000, z: null });
      expect(await kept(store)).toEqual({ x: null, y: null, z: null });
      await answerY(store);
      expect(await exported(store)).toEqual({ x: 44, y: 66, z: null });
      expect(await kept(store)).toEqual({ x: null, y: 66, z: null });
    } finally {
      await store.close();
    }
  });

  it('postgres: looked up for jobs tried before, kept for attempts after', async (ctx) => {
    skipUnavailable(STORE_KINDS.find((k) => k.name === 'postgres')!, ctx);
    const url = freshPgUrl();
    await pgSchemaAtVersion(url, 6, (client) => client.query(V6_ROWS));
    const store = await PostgresStore.open(url);
    try {
      expect(await exported(store)).toEqual({ x: 44, y: 7000, z: null });
      expect(await kept(store)).toEqual({ x: null, y: null, z: null });
      await answerY(store);
      expect(await exported(store)).toEqual({ x: 44, y: 66, z: null });
      expect(await kept(store)).toEqual({ x: null, y: 66, z: null });
    } finally {
      await store.close();
    }
  });
});
