import { hostname } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { runCli } from './helpers/cli.js';
import { firstSnapshot, startServe } from './helpers/dashboard.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { gonePid } from './helpers/pids.js';

// A run killed a moment ago still has a recent heartbeat: it counts as live until a few seconds of
// quiet say it is dead (its pid missing here could be a twin machine's of the same name). Meanwhile
// status says that its process is not on this machine, instead of showing it running as usual.

async function queueWithRun(pid: number, beatAgoMs: number): Promise<string> {
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  await seedJobs(store, 3);
  const at = Date.now() - beatAgoMs;
  await store.startRun({ id: 'run00001-just', host: hostname(), pid, startedAt: at - 30_000, options: {} });
  await store.heartbeat('run00001-just', at, at + 60_000, { jobsPerSecond: 5, done: 2 } as never);
  await store.close();
  return db;
}

describe('status of a run whose process went a moment ago', () => {
  it('says its pid is not running here while its heartbeat is still recent', async () => {
    const pid = gonePid();
    const db = await queueWithRun(pid, 1_000);
    const text = await runCli(['status', '--db', db]);
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain(`pid ${pid} is not running here: it ended or was killed; the next llmq run takes its jobs back`);
    // neither its last rate nor an ETA from it: it most likely sends nothing now
    expect(text.stdout).toMatch(/^running {3}run00001 \(.+ pid \d+\) for 3\ds$/m);
    const json = await runCli(['status', '--db', db, '--json']);
    const report = JSON.parse(json.stdout);
    const [run] = report.activeRuns;
    expect([run.live, run.gone, run.pidGoneHere]).toEqual([true, false, true]);
    expect([report.jobsPerSecond, report.etaSeconds]).toEqual([null, null]);
    const serve = await startServe(['--db', db, '--poll', '0.25']);
    try {
      const { report } = await firstSnapshot(serve.url);
      expect(report.activeRuns[0].pidGoneHere).toBe(true);
    } finally {
      await serve.stop();
    }
  });

  it('says that the runs working on the queue take its jobs back, when some do', async () => {
    const pid = gonePid();
    const db = await queueWithRun(pid, 1_000);
    const store = new SqliteStore(db);
    const now = Date.now();
    // a live run of this process beside it
    await store.startRun({ id: 'run00002-live', host: hostname(), pid: process.pid, startedAt: now - 5_000, options: {} });
    await store.heartbeat('run00002-live', now, now + 60_000, { jobsPerSecond: 5, done: 1 } as never);
    await store.close();
    const text = await runCli(['status', '--db', db]);
    expect(text.stdout).toContain(
      `pid ${pid} is not running here: it ended or was killed; the run working on this queue takes its jobs back`,
    );
  });

  it('says nothing of the kind of a run whose process is here, or once the quiet says it died', async () => {
    const here = await runCli(['status', '--db', await queueWithRun(process.pid, 1_000), '--json']);
    expect(JSON.parse(here.stdout).activeRuns[0]).toMatchObject({ live: true, pidGoneHere: false });
    const pid = gonePid();
    const died = await runCli(['status', '--db', await queueWithRun(pid, 10_000), '--json']);
    expect(JSON.parse(died.stdout).activeRuns[0]).toMatchObject({ live: false, gone: true, pidGoneHere: false });
    const diedText = await runCli(['status', '--db', await queueWithRun(pid, 10_000)]);
    expect(diedText.stdout).not.toContain('is not running here');
  });
});
