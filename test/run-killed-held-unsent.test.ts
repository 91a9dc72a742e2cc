import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { collect, runCli, spawnCli } from './helpers/cli.js';
import { seedJobs } from './helpers/seed.js';
import { startFake } from './helpers/start-fake.js';
import { tempDir } from './helpers/tmp.js';
import { waitFor } from './helpers/wait.js';
import { lastBeat } from './helpers/e2e.js';

/** The jobs' states and attempts in claim order, read beside the run. */
function heldByDeadRun(db: string): Array<{ state: string; attempts: number }> {
  const conn = new Database(db, { readonly: true });
  try {
    return conn.prepare('SELECT state, attempts FROM jobs ORDER BY seq').all() as Array<{ state: string; attempts: number }>;
  } finally {
    conn.close();
  }
}

// src/store/unsent.ts. A run holds up to twice --concurrency: killed (a cron job under timeout -s
// KILL, an OOM kill), it used up the attempts of the jobs it held and never sent, and after a few
// kills they failed "gave up after N attempts: the run working on it died" without one request.
it('a run killed: the job it held and never sent keeps its attempt, the one it had sent uses it up', async () => {
  const fake = await startFake({ latencyMs: 60_000 }); // nothing answers before the kill
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  const keys = await seedJobs(store, 2);
  await store.close();
  const run = ['run', '--db', db, '--base-url', fake.url, '--progress', 'none', '--concurrency', '1', '--max-attempts', '1'];
  const child = spawnCli(run);
  const ended = collect(child);
  // doc-0 out, doc-1 held behind it; killed after a heartbeat that saw both
  await fake.waitForRequests(1);
  const sentAt = Date.now();
  await waitFor(() => lastBeat(db) > sentAt, { what: 'a heartbeat after the request went out' });
  child.kill('SIGKILL');
  expect((await ended).signal).toBe('SIGKILL');
  // both were the dead run's, each with the attempt its claim counted; only doc-0 had gone out
  expect(heldByDeadRun(db)).toEqual([
    { state: 'running', attempts: 1 },
    { state: 'running', attempts: 1 },
  ]);
  expect(keys.map((k) => fake.sentCount(k))).toEqual([1, 0]);
  fake.configure({ latencyMs: 5 });
  // the next run takes both back once the dead run has been quiet 5 s
  const next = await runCli(run, { timeoutMs: 30_000 });
  expect(next.code, next.stderr).toBe(2); // a job failed
  // doc-0 went out and its one attempt is used (it may be what killed the process): failed.
  // doc-1 never went out: it is sent now, and answered.
  expect(keys.map((k) => fake.sentCount(k))).toEqual([1, 1]);
  const status = JSON.parse((await runCli(['status', '--json', '--db', db])).stdout);
  expect(status.counts).toMatchObject({ done: 1, failed: 1, pending: 0, running: 0 });
  const shown = (await runCli(['show', 'doc-0', '--db', db])).stdout;
  expect(shown).toContain('gave up after 1 attempt: the run working on it died');
});
