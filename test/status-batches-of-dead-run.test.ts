import { hostname } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildBatchesReport, renderBatches } from '../src/report/batches-text.js';
import { NO_PAINT } from '../src/report/format.js';
import { BATCH_TAKEOVER_MS } from '../src/run-owners.js';
import type { BatchRow } from '../src/store/batches.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { runCli } from './helpers/cli.js';
import { firstSnapshot, startServe } from './helpers/dashboard.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { gonePid } from './helpers/pids.js';

// A batch run killed outright leaves its submissions recorded as live until the next batch run takes
// them over. `status` and `llmq batches` say so once the run is known dead; a mock batch lived in
// the dead process, so it is not live at all.

/** A batch of `jobs` claimed jobs submitted at `at` by run `runId`, as a batch run leaves it while the provider works. */
async function submitBatch(
  store: SqliteStore,
  o: { id: string; runId: string; baseUrl: string; providerBatchId: string; jobs: number; at: number },
) {
  await store.batches.begin({ id: o.id, runId: o.runId, baseUrl: o.baseUrl, now: o.at });
  await store.claim({ owner: `batch:${o.id}`, limit: o.jobs, now: o.at, leaseUntil: o.at + 86_400_000, maxAttempts: 5 });
  await store.batches.noteJobs(o.id, o.jobs, o.at);
  await store.batches.noteInputFile(o.id, `file-${o.id}`, o.at);
  await store.batches.submitted(o.id, o.providerBatchId, 'in_progress', o.at);
}

async function queueWithDeadRun(pid: number, quietFor: number) {
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  await seedJobs(store, 5);
  const at = Date.now() - quietFor;
  await store.startRun({ id: 'dead0001-run', host: hostname(), pid, startedAt: at, options: { via: 'batch' } });
  const runId = 'dead0001-run';
  await submitBatch(store, { id: 'sub-mock', runId, baseUrl: 'mock', providerBatchId: 'batch_mock-1', jobs: 2, at });
  await submitBatch(store, { id: 'sub-real', runId, baseUrl: 'http://127.0.0.1:9/v1', providerBatchId: 'batch_real', jobs: 3, at });
  await store.close();
  return db;
}

describe('status of a batch run killed outright', () => {
  it('says its real batch is taken over by the next run, and its mock batch went with its process, not live', async () => {
    const db = await queueWithDeadRun(gonePid(), 10_000);
    const status = await runCli(['status', '--db', db]);
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain('batches   1 live');
    expect(status.stdout).toMatch(/batch_mock-1 {2}gone with its process \(mock\) {2}2 jobs · its run died: the next run sends them again/);
    expect(status.stdout).toMatch(/batch_real {2}in_progress {2}3 jobs · its run died: the next llmq run --via batch takes it over/);
    const listed = await runCli(['batches', '--db', db, '--json']);
    const { live, batches } = JSON.parse(listed.stdout);
    expect(live).toBe(1);
    expect(
      batches
        .map((b: { providerBatchId: string; runDied: boolean; runEnded: boolean }) => [b.providerBatchId, b.runDied, b.runEnded])
        .sort(),
    ).toEqual([
      ['batch_mock-1', true, false],
      ['batch_real', true, false],
    ]);
    // the dashboard's report has them as status --json does
    const serve = await startServe(['--db', db, '--poll', '0.25']);
    try {
      const { report } = await firstSnapshot(serve.url);
      expect(report.batches.live).toBe(1);
      expect(report.batches.rows.map((b: { runDied: boolean }) => b.runDied)).toEqual([true, true]);
    } finally {
      await serve.stop();
    }
  });

  it('leaves them as they are while the run may still be alive: its process here, or heard from lately', async () => {
    for (const db of [await queueWithDeadRun(process.pid, 10_000), await queueWithDeadRun(gonePid(), 1_000)]) {
      const status = await runCli(['status', '--db', db, '--json']);
      const { batches } = JSON.parse(status.stdout);
      expect(batches.live).toBe(2);
      expect(
        batches.rows.every((b: { runDied: boolean; providerStatus: string }) => !b.runDied && b.providerStatus === 'in_progress'),
      ).toBe(true);
    }
  });
});

describe('status of a mock batch run killed a moment ago', () => {
  it('says the next run of any lane takes its jobs back: a mock batch went with its process, no batch run collects it', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 3);
    const at = Date.now() - 500; // beat a moment ago: its pid gone, not yet known dead
    await store.startRun({
      id: 'mock0001-run',
      host: hostname(),
      pid: gonePid(),
      startedAt: at,
      options: { via: 'batch', provider: 'mock' },
    });
    await submitBatch(store, { id: 'sub-mock', runId: 'mock0001-run', baseUrl: 'mock', providerBatchId: 'batch_mock-1', jobs: 3, at });
    await store.close();
    const status = await runCli(['status', '--db', db]);
    expect(status.stdout).toMatch(/pid \d+ is not running here: it ended or was killed; the next llmq run takes its jobs back/);
    expect(status.stdout).not.toContain('--via batch --provider mock takes');
  });
});

describe('status of a queue with more batches out than it lists', () => {
  it('counts every live one (past the 50 newest), lists ten and says how many more; llmq batches lists them all', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 60);
    const at = Date.now() - 60_000;
    await store.startRun({ id: 'live0001-run', host: hostname(), pid: process.pid, startedAt: at, options: { via: 'batch' } });
    for (let i = 0; i < 55; i++) {
      const id = `sub-${String(i).padStart(2, '0')}`;
      await store.batches.begin({ id, runId: 'live0001-run', baseUrl: 'http://127.0.0.1:9/v1', now: at + i });
      await store.claim({ owner: `batch:${id}`, limit: 1, now: at + i, leaseUntil: at + 86_400_000, maxAttempts: 5 });
      await store.batches.noteJobs(id, 1, at + i);
      await store.batches.submitted(id, `batch_${i}`, 'in_progress', at + i);
    }
    await store.close();
    const status = await runCli(['status', '--db', db]);
    expect(status.stdout).toContain('batches   55 live\n  batch_54  in_progress');
    expect(status.stdout.match(/^ {2}batch_\d+ {2}in_progress/gm)).toHaveLength(10);
    expect(status.stdout).toContain('  and 45 more live: llmq batches lists them all');
    expect(JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout).batches.live).toBe(55);
    const listed = await runCli(['batches', '--db', db]);
    expect(listed.stdout.match(/^ {2}batch_\d+ {2}in_progress/gm)).toHaveLength(55);
  });
});

describe('which live batches wait for a run --via batch', () => {
  const now = 10_000_000;
  const row = (id: string, runId: string, over: Partial<BatchRow> = {}): BatchRow => ({
    id,
    runId,
    baseUrl: 'http://127.0.0.1:9/v1',
    apiKey: null,
    state: 'submitted',
    providerBatchId: `batch_${id}`,
    inputFileId: `file-${id}`,
    providerStatus: 'in_progress',
    progress: null,
    jobs: 10,
    done: 0,
    failed: 0,
    requeued: 0,
    error: null,
    createdAt: now - 1000,
    updatedAt: now - 1000,
    endedAt: null,
    ...over,
  });
  it('those of a run ended or silent past the takeover (wherever it ran), not a beating one; never a mock or unsent one', () => {
    const report = buildBatchesReport(
      [
        row('beating', 'r-beating'),
        row('silent', 'r-silent'),
        row('ended', 'r-ended'),
        row('other-endpoint', 'r-ended', { baseUrl: 'https://api.openai.com/v1', jobs: 3 }),
        row('mock', 'r-ended', { baseUrl: 'mock' }),
        row('unsent', 'r-ended', { state: 'preparing', inputFileId: null, providerBatchId: null }),
      ],
      now,
      {
        active: [
          { id: 'r-beating', heartbeatAt: now - 2_000 },
          { id: 'r-silent', heartbeatAt: now - BATCH_TAKEOVER_MS - 1 },
        ],
        dead: new Set(),
      },
    );
    expect(report.rows.filter((r) => r.runEnded).map((r) => r.id)).toEqual(['silent', 'ended', 'other-endpoint', 'mock', 'unsent']);
    expect(report.uncollected).toEqual([
      { baseUrl: 'http://127.0.0.1:9/v1', jobs: 20 },
      { baseUrl: 'https://api.openai.com/v1', jobs: 3 },
    ]);
    // the mock's went with its process: not live
    expect(report.live).toBe(5);
  });

  it('the line past the rows listed counts live ones and mock ones gone with their run apart, as the header does', () => {
    const rows = [
      ...Array.from({ length: 3 }, (_, i) => row(`live${i}`, 'r-beating')),
      ...Array.from({ length: 4 }, (_, i) => row(`mock${i}`, 'r-ended', { baseUrl: 'mock' })),
    ];
    const owners = { active: [{ id: 'r-beating', heartbeatAt: now - 2_000 }], dead: new Set<string>() };
    const text = renderBatches(buildBatchesReport(rows, now, owners), NO_PAINT, 2);
    expect(text).toContain('batches   3 live\n');
    expect(text).toContain('  and 1 more live, 4 more gone with their run (mock): llmq batches lists them all');
    const allMock = renderBatches(buildBatchesReport(rows.slice(3), now, owners), NO_PAINT, 2);
    expect(allMock).toContain('  and 2 more gone with their run (mock): llmq batches lists them all');
  });
});

/** A queue of 5 jobs, 3 of them out in a batch to http://127.0.0.1:9/v1 sent by a run on another machine silent for 100 s (past status's 90 s, and past the 60 s takeover). */
async function queueWithFarBatch(): Promise<string> {
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  await seedJobs(store, 5);
  const at = Date.now() - 100_000;
  await store.startRun({ id: 'far00001-run', host: 'another-machine', pid: 4242, startedAt: at, options: { via: 'batch' } });
  await submitBatch(store, {
    id: 'sub-far',
    runId: 'far00001-run',
    baseUrl: 'http://127.0.0.1:9/v1',
    providerBatchId: 'batch_far',
    jobs: 3,
    at,
  });
  await store.close();
  return db;
}

/** A run of this process, live from now on, started with `options`. */
async function startLiveRun(db: string, id: string, options: Record<string, unknown>): Promise<void> {
  const store = new SqliteStore(db);
  await store.startRun({ id, host: hostname(), pid: process.pid, startedAt: Date.now(), options });
  await store.close();
}

describe('status of a batch run gone silent on another machine', () => {
  it('names the batch run that takes its batches over, to their endpoint, and the command that collects them', async () => {
    const db = await queueWithFarBatch();
    const status = await runCli(['status', '--db', db]);
    const collect = `llmq run --via batch --base-url http://127.0.0.1:9/v1 --db ${db}`;
    expect(status.stdout).toContain(`it probably died; the next ${collect} takes its batches over`);
    expect(status.stdout).toMatch(/to collect the 3 jobs in batches no run is collecting:\s+llmq run --via batch/);
    expect(status.stdout).toContain('no run is collecting it: the next llmq run --via batch takes it over');
    // llmq batches names the same command under its rows
    const batches = await runCli(['batches', '--db', db]);
    expect(batches.stdout).toContain(`to collect the 3 jobs in batches no run is collecting: ${collect}\n`);
  });

  it('still names that command while a plain run works the queue (it never collects batches), not while a batch run does', async () => {
    const db = await queueWithFarBatch();
    await startLiveRun(db, 'plain001-run', {});
    const whilePlain = await runCli(['status', '--db', db]);
    expect(whilePlain.stdout).toMatch(/to collect the 3 jobs in batches no run is collecting:\s+llmq run --via batch/);
    // a batch run to another endpoint never collects these: the command is still said
    await startLiveRun(db, 'elsewh01-run', { via: 'batch', baseUrl: 'https://api.openai.com/v1' });
    const whileElsewhere = await runCli(['status', '--db', db]);
    expect(whileElsewhere.stdout).toMatch(
      /to collect the 3 jobs in batches no run is collecting:\s+llmq run --via batch --base-url http:\/\/127\.0\.0\.1:9\/v1/,
    );
    await startLiveRun(db, 'batch001-run', { via: 'batch', baseUrl: 'http://127.0.0.1:9/v1' });
    const whileBatch = await runCli(['status', '--db', db]);
    expect(whileBatch.stdout).not.toContain('to collect the');
    expect((await runCli(['batches', '--db', db])).stdout).not.toContain('to collect the');
  });

  it('a live batch run of a version that did not record its endpoint is taken to collect them', async () => {
    const db = await queueWithFarBatch();
    expect((await runCli(['status', '--db', db])).stdout).toContain('to collect the 3 jobs');
    await startLiveRun(db, 'batch001-run', { via: 'batch' });
    const status = await runCli(['status', '--db', db]);
    expect(status.stdout).not.toContain('to collect the');
  });
});
