import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { tryOf } from './helpers/attempts.js';
import type { AttemptRecord } from '../src/store/types.js';
import { sqliteAtVersion } from './helpers/stores.js';

// Since migration 9 the SQLite store finds a job's attempts by the job's seq; attempts stored before
// it have none and are found by key. A queue upgraded with history must show, export and drop both.

const RUN = 'run-after';
const T0 = 1_760_000_000_000;

const attempt = (key: string, n: number, ms: number, outcome: AttemptRecord['outcome']): AttemptRecord =>
  tryOf(key, n, ms, outcome, { runId: RUN, startedAt: T0 + n * 1000 });

// k1 and k3 were tried once and wait to be tried again; k2 was answered before latencies were kept
// on jobs (migration 7), so its latency is only in its attempt.
const BEFORE = `INSERT INTO jobs (seq, key, request, model, state, attempts, output, created_at, updated_at) VALUES
    (1, 'k1', '{"a":1}', 'm', 'pending', 1, NULL, 1, 1),
    (2, 'k2', '{"a":2}', 'm', 'done', 1, 'hi', 1, 1),
    (3, 'k3', '{"a":3}', 'm', 'pending', 1, NULL, 1, 1);
  INSERT INTO items (id, source, job_key, created_at, updated_at) VALUES ('a', 'a.txt', 'k1', 1, 1), ('b', 'b.txt', 'k2', 1, 1),
    ('c', 'c.txt', 'k3', 1, 1);
  INSERT INTO attempts (job_key, run_id, attempt, started_at, ended_at, latency_ms, status, outcome) VALUES
    ('k1', 'old', 1, 10, 30, 20, 503, 'retry'), ('k2', 'old', 1, 10, 55, 45, 200, 'done'), ('k3', 'old', 1, 10, 40, 30, 503, 'retry');
  UPDATE jobs SET latency_ms = NULL WHERE key = 'k2';`;

describe('attempts found by their job seq (SQLite migration 9)', () => {
  it('a queue left at version 8 stores attempts as version 8 did (the rebuild of jobs keeps the trigger of its time)', () => {
    // an llmq that knows schema 8 would write this; the trigger must not read a column migration 9 adds
    const path = sqliteAtVersion(
      8,
      `INSERT INTO jobs (key, request, model, created_at, updated_at) VALUES ('k1', '{}', 'm', 1, 1);
      INSERT INTO attempts (job_key, run_id, attempt, started_at, ended_at, latency_ms, status, outcome)
        VALUES ('k1', 'r', 1, 1, 2, 42, 200, 'done');`,
    );
    const raw = new Database(path, { readonly: true });
    try {
      expect(raw.prepare("SELECT latency_ms FROM jobs WHERE key = 'k1'").pluck().get()).toBe(42);
    } finally {
      raw.close();
    }
  });

  it('an upgraded queue shows, exports and drops the attempts stored before beside the ones after', async () => {
    const store = new SqliteStore(sqliteAtVersion(8, BEFORE));
    try {
      expect((await store.item('a'))!.attempts.map((a) => a.runId)).toEqual(['old']);

      // k1 and k3 are tried again: k1 fails once more and goes back to pending, k3 is answered
      await store.startRun({ id: RUN, host: 'h', pid: 1, startedAt: T0, options: {} });
      const claimed = await store.claim({ owner: RUN, limit: 2, now: T0, leaseUntil: T0 + 60_000, maxAttempts: 5 });
      expect(claimed.jobs.map((j) => j.key)).toEqual(['k1', 'k3']);
      await store.recordAttempt(attempt('k1', 2, 700, 'retry'), { countAttempt: true, error: '503 Service Unavailable' });
      const usage = { promptTokens: 3, completionTokens: 1 };
      await store.complete('k3', { owner: RUN, output: 'C', response: '{}', usage, attempt: { ...attempt('k3', 2, 66, 'done'), usage } });
      expect(await store.release(RUN, { refund: false, now: T0 + 5000 })).toBe(1);

      // show: both eras, in the order they happened
      expect((await store.item('a'))!.attempts.map((a) => [a.runId, a.attempt, a.latencyMs])).toEqual([
        ['old', 1, 20],
        [RUN, 2, 700],
      ]);
      expect((await store.item('c'))!.attempts.map((a) => [a.runId, a.outcome])).toEqual([
        ['old', 'retry'],
        [RUN, 'done'],
      ]);
      // export: k2's latency is looked up among the old attempts, k3's kept on the job by the new one
      const latency: Record<string, number | null> = {};
      for await (const page of store.exportPages({ latency: true, response: false })) for (const r of page) latency[r.id] = r.latencyMs;
      expect(latency).toEqual({ a: 700, b: 45, c: 66 });

      // a's document changes: its old job is dropped with the attempts of both eras
      await store.enqueue([{ itemId: 'a', source: 'a.txt', meta: null, key: 'k1-new', request: '{"a":11}', model: 'm', priority: 0 }], T0);
      const left = store.db.prepare('SELECT job_key, job_seq FROM attempts ORDER BY id').all();
      // and every attempt stored since the upgrade carries its job's seq (the index a run appends to)
      expect(left).toEqual([
        { job_key: 'k2', job_seq: null },
        { job_key: 'k3', job_seq: null },
        { job_key: 'k3', job_seq: 3 },
      ]);
    } finally {
      await store.close();
    }
  });
});
