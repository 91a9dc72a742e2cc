// llmq run: throughput against a zero-latency fake, pacing under --rpm and --tpm, and memory with 200k jobs queued.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { OpenAIProvider } from '../src/provider/openai.js';
import { runQueue } from '../src/scheduler/run-queue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { requestFor, seedJobs } from '../test/helpers/seed.js';
import { FakeProcess, fmt, verdict } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'llmq-bench-'));
let n = 0;
async function freshStore(jobs: number, opts: Parameters<typeof seedJobs>[2] = {}): Promise<SqliteStore> {
  const store = new SqliteStore(join(dir, `q${n++}.db`));
  await seedJobs(store, jobs, opts);
  return store;
}

async function bareFetchLoop(url: string, jobs: number, concurrency: number): Promise<number> {
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next < jobs) {
      const body = requestFor(next++);
      const res = await fetch(`${url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      await res.json();
    }
  }));
  return jobs / ((performance.now() - t0) / 1000);
}

async function throughput(): Promise<void> {
  const jobs = 20_000, concurrency = 64;
  const fake = await FakeProcess.start({ latencyMs: 0 });
  await bareFetchLoop(fake.url, 2000, concurrency); // warm up both sides
  const bare = await bareFetchLoop(fake.url, jobs, concurrency);
  const store = await freshStore(jobs);
  const t0 = performance.now();
  const s = await runQueue({ store, provider: new OpenAIProvider({ baseUrl: fake.url }) }, { concurrency });
  const ours = s.done / ((performance.now() - t0) / 1000);
  await store.close();
  await fake.close();
  console.log(`(1) throughput, zero-latency fake, concurrency ${concurrency}, ${fmt(jobs)} jobs`);
  console.log(`    llmq run:        ${fmt(ours)} jobs/s`);
  console.log(`    bare fetch loop: ${fmt(bare)} requests/s (the limit: same requests, no queue)`);
  console.log(`    ratio ${fmt(bare / ours, 2)}x  target <= 1.3x  ${verdict(bare / ours <= 1.3)}`);
}

async function rpm(): Promise<void> {
  const limit = 1200, latencyMs = 50, seconds = 20;
  const jobs = Math.round((limit / 60) * seconds);
  const fake = await FakeProcess.start({ latencyMs, rpm: limit });
  const store = await freshStore(jobs);
  const t0 = performance.now();
  const s = await runQueue({ store, provider: new OpenAIProvider({ baseUrl: fake.url }) }, { concurrency: 16, rpm: limit });
  const wall = (performance.now() - t0) / 1000;
  const stats = await fake.stats();
  await store.close();
  await fake.close();
  // over the busy span, first request to last, as the provider sees it (process start left out)
  const achieved = (stats.received - 1) / ((stats.lastAt - stats.firstAt) / 1000);
  const ceiling = limit / 60;
  console.log(`(2) --rpm ${limit} against a fake enforcing ${limit} rpm over 1-second windows (${fmt(ceiling)} req/s), ${jobs} jobs, ${latencyMs} ms latency`);
  console.log(`    achieved ${fmt(achieved, 2)} req/s from first to last request (${fmt(s.done / wall, 2)} counting start-up) = ${fmt((100 * achieved) / ceiling, 1)}% of the limit, 429s: ${stats.rateLimited}  target >= 95% and 0  ${verdict(achieved / ceiling >= 0.95 && stats.rateLimited === 0)}`);
}

async function tpm(): Promise<void> {
  const limit = 120_000, latencyMs = 50, seconds = 20;
  const fake = await FakeProcess.start({ latencyMs, tpm: limit });
  // ~25 prompt tokens + max_tokens 16: small against the 2,000-token per-second budget
  const store = await freshStore(1, { maxTokens: 16 });
  const perJob = await tokensPerJob(store);
  const jobs = Math.round(((limit / 60) * seconds) / perJob);
  await store.close();
  const run = await freshStore(jobs, { maxTokens: 16 });
  const t0 = performance.now();
  const s = await runQueue({ store: run, provider: new OpenAIProvider({ baseUrl: fake.url }) }, { concurrency: 32, tpm: limit });
  const wall = (performance.now() - t0) / 1000;
  const stats = await fake.stats();
  await fake.close();
  const tokens = await totalTokens(run);
  await run.close();
  const achieved = (tokens * 60) / wall;
  console.log(`(3) --tpm ${fmt(limit)} against a fake enforcing it over 1-second windows (${fmt(limit / 60)} tokens/s), ${jobs} jobs of ~${perJob} tokens (prompt + max_tokens)`);
  console.log(`    achieved ${fmt(achieved)} tokens/min = ${fmt((100 * achieved) / limit, 1)}% of the limit, 429s: ${stats.rateLimited}  target >= 85% and 0  ${verdict(achieved / limit >= 0.85 && stats.rateLimited === 0)}`);
  console.log(`    the token bucket holds ${fmt((limit / 60) * 0.06 * 0.97)} tokens (6/100 s of budget) and refills at 0.94 x 0.97 of the limit, so any 1-second`);
  console.log(`    window gets at most the limit; a request bigger than the bucket waits for a full bucket and goes alone, so with`);
  console.log(`    requests near the per-second budget a 1-second window allows only one of them: expect about 50-90% then.`);
}

/** The tokens every job of the store weighs against the limit (what the fake counts). */
async function totalTokens(store: SqliteStore): Promise<number> {
  const { estimateRequestTokens } = await import('../src/provider/tokens.js');
  let sum = 0;
  for (const r of store.db.prepare('SELECT request FROM jobs').pluck().iterate() as Iterable<string>) sum += estimateRequestTokens(JSON.parse(r));
  return sum;
}

async function tokensPerJob(store: SqliteStore): Promise<number> {
  const { estimateRequestTokens } = await import('../src/provider/tokens.js');
  const request = store.db.prepare('SELECT request FROM jobs LIMIT 1').pluck().get() as string;
  return estimateRequestTokens(JSON.parse(request));
}

async function peakRss(queued: number, answered: number): Promise<{ peak: number; seconds: number }> {
  const store = await freshStore(queued);
  const db = store.location;
  await store.close();
  const fake = await FakeProcess.start({ latencyMs: 0 });
  const bin = fileURLToPath(new URL('../bin/llmq.js', import.meta.url));
  const child = spawn(process.execPath, [bin, 'run', '--db', db, '--base-url', fake.url, '--concurrency', '64', '--progress', 'none', '--limit', String(answered)], { stdio: 'inherit' });
  let peak = 0;
  const poll = setInterval(() => {
    try {
      const status = require('node:fs').readFileSync(`/proc/${child.pid}/status`, 'utf8') as string;
      const hwm = /VmHWM:\s+(\d+) kB/.exec(status);
      if (hwm) peak = Math.max(peak, Number(hwm[1]) * 1024);
    } catch { /* exited */ }
  }, 100);
  const t0 = performance.now();
  await new Promise((r) => child.once('exit', r));
  clearInterval(poll);
  await fake.close();
  return { peak, seconds: (performance.now() - t0) / 1000 };
}

async function bareFetchPeak(): Promise<number> {
  const fake = await FakeProcess.start({ latencyMs: 0 });
  const base = process.memoryUsage().rss;
  let peak = base;
  const poll = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
  await bareFetchLoop(fake.url, 20_000, 64);
  clearInterval(poll);
  await fake.close();
  return peak - base;
}

async function memory(): Promise<void> {
  const answered = 20_000;
  const small = await peakRss(answered, answered);
  const big = await peakRss(200_000, answered);
  const fetchGrowth = await bareFetchPeak();
  console.log(`(4) peak RSS of llmq run (concurrency 64, zero-latency fake), ${fmt(answered)} jobs answered`);
  console.log(`    queue of 200,000 jobs: ${fmt(big.peak / 1048576, 1)} MB (${fmt(big.seconds, 1)} s)   target < 150 MB  ${verdict(big.peak < 150 * 1048576)}`);
  console.log(`    queue of  20,000 jobs: ${fmt(small.peak / 1048576, 1)} MB: memory does not grow with the queue (claims are batched)`);
  console.log(`    for scale: a bare fetch loop at concurrency 64 grows its own process by ${fmt(fetchGrowth / 1048576, 1)} MB (V8 heap headroom for fetch's garbage)`);
}

import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);

const which = process.argv[2];
for (const [name, fn] of Object.entries({ throughput, rpm, tpm, memory })) {
  if (!which || which === name) await fn();
}
rmSync(dir, { recursive: true, force: true });
