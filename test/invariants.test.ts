/**
 * Invariants of docs/architecture.md that no other test would catch breaking, each proved on a
 * real SQLite file with the real CLI as a child process against the HTTP fake. The others are
 * guarded where the doc's table says.
 */
import Database from 'better-sqlite3';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { collect, runCli, spawnCli } from './helpers/cli.js';
import { lastBeat, readDb } from './helpers/e2e.js';
import { answerFor, reply } from './helpers/fake-openai.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';
import { waitFor } from './helpers/wait.js';

async function setup(jobs: number) {
  const fake = await startFake({ latencyMs: 5 });
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  const keys = await seedJobs(store, jobs);
  await store.close();
  return { fake, db, keys };
}

/** The job as another connection sees it right now: only what has been committed. */
function onDisk(db: string, key: string) {
  const d = new Database(db, { readonly: true });
  try {
    return d.prepare('SELECT state, attempts, lease_owner FROM jobs WHERE key = ?').get(key) as {
      state: string;
      attempts: number;
      lease_owner: string | null;
    };
  } finally {
    d.close();
  }
}

describe('invariant 2: the attempt is counted before the request leaves', () => {
  it('each request reaches the provider with its attempt already committed, so runs killed mid-request use up the job', async () => {
    const { fake, db, keys } = await setup(1);
    const seen: Array<ReturnType<typeof onDisk>> = [];
    fake.respond((req) => {
      seen.push(onDisk(db, req.key));
      return reply.hang();
    });
    const args = ['run', '--db', db, '--base-url', fake.url, '--max-attempts', '2', '--progress', 'none'];
    for (const n of [1, 2]) {
      const child = spawnCli(args);
      const exited = collect(child, 30_000);
      // The second run waits until the first one's heartbeat has gone quiet before taking the job back.
      await fake.waitForRequests(n, 25_000);
      // killed once a heartbeat has seen the request out: what a run's last heartbeat had not seen
      // (claimed since, sent or not) gets its attempt back, a bounded number of times (unsent.ts)
      const sentAt = Date.now();
      await waitFor(() => lastBeat(db) > sentAt, { what: 'a heartbeat after the request went out' });
      child.kill('SIGKILL');
      expect((await exited).signal).toBe('SIGKILL');
      expect(seen[n - 1]).toMatchObject({ state: 'running', attempts: n });
      expect(seen[n - 1]!.lease_owner).not.toBeNull();
    }
    // Both tries died with their request in flight; the next run fails the job instead of sending it a third time.
    const last = await runCli(args, { timeoutMs: 30_000 });
    expect(last.code, last.stderr).toBe(2);
    expect(fake.received).toBe(2);
    const [job] = readDb(db).jobs;
    expect(job).toMatchObject({ key: keys[0], state: 'failed', attempts: 2 });
    expect(job!.error).toMatch(/gave up after 2 attempts/);
  }, 60_000);
});

describe('invariant 3: the answer is stored in the same transaction that marks the job done', () => {
  it('when any one of the answer, the done state or the finishing attempt row cannot be written, none of them is', async () => {
    const { fake, db, keys } = await setup(6);
    // One write of `complete` refused per poisoned job. Were the three writes split over two
    // transactions, the poisoned one would sometimes come last and leave the others committed.
    const poison = {
      answer: `BEFORE UPDATE ON jobs WHEN NEW.key = '${keys[1]}' AND NEW.output IS NOT NULL AND OLD.output IS NULL`,
      state: `BEFORE UPDATE ON jobs WHEN NEW.key = '${keys[2]}' AND NEW.state = 'done' AND OLD.state <> 'done'`,
      attempt: `BEFORE INSERT ON attempts WHEN NEW.job_key = '${keys[3]}' AND NEW.outcome = 'done'`,
    };
    const args = ['run', '--db', db, '--base-url', fake.url, '--concurrency', '1', '--progress', 'none'];
    const consistent = () => {
      const { jobs, attempts } = readDb(db);
      const finished = new Set(attempts.filter((a) => a.outcome === 'done').map((a) => a.job_key));
      for (const j of jobs) {
        const done = j.state === 'done';
        expect({ key: j.key, done, answered: j.output !== null, finished: finished.has(j.key) }).toEqual({
          key: j.key,
          done,
          answered: done,
          finished: done,
        });
        if (done) expect(j.output).toBe(answerFor(j.request));
      }
      return jobs;
    };
    for (const [name, trigger] of Object.entries(poison)) {
      const raw = new Database(db);
      raw.exec(`CREATE TRIGGER poison_${name} ${trigger} BEGIN SELECT RAISE(ABORT, 'poisoned ${name}'); END`);
      raw.close();
      const r = await runCli(args, { timeoutMs: 30_000 });
      expect(r.code, r.stderr).not.toBe(0);
      const poisoned = consistent().find((j) => j.key === keys[Object.keys(poison).indexOf(name) + 1])!;
      expect(poisoned.state, name).not.toBe('done');
      expect(fake.sentCount(poisoned.key), name).toBeGreaterThan(0);
      const clean = new Database(db);
      clean.exec(`DROP TRIGGER poison_${name}`);
      clean.close();
    }
    const r = await runCli(args, { timeoutMs: 30_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(consistent().every((j) => j.state === 'done')).toBe(true);
  }, 60_000);
});

describe('invariant 10: commands never create a database they were only meant to use', () => {
  it('run and retry-failed at a mistyped --db create nothing', async () => {
    const dir = tempDir();
    const db = join(dir, 'typo.db');
    for (const args of [['run', '--provider', 'mock'], ['retry-failed']]) {
      const r = await runCli([...args, '--db', db]);
      expect(r.code, args[0]).toBe(1);
      expect(r.stderr).toMatch(/There is no queue at .*typo\.db\. Create one with: llmq enqueue/);
    }
    expect(readdirSync(dir)).toEqual([]);
  });
});
