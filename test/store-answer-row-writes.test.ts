import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { tryOf } from './helpers/attempts.js';
import { docRow } from './helpers/populate.js';
import { tempDir } from './helpers/tmp.js';

// SQLite writes a row whole on every UPDATE of it. An answer writes its job's row once: its latency
// goes in with the answer, and the attempts_latency trigger (migration 11) leaves a row alone that
// already holds the attempt's latency, while still keeping every other writer's latency right.

const RUN = 'run-writes';
const T0 = 1_754_000_000_000;

describe('sqlite: an answer writes its job row once', () => {
  it("stores the answer, its latency and its attempt with one write of the job's row", async () => {
    const store = new SqliteStore(`${tempDir()}/q.db`);
    const [a, b] = [docRow('a', 'first'), docRow('b', 'second')];
    await store.enqueue([a, b], T0);
    await store.startRun({ id: RUN, host: 'h', pid: 1, startedAt: T0, options: {} });
    await store.claim({ owner: RUN, limit: 2, now: T0, leaseUntil: T0 + 60_000, maxAttempts: 5 });
    const db = store.db;
    db.exec(`CREATE TEMP TABLE job_writes (seq INTEGER);
      CREATE TEMP TRIGGER count_job_writes AFTER UPDATE ON main.jobs BEGIN INSERT INTO job_writes VALUES (NEW.seq); END;`);
    const writes = () => db.prepare('SELECT count(*) FROM job_writes').pluck().get();
    const latency = (key: string) => db.prepare('SELECT latency_ms FROM jobs WHERE key = ?').pluck().get(key);
    const usage = { promptTokens: 3, completionTokens: 1 };
    const answer = (key: string, n: number, ms: number) => ({
      owner: RUN,
      output: 'ok',
      response: '{}',
      usage,
      attempt: { ...tryOf(key, n, ms, 'done', { runId: RUN, startedAt: T0 }), usage },
    });

    expect(await store.complete(a.key, answer(a.key, 1, 120))).toBe(true);
    expect(writes()).toBe(1);
    expect(latency(a.key)).toBe(120);

    // a retry's latency is still kept by the trigger, and the answer after it replaces it
    await store.recordAttempt(tryOf(b.key, 1, 30_000, 'retry', { runId: RUN, startedAt: T0 }), { countAttempt: true, error: '503' });
    expect(latency(b.key)).toBe(30_000);
    expect(await store.complete(b.key, answer(b.key, 2, 250))).toBe(true);
    expect(latency(b.key)).toBe(250);

    // a second answer for a done job is recorded, not stored: the latency is its attempt's, the job's last
    expect(await store.complete(a.key, answer(a.key, 2, 90))).toBe(false);
    expect(latency(a.key)).toBe(90);
    expect(db.prepare('SELECT count(*) FROM attempts WHERE job_seq = (SELECT seq FROM jobs WHERE key = ?)').pluck().get(a.key)).toBe(2);
    await store.close();
  });

  it('finds an answered job by the seq its claim gave, and never answers another job that took that seq', async () => {
    const store = new SqliteStore(`${tempDir()}/q.db`);
    const a = docRow('a', 'first');
    await store.enqueue([a], T0);
    await store.startRun({ id: RUN, host: 'h', pid: 1, startedAt: T0, options: {} });
    await store.claim({ owner: RUN, limit: 1, now: T0, leaseUntil: T0 + 60_000, maxAttempts: 5 });
    const db = store.db;
    const seqOf = (key: string) => db.prepare('SELECT seq FROM jobs WHERE key = ?').pluck().get(key);
    const claimedSeq = seqOf(a.key);
    // while a was out, it was dropped and b took its seq (SQLite reuses the highest rowid), then a came back
    db.prepare('DELETE FROM items WHERE job_key = ?').run(a.key);
    db.prepare('DELETE FROM jobs WHERE key = ?').run(a.key);
    const b = docRow('b', 'second');
    await store.enqueue([b], T0 + 1);
    await store.enqueue([docRow('a', 'first')], T0 + 2);
    expect(seqOf(b.key)).toBe(claimedSeq);
    const usage = { promptTokens: 3, completionTokens: 1 };
    const attempt = { ...tryOf(a.key, 1, 50, 'done', { runId: RUN, startedAt: T0 }), usage };
    expect(await store.complete(a.key, { owner: RUN, output: 'for a', response: '{}', usage, attempt })).toBe(true);
    const row = (key: string) => db.prepare('SELECT state, output FROM jobs WHERE key = ?').get(key);
    expect(row(a.key)).toEqual({ state: 'done', output: 'for a' });
    expect(row(b.key)).toEqual({ state: 'pending', output: null });
    await store.close();
  });
});
