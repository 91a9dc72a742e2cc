// Money on the test fake, with the real CLI:
//  (1) once 50 jobs of a model are done, `llmq estimate` against what the rest then costs (target: within 10%)
//  (2) --budget and --budget-total overshoot: one run, three runs on one SQLite file, three on PostgreSQL,
//      and a run killed with SIGKILL mid-flight then run again (target: never above 0)
//  (3) estimate's memory on a queue of 100,000 jobs against one of 10,000 (it streams: no growth)
//   npm run bench spend
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { openStore } from '../src/store/open-store.js';
import { estimateRun } from '../src/report/estimate.js';
import { loadPriceTable } from '../src/pricing/price-table.js';
import { FakeOpenAI, reply, uniformLatency, type FakeRequest } from '../test/helpers/fake-openai.js';
import { BIN, PG_URL, run, withPgSchema } from './cli-runs.js';
import { fmt, verdict } from './helpers.js';

const dir = mkdtempSync(join(tmpdir(), 'llmq-bench-spend-'));
const WORDS = 'the quick brown fox jumps over a lazy dog while seven grey owls watch from old oak trees'.split(' ');
let misses = 0;
const check = (ok: boolean) => {
  if (!ok) misses++;
  return verdict(ok);
};

/** A number in [0, 1) fixed by the text. */
function draw(text: string): number {
  return createHash('sha256').update(text).digest().readUInt32BE(0) / 2 ** 32;
}

/** Documents of 40 to 600 words, in no order of length. */
function writeDocs(count: number, name: string): string {
  const file = join(dir, `${name}.jsonl`);
  const lines = Array.from({ length: count }, (_, n) => {
    const words = 40 + Math.floor(draw(`doc ${n}`) * 560);
    return JSON.stringify({
      id: `doc-${n}`,
      text: `Note ${n}: ` + Array.from({ length: words }, (_, i) => WORDS[(n + i * 7) % WORDS.length]).join(' '),
    });
  });
  writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

/** Answers as long as a quarter of the document plus up to 80 words of its own, as summaries go. */
function answer(r: FakeRequest): string {
  const text = String(r.json?.messages?.[0]?.content ?? '');
  const words = 10 + Math.floor(text.split(' ').length / 4) + Math.floor(draw(r.body) * 80);
  return Array.from({ length: words }, (_, i) => WORDS[i % WORDS.length]).join(' ');
}

const fake = await FakeOpenAI.start({ latencyMs: uniformLatency(40, 30), record: false, respond: (r) => reply.ok({ content: answer(r) }) });
const at = ['--base-url', fake.url];

function cli(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
  let stdout = '',
    stderr = '';
  child.stdout.on('data', (d) => (stdout += d));
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

async function enqueue(db: string, docs: string): Promise<void> {
  const r = await cli([
    'enqueue',
    docs,
    '--db',
    db,
    '--model',
    'gpt-4o-mini',
    '--max-tokens',
    '600',
    '--prompt',
    'Summarize: {{text}}',
    '--json',
  ]);
  if (r.code !== 0) throw new Error(`enqueue exited ${r.code}: ${r.stderr}`);
}

/** Money as the queue records it: what answers cost, and everything committed in the ledger (may be billed included). */
async function money(db: string): Promise<{ answered: number; committed: number; perRun: Map<string, number> }> {
  const store = await openStore(db);
  try {
    const s = await store.status();
    const perRun = new Map(s.spend.map((r) => [r.id, r.spend.spentUsd]));
    const committed = s.spend.reduce((a, r) => a + r.spend.spentUsd + r.spend.mayBeBilledUsd + r.spend.reservedUsd, 0);
    return { answered: s.byModel.reduce((a, m) => a + m.storedUsd, 0), committed, perRun };
  } finally {
    await store.close();
  }
}

async function estimateAccuracy(): Promise<void> {
  const db = join(dir, 'estimate.db');
  await enqueue(db, writeDocs(1000, 'estimate'));
  const first = await run(['--db', db, ...at, '--limit', '50', '--concurrency', '8'], 120);
  if (first.code !== 0) throw new Error(`run --limit 50 exited ${first.code}: ${first.stderr}`);
  const e = JSON.parse((await cli(['estimate', '--db', db, ...at, '--json'])).stdout);
  const before = await money(db);
  const rest = await run(['--db', db, ...at, '--concurrency', '16'], 300);
  if (rest.code !== 0) throw new Error(`run exited ${rest.code}: ${rest.stderr}`);
  const after = await money(db);
  const actual = after.answered - before.answered;
  const off = Math.abs(e.cost.low - actual) / actual;
  console.log(
    `(1) estimate once 50 of 1,000 jobs are done (answers ${fmt(e.models[0].completion.mean, 0)} tokens on average, p90 ${e.models[0].completion.p90})`,
  );
  console.log(
    `    estimate for the other ${fmt(e.jobs)}: $${e.cost.low.toFixed(4)} (mean answers) to $${e.cost.high.toFixed(4)} (p90), worst ${e.cost.worst === null ? 'unbounded' : `$${e.cost.worst.toFixed(4)}`}`,
  );
  console.log(
    `    they then cost $${actual.toFixed(4)}: the estimate is ${fmt(100 * off, 1)}% off  target <= 10%  ${check(off <= 0.1)}` +
      `  (actual within [low, high]: ${actual >= e.cost.low * 0.999 && actual <= e.cost.high * 1.001 ? 'yes' : 'no'})`,
  );
}

/** Runs `n` CLI runs at once with these arguments; returns their exit codes. */
async function together(n: number, args: readonly string[]): Promise<Array<number | null>> {
  return (await Promise.all(Array.from({ length: n }, () => run(args, 300)))).map((r) => r.code);
}

function overshootLine(what: string, budget: number, m: { answered: number; committed: number }, codes: Array<number | null>): void {
  const over = Math.max(0, m.answered - budget, m.committed - budget);
  console.log(
    `    ${what.padEnd(37)} answered $${m.answered.toFixed(5)}, committed $${m.committed.toFixed(5)} of $${budget.toFixed(2)} ` +
      `(${fmt((100 * m.committed) / budget, 1)}% used; exits ${codes.join(',')}); overshoot $${over.toFixed(5)}  target 0  ${check(over === 0 && codes.every((c) => c === 3))}`,
  );
}

async function overshoot(): Promise<void> {
  const budget = 0.05;
  const docs = writeDocs(3000, 'budget');
  console.log(`(2) --budget overshoot: $${budget} at gpt-4o-mini's price (about $0.0001 a job), concurrency 16, fake latency 10-70 ms`);
  const one = join(dir, 'one.db');
  await enqueue(one, docs);
  let codes = await together(1, ['--db', one, ...at, '--budget', String(budget), '--concurrency', '16']);
  overshootLine('one run, --budget', budget, await money(one), codes);
  const three = join(dir, 'three.db');
  await enqueue(three, docs);
  codes = await together(3, ['--db', three, ...at, '--budget-total', String(budget), '--concurrency', '16']);
  overshootLine('3 runs on SQLite, --budget-total', budget, await money(three), codes);
  const probe = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  const reachable = await probe.connect().then(
    () => true,
    () => false,
  );
  await probe.end().catch(() => {});
  if (reachable) {
    await withPgSchema(async (url) => {
      await enqueue(url, docs);
      const onPg = await together(3, ['--db', url, ...at, '--budget-total', String(budget), '--concurrency', '16']);
      overshootLine('3 runs on PostgreSQL, --budget-total', budget, await money(url), onPg);
    });
  } else {
    console.log(`    3 runs on PostgreSQL: skipped (${PG_URL} is not reachable)`);
  }
  // SIGKILL mid-flight: its requests in flight stay committed (may be billed); the next run stays within what is left
  const killed = join(dir, 'killed.db');
  await enqueue(killed, docs);
  fake.configure({ latencyMs: 1500 });
  const child = spawn(
    process.execPath,
    [BIN, 'run', '--db', killed, ...at, '--budget-total', String(budget), '--concurrency', '16', '--progress', 'none'],
    { stdio: 'ignore' },
  );
  const sentBefore = fake.received;
  while (fake.received < sentBefore + 16) await new Promise((r) => setTimeout(r, 20));
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  fake.configure({ latencyMs: uniformLatency(40, 30) });
  await new Promise((r) => setTimeout(r, 6500)); // this machine knows the run is dead once its heartbeat is quiet 5 s
  codes = await together(1, ['--db', killed, ...at, '--budget-total', String(budget), '--concurrency', '16']);
  overshootLine('SIGKILL mid-flight, then again', budget, await money(killed), codes);
}

/** A queue of `jobs` pending jobs with prompts of 40 to 200 words, built inside SQLite. */
function bigQueue(jobs: number): string {
  const db = join(dir, `big-${jobs}.db`);
  const store = new SqliteStore(db);
  store.db.exec(`
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${jobs})
    INSERT INTO jobs (key, request, model, priority, created_at, updated_at)
    SELECT lower(hex(randomblob(32))), '{"max_tokens":600,"messages":[{"content":"Summarize: ' || substr('${WORDS.join(' ').repeat(20)}', 1, 200 + (i % 800)) || ' ' || i || '","role":"user"}],"model":"gpt-4o-mini"}',
      'gpt-4o-mini', i % 3, ${Date.now()}, ${Date.now()} FROM n;`);
  void store.close();
  return db;
}

/** Peak RSS of `llmq estimate` as a user runs it. */
async function cliPeak(db: string): Promise<{ peak: number; seconds: number }> {
  const child = spawn(process.execPath, [BIN, 'estimate', '--db', db, '--json'], { stdio: ['ignore', 'ignore', 'inherit'] });
  let peak = 0;
  const poll = setInterval(() => {
    try {
      const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'));
      if (hwm) peak = Math.max(peak, Number(hwm[1]) * 1024);
    } catch {
      /* exited */
    }
  }, 50);
  const t0 = performance.now();
  await new Promise((r) => child.once('exit', r));
  clearInterval(poll);
  return { peak, seconds: (performance.now() - t0) / 1000 };
}

/**
 * The most heap an estimate holds while it reads the queue: collected and measured every 1,000 jobs
 * as they stream past (what it keeps, not the garbage it churns through), over what it held before.
 */
async function liveHeapPeak(db: string): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc!;
  const store = new SqliteStore(db);
  gc();
  const before = process.memoryUsage().heapUsed;
  let peak = 0,
    seen = 0;
  async function* jobsToRun(now: number) {
    for await (const job of store.jobsToRun(now)) {
      if (++seen % 1000 === 0) {
        gc();
        peak = Math.max(peak, process.memoryUsage().heapUsed - before);
      }
      yield job;
    }
  }
  const watched = new Proxy(store, {
    get(target, key) {
      if (key === 'jobsToRun') return jobsToRun;
      const value = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  await estimateRun(watched, { prices: loadPriceTable(), now: Date.now(), baseUrl: 'bench' });
  await store.close();
  return peak;
}

async function memory(): Promise<void> {
  const [small, big] = [bigQueue(10_000), bigQueue(100_000)];
  await liveHeapPeak(small); // loads the tokenizer and the price data, which stay for the process
  const [heapSmall, heapBig] = [await liveHeapPeak(small), await liveHeapPeak(big)];
  const [rssSmall, rssBig] = [await cliPeak(small), await cliPeak(big)];
  console.log(
    `(3) llmq estimate reads the queue a page at a time: most heap held while reading 10,000 jobs ${fmt(heapSmall / 1048576, 2)} MB, ` +
      `100,000 jobs ${fmt(heapBig / 1048576, 2)} MB  target < 5 MB  ${check(heapBig < 5 * 1048576)}`,
  );
  console.log(
    `    peak RSS of the CLI (tokenizer tables and garbage awaiting collection included): ${fmt(rssSmall.peak / 1048576, 1)} MB ` +
      `for 10,000 jobs (${fmt(rssSmall.seconds, 1)} s), ${fmt(rssBig.peak / 1048576, 1)} MB for 100,000 (${fmt(rssBig.seconds, 1)} s)`,
  );
}

const which = process.argv[2];
try {
  for (const [name, fn] of Object.entries({ estimate: estimateAccuracy, budget: overshoot, memory })) {
    if (!which || which === name) await fn();
  }
} finally {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
}
process.exitCode = misses ? 1 : 0;
