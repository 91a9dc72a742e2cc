import { spawn, type ChildProcess } from 'node:child_process';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { isProcessStopped } from '../src/process-alive.js';
import { OpenAIProvider } from '../src/provider/openai.js';
import { runQueue } from '../src/scheduler/run-queue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { claimOpts } from './helpers/stores.js';
import { seedJobs } from './helpers/seed.js';
import { startFake } from './helpers/start-fake.js';
import { tempDir } from './helpers/tmp.js';
import { runCli } from './helpers/cli.js';

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) {
    c.kill('SIGKILL');
  }
});

/** A real process on this machine, stopped as Ctrl-Z stops one (SIGSTOP). */
async function stoppedProcess(): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  children.push(child);
  await new Promise((resolve) => child.once('spawn', resolve));
  child.kill('SIGSTOP');
  for (let i = 0; i < 100 && !isProcessStopped(child.pid!); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  return child;
}

/**
 * A run stopped with Ctrl-Z cannot beat, and its leases run out; the requests it had out are
 * answered to it when it is continued (`fg`). Taken back by another run, those jobs were sent by
 * both, and paid twice. Its jobs stay its own, and the user is told what gets them done.
 */
// /proc tells a stopped process: elsewhere a run stopped with Ctrl-Z is taken for silent, as before
describe.skipIf(process.platform !== 'linux')('a run whose queue has jobs held by a run stopped on this machine (Ctrl-Z)', () => {
  it('leaves them to it, past their leases, says so with its pid, and takes them back once it is gone', async () => {
    const stopped = await stoppedProcess();
    expect(isProcessStopped(stopped.pid!)).toBe(true);
    expect(isProcessStopped(process.pid)).toBe(false);
    const fake = await startFake({ latencyMs: 5 });
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 20);
    const now = Date.now();
    // its run started once its process was up (the run's own), and has been silent 2 minutes, holding
    // 5 jobs whose leases ran out a minute ago
    await store.startRun({ id: 'run-stopped', host: hostname(), pid: stopped.pid!, startedAt: now, options: {} });
    await store.heartbeat('run-stopped', now - 120_000, now - 60_000, {} as never);
    const held = await store.claim(claimOpts({ owner: 'run-stopped', limit: 5, now: now - 120_000, leaseUntil: now - 60_000 }));
    expect(held.jobs).toHaveLength(5);

    const provider = new OpenAIProvider({ baseUrl: fake.url, apiKey: 'sk-test-secret', timeoutMs: 5000 });
    const warnings: string[] = [];
    const run = () =>
      runQueue(
        {
          store,
          provider,
          emit: (event, payload) => {
            if (event === 'warning') warnings.push((payload as { message: string }).message);
          },
        },
        { concurrency: 4, heartbeatMs: 100 },
      );
    const first = await run();
    // the others done; its 5 left to it, not sent (the fake saw 15 requests)
    expect(first.done).toBe(15);
    expect(fake.requests).toHaveLength(15);
    expect((await store.status()).counts).toMatchObject({ done: 15, running: 5, pending: 0 });
    expect(warnings.filter((w) => w.includes(`run run-stop (pid ${stopped.pid}) is stopped (Ctrl-Z or SIGSTOP)`))).toHaveLength(1);
    expect(warnings[0]).toContain(`fg in its terminal, or kill -CONT ${stopped.pid}`);
    // status says the same of it, rather than "it probably died; its jobs go back to pending"
    const status = await runCli(['status', '--db', db]);
    expect(status.stdout).toContain(
      `pid ${stopped.pid} is stopped (Ctrl-Z): it keeps its jobs until continued (fg, or kill -CONT ${stopped.pid})`,
    );
    expect(status.stdout).not.toContain('probably died');
    // nor is a run proposed for them: it would leave them be
    expect(status.stdout).not.toContain('a stopped run left running');
    // heard from 30 s ago, it is still counted live: shown with no rate or ETA, as it sends nothing
    await store.heartbeat('run-stopped', Date.now() - 30_000, Date.now() - 1, { jobsPerSecond: 3 } as never);
    const live = (await runCli(['status', '--db', db])).stdout;
    expect(live).toMatch(/^running {3}run-stop .* for \S+\n/m);
    expect(live).not.toMatch(/run-stop.*(jobs\/s|ETA)/);
    expect(live).toContain(`pid ${stopped.pid} is stopped (Ctrl-Z)`);
    // and its last rate is not the queue's: no pace, no ETA from it
    const json = JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout);
    expect([json.jobsPerSecond, json.etaSeconds]).toEqual([null, null]);
    // nor does estimate count them to send
    const estimate = await runCli(['estimate', '--db', db]);
    expect(estimate.stdout).toContain(': 0 jobs to send\n  5 more are held by a live run, a run stopped here, or a batch at the provider');

    // ended for good: the next run takes them back and does them
    stopped.kill('SIGKILL');
    await new Promise((resolve) => stopped.once('exit', resolve));
    const second = await run();
    expect(second.done).toBe(5);
    expect((await store.status()).counts).toMatchObject({ done: 20, running: 0, pending: 0 });
    await provider.close();
    await store.close();
  }, 30_000);

  it('takes back the jobs of a dead run whose pid a stopped process took since (it started after the run)', async () => {
    const stopped = await stoppedProcess();
    const fake = await startFake({ latencyMs: 5 });
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 6);
    const now = Date.now();
    // the run started 2 minutes ago, long before the stopped process that has its pid now (an editor left with Ctrl-Z)
    await store.startRun({ id: 'run-old', host: hostname(), pid: stopped.pid!, startedAt: now - 120_000, options: {} });
    await store.heartbeat('run-old', now - 120_000, now - 60_000, {} as never);
    await store.claim(claimOpts({ owner: 'run-old', limit: 2, now: now - 120_000, leaseUntil: now - 60_000 }));
    const provider = new OpenAIProvider({ baseUrl: fake.url, apiKey: 'sk-test-secret', timeoutMs: 5000 });
    const warnings: string[] = [];
    const summary = await runQueue(
      { store, provider, emit: (event, payload) => event === 'warning' && warnings.push((payload as { message: string }).message) },
      { concurrency: 4, heartbeatMs: 100 },
    );
    expect(summary.done).toBe(6);
    expect(warnings.join('\n')).not.toContain('is stopped');
    await provider.close();
    await store.close();
  }, 30_000);
});
