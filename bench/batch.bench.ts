// llmq run --via batch: 10,000 jobs through the batch lane of the in-process HTTP fake, llmq as a
// child process. Figures: time until every job is submitted, peak RSS of llmq, and Batch API calls
// per 1,000 jobs while the batches are live (polling cost).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { FakeOpenAI } from '../test/helpers/fake-openai.js';
import { seedJobs } from '../test/helpers/seed.js';
import { fmt, verdict } from './helpers.js';

const JOBS = 10_000;
const BATCH_SIZE = 1_000;
const LIVE_MS = 5_000;
const POLL_S = 0.5;
const BIN = fileURLToPath(new URL('../bin/llmq.js', import.meta.url));

const dir = mkdtempSync(join(tmpdir(), 'llmq-bench-'));
try {
  const db = join(dir, 'q.db');
  const store = new SqliteStore(db);
  await seedJobs(store, JOBS);
  await store.close();
  const fake = await FakeOpenAI.start({ record: false });
  fake.batches.configure({ completeAfterMs: LIVE_MS });

  const t0 = performance.now();
  const child = spawn(
    process.execPath,
    [BIN, 'run', '--db', db, '--base-url', fake.url, '--via', 'batch', '--batch-size', String(BATCH_SIZE), '--poll', String(POLL_S)],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { PATH: process.env.PATH, HOME: process.env.HOME, NO_COLOR: '1' } },
  );
  let submitted = 0;
  let allSubmittedMs = NaN;
  child.stderr!.setEncoding('utf8').on('data', (d: string) => {
    submitted += (d.match(/^submitted /gm) ?? []).length;
    if (submitted * BATCH_SIZE >= JOBS && Number.isNaN(allSubmittedMs)) allSubmittedMs = performance.now() - t0;
  });
  let peakKb = 0;
  const sample = setInterval(() => {
    try {
      const hwm = /VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      if (hwm) peakKb = Math.max(peakKb, Number(hwm[1]));
    } catch {
      /* exited */
    }
  }, 50);
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  clearInterval(sample);
  const wallMs = performance.now() - t0;
  const polls = fake.batches.calls.filter((c) => c.endpoint === 'get' || c.endpoint === 'list').length;
  const duplicates = fake.duplicates().length;
  await fake.close();

  const done = new SqliteStore(db);
  const counts = (await done.status()).counts;
  await done.close();
  console.log(`jobs ${fmt(JOBS)} in batches of ${fmt(BATCH_SIZE)}, live ${LIVE_MS / 1000} s each, --poll ${POLL_S}`);
  console.log(`time to all submitted      ${fmt(allSubmittedMs)} ms`);
  console.log(`wall time to all collected ${fmt(wallMs)} ms (exit ${code})`);
  console.log(`peak RSS of llmq           ${fmt(peakKb / 1024)} MiB`);
  console.log(
    `Batch API calls            ${fake.batches.calls.length} total; ${polls} polls = ${fmt((polls / JOBS) * 1000, 1)} per 1,000 jobs over ${LIVE_MS / 1000} s live`,
  );
  console.log(`done ${fmt(counts.done)} · sent twice ${duplicates}  ${verdict(code === 0 && counts.done === JOBS && duplicates === 0)}`);
  process.exitCode = code === 0 && counts.done === JOBS && duplicates === 0 ? 0 : 1;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
