/**
 * Hardening: the ways a run is stopped from outside besides Ctrl-C. A reader of stdout or stderr
 * that goes away (`llmq run --json | head -5`) and a closed terminal (SIGHUP) used to end the
 * process at once, leaving claimed jobs `running`; both must stop like SIGINT.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { collect, runCli, spawnCli, type CliResult } from './helpers/cli.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';

async function setup(jobs: number, latencyMs: number) {
  const fake = await startFake({ latencyMs, record: false });
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  await seedJobs(store, jobs);
  await store.close();
  return { fake, db };
}

/** Jobs per state, as status counts them; states without jobs left out. */
async function countStates(db: string): Promise<Record<string, number>> {
  const store = new SqliteStore(db);
  const { counts } = await store.status();
  await store.close();
  return Object.fromEntries(Object.entries(counts).filter(([, n]) => n > 0));
}

/**
 * Run the CLI with one output a real pipe that this side closes after reading `lines` lines from
 * it, as `| head -n` does; the other output is collected. Resolves when the child exits.
 */
function runUntilReaderLeaves(args: readonly string[], closing: 'stdout' | 'stderr', lines: number): Promise<CliResult & { read: string }> {
  const child = spawnCli(args);
  const pipe = child[closing]!;
  const other = child[closing === 'stdout' ? 'stderr' : 'stdout']!;
  let read = '';
  let otherText = '';
  pipe.setEncoding('utf8').on('data', (d: string) => {
    read += d;
    if (read.split('\n').length > lines) pipe.destroy();
  });
  other.setEncoding('utf8').on('data', (d: string) => (otherText += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`llmq did not stop within 60 s after its reader left\nread: ${read}\nother: ${otherText}`));
    }, 60_000);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, read, stdout: closing === 'stdout' ? read : otherText, stderr: closing === 'stderr' ? read : otherText });
    });
  });
}

async function expectStoppedCleanly(db: string, total: number, r: CliResult, received: number): Promise<void> {
  expect(r.code, r.stderr).toBe(130);
  expect(r.stderr + r.stdout).not.toMatch(/unexpected error|EPIPE|at .*\.js:\d+/);
  const states = await countStates(db);
  expect(states.running ?? 0).toBe(0);
  expect((states.done ?? 0) + (states.pending ?? 0)).toBe(total);
  expect(states.done ?? 0).toBeGreaterThan(0);
  // Every request that went out was answered and its answer stored: nothing was paid for twice.
  expect(states.done).toBe(received);
}

describe('llmq run stops like Ctrl-C when it is told to go away', () => {
  it('a closed stdout pipe (run --json | head -5) stops the run: exit 130, nothing left running', async () => {
    const total = 300;
    const { fake, db } = await setup(total, 150);
    const r = await runUntilReaderLeaves(['run', '--db', db, '--base-url', fake.url, '--json', '--concurrency', '8'], 'stdout', 5);
    await expectStoppedCleanly(db, total, r, fake.received);
    expect((await countStates(db)).pending ?? 0).toBeGreaterThan(0);
  }, 90_000);

  it('a closed stderr pipe (run --progress plain 2>&1 | head -2) stops the run the same way', async () => {
    const total = 400;
    const { fake, db } = await setup(total, 200);
    // The plain display writes its first line at once and the next one 5 s later: that write meets the closed pipe.
    const r = await runUntilReaderLeaves(
      ['run', '--db', db, '--base-url', fake.url, '--progress', 'plain', '--concurrency', '4'],
      'stderr',
      1,
    );
    await expectStoppedCleanly(db, total, r, fake.received);
    expect((await countStates(db)).pending ?? 0).toBeGreaterThan(0);
  }, 90_000);

  it('SIGHUP (a closed terminal) stops like SIGTERM: in-flight answers stored, exit 130, nothing left running', async () => {
    const total = 200;
    const { fake, db } = await setup(total, 200);
    const child = spawnCli(['run', '--db', db, '--base-url', fake.url, '--concurrency', '4', '--progress', 'plain']);
    const done = collect(child);
    await fake.waitForRequests(10);
    child.kill('SIGHUP');
    const r = await done;
    await expectStoppedCleanly(db, total, r, fake.received);
  });

  it('other commands stop quietly when their reader leaves (export | head): exit 130, the output was cut off', async () => {
    const { fake, db } = await setup(2000, 0);
    const run = await runCli(['run', '--db', db, '--base-url', fake.url, '--concurrency', '16', '--progress', 'none']);
    expect(run.code).toBe(0);
    const r = await runUntilReaderLeaves(['export', '--db', db], 'stdout', 3);
    expect(r.code, r.stderr).toBe(130);
    expect(r.stderr).toBe('');
  }, 60_000);
});
