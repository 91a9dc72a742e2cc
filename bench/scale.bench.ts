// Scale: one queue of N documents (default 10 million) through the real CLI, each figure next to its target.
// Opt-in: `npm run bench` leaves it out (it takes about an hour at 10M); name it to run it.
//   npm run bench scale                  10,000,000 documents, SQLite
//   npm run bench scale 1m               (or 100k, 250000, ...) fewer documents
//   npm run bench scale 1m postgres      PostgreSQL (a fresh schema, dropped after); `sqlite postgres` for both
//   npm run bench scale 1m export        only the export figures, on answered queues kept between runs (a SQLite
//                                        file under $LLMQ_SCALE_KEEP or the temp folder; a PostgreSQL schema
//                                        llmq_scale_<N>), made the first time: for iterating on export alone
//   npm run bench scale 1m postgres enqueue-only   only the enqueue figures (100k, N, N again), with the CLI's CPU seconds
// Steps: write N JSONL documents of ~250 bytes; `llmq enqueue` 100k and N into fresh queues (rate, peak RSS);
// enqueue N again (nothing new); bytes per job; status in-process and `status --json` as a process; `show`;
// `estimate` of every job, N and 100k queued;
// `run -c 64` against a zero-latency fake with N queued and with 10k queued; then every job is given an
// answer in SQL (as a run would store it) and each export format is written, N rows and 100k rows.
import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { openStore } from '../src/store/open-store.js';
import { buildStatusReport } from '../src/report/status.js';
import { priceTableFrom } from '../src/cli/commands/price-options.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { requestOf } from '../src/store/sqlite/requests.js';
import { PostgresStore } from '../src/store/postgres/store.js';
import pg from 'pg';
import { BIN, PG_URL, PROMPT, withPgSchema } from './cli-runs.js';
import { FakeProcess, fmt, verdict } from './helpers.js';

type Kind = 'sqlite' | 'postgres';
const args = process.argv.slice(2);
const N = parseCount(args.find((a) => /^\d/.test(a)) ?? '10m');
const kinds = (['sqlite', 'postgres'] as const).filter((k) => args.includes(k));
const EXPORT_ONLY = args.includes('export');
const ENQUEUE_ONLY = args.includes('enqueue-only');
if (!kinds.length) kinds.push('sqlite');
const SMALL = Math.min(100_000, N);
const RUN_SMALL = 10_000;
const RUN_LIMIT = 10_000;
const dir = mkdtempSync(join(tmpdir(), 'llmq-scale-'));
const MB = 1024 * 1024;
let misses = 0;

/** "10m" -> 10,000,000; "100k" -> 100,000; "2500" -> 2,500. */
function parseCount(s: string): number {
  const m = /^(\d+(?:\.\d+)?)([km]?)$/i.exec(s);
  if (!m) throw new Error(`expected a count like 10m, 100k or 5000, got '${s}'`);
  return Math.round(Number(m[1]) * ({ '': 1, k: 1e3, m: 1e6 }[m[2]!.toLowerCase()] ?? 1));
}

function line(label: string, value: string, target: string, ok: boolean | null): void {
  if (ok === false) misses++;
  console.log(`  ${label.padEnd(44)} ${value.padStart(16)}   ${target.padEnd(34)} ${ok === null ? '' : verdict(ok)}`);
}

// ---- documents

const WORDS =
  'the quick brown fox jumps over a lazy dog while seven tired wizards quietly box jugs of amber liquor near old harbours'.split(' ');

/** Write documents [0, count) as JSONL of ~250 bytes a line; returns the file and its mean line size. */
function writeDocs(count: number): { file: string; lineBytes: number } {
  const file = join(dir, `docs-${count}.jsonl`);
  const fd = openSync(file, 'w');
  let bytes = 0;
  let chunk: string[] = [];
  for (let n = 0; n < count; n++) {
    const words: string[] = [];
    for (let w = 0, x = n; w < 45; w++, x = (x * 1103515245 + 12345) >>> 0) words.push(WORDS[x % WORDS.length]!);
    const text = `Document ${n}: ${words.join(' ')}.`.slice(0, 215);
    chunk.push(JSON.stringify({ id: `doc-${String(n).padStart(8, '0')}`, text }));
    if (chunk.length === 10_000 || n === count - 1) {
      const s = chunk.join('\n') + '\n';
      bytes += Buffer.byteLength(s);
      writeSync(fd, s);
      chunk = [];
    }
  }
  closeSync(fd);
  return { file, lineBytes: bytes / count };
}

// ---- child processes, with peak RSS

interface Child {
  code: number | null;
  wallS: number;
  /** User and system CPU seconds, as last polled (up to 20 ms short). */
  cpuS: number;
  peakMB: number;
  stdout: string;
  stderr: string;
}

/** VmHWM (peak resident set) of a live process, in bytes; 0 once it is gone. */
function peakRss(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** User + system CPU seconds of a live process (its threads included); 0 once it is gone. */
function cpuSeconds(pid: number): number {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(f[11]) + Number(f[12])) / 100;
  } catch {
    return 0;
  }
}

/** The CLI with these arguments; its peak RSS is polled (VmHWM only grows, so the last reading is the peak but for the last 20 ms). */
function llmq(cliArgs: readonly string[], env: Record<string, string> = {}): Promise<Child> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [BIN, ...cliArgs], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LLMQ_API_KEY: 'sk-bench', NO_COLOR: '1', ...env },
  });
  let stdout = '',
    stderr = '',
    peak = 0,
    cpu = 0;
  child.stdout!.on('data', (d) => {
    if (stdout.length < 1e6) stdout += d;
  });
  child.stderr!.on('data', (d) => {
    stderr = (stderr + d).slice(-4000);
  });
  const poll = setInterval(() => {
    peak = Math.max(peak, peakRss(child.pid!));
    cpu = Math.max(cpu, cpuSeconds(child.pid!));
  }, 20);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearInterval(poll);
      resolve({ code, wallS: (performance.now() - t0) / 1000, cpuS: cpu, peakMB: peak / MB, stdout, stderr: stderr.trim() });
    }),
  );
}

async function must(cliArgs: readonly string[], env?: Record<string, string>): Promise<Child> {
  const r = await llmq(cliArgs, env);
  if (r.code !== 0 && r.code !== 2) throw new Error(`llmq ${cliArgs.join(' ')} exited ${r.code}: ${r.stderr}`);
  return r;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function timeMs(fn: () => Promise<unknown>, times: number): Promise<number> {
  const ms: number[] = [];
  for (let i = 0; i < times; i++) {
    const t = performance.now();
    await fn();
    ms.push(performance.now() - t);
  }
  return median(ms);
}

// ---- queues

/** A fresh queue of this kind for the body of `fn`, removed after. */
async function withQueue<T>(kind: Kind, name: string, fn: (db: string) => Promise<T>): Promise<T> {
  if (kind === 'postgres') return withPgSchema(fn);
  const file = join(dir, `${name}.db`);
  try {
    return await fn(file);
  } finally {
    for (const ext of ['', '-wal', '-shm']) rmSync(file + ext, { force: true });
  }
}

const enqueueArgs = (file: string, db: string) => [
  'enqueue',
  file,
  '--db',
  db,
  '--model',
  'gpt-4o-mini',
  '--max-tokens',
  '64',
  '--prompt',
  PROMPT,
  '--json',
];

/** Bytes the queue takes on disk (SQLite: the file and its WAL; PostgreSQL: the schema's tables, indexes and TOAST). */
async function queueBytes(kind: Kind, db: string): Promise<number> {
  if (kind === 'sqlite') {
    const store = new SqliteStore(db);
    store.db.pragma('wal_checkpoint(TRUNCATE)');
    await store.close();
    return statSync(db).size;
  }
  const store = await PostgresStore.open(db);
  try {
    const r = await store.pool.query(`SELECT sum(pg_total_relation_size(c.oid))::bigint AS bytes FROM pg_class c
      JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'`);
    return Number(r.rows[0].bytes);
  } finally {
    await store.close();
  }
}

/** Mean stored request and answer (output + response) bytes per job. */
async function payloadBytes(kind: Kind, db: string): Promise<{ request: number; answer: number }> {
  const sql = (request: string) =>
    `SELECT avg(length(${request})) AS request, avg(coalesce(length(output), 0) + coalesce(length(response), 0)) AS answer FROM jobs`;
  if (kind === 'sqlite') {
    const store = new SqliteStore(db);
    try {
      return store.db.prepare(sql(requestOf('jobs'))).get() as { request: number; answer: number };
    } finally {
      await store.close();
    }
  }
  const store = await PostgresStore.open(db);
  try {
    const r = (await store.pool.query(sql('request').replace(/length\(/g, 'octet_length('))).rows[0];
    return { request: Number(r.request), answer: Number(r.answer) };
  } finally {
    await store.close();
  }
}

/**
 * Every job not yet answered gets the answer a run would have stored, and the attempt that brought it:
 * the export reads done jobs with their output, provider response, tokens, cost and latency.
 */
async function answerAll(kind: Kind, db: string): Promise<void> {
  const now = Date.now();
  const output = `'A short summary of ' || substr(key, 1, 16) || ': a quick brown fox jumps over a lazy dog, and nothing else happens in it.'`;
  if (kind === 'sqlite') {
    const store = new SqliteStore(db);
    try {
      store.db.exec(`BEGIN;
        INSERT INTO attempts (job_key, run_id, attempt, started_at, ended_at, latency_ms, status, outcome, prompt_tokens, completion_tokens, cost_usd)
          SELECT key, 'bench-answers', 1, ${now}, ${now} + 420, 420, 200, 'done', 52, 24, 0.0000222 FROM jobs WHERE state != 'done';
        UPDATE jobs SET state = 'done', attempts = 1, output = ${output},
          response = json_object('id', 'chatcmpl-' || substr(key, 1, 24), 'object', 'chat.completion', 'created', ${Math.floor(now / 1000)},
            'model', 'gpt-4o-mini-2024-07-18', 'choices', json_array(json_object('index', 0, 'message',
              json_object('role', 'assistant', 'content', ${output}), 'finish_reason', 'stop')),
            'usage', json_object('prompt_tokens', 52, 'completion_tokens', 24, 'total_tokens', 76)),
          prompt_tokens = 52, completion_tokens = 24, cost_usd = 0.0000222, finished_at = ${now}, updated_at = ${now}
          WHERE state != 'done';
        COMMIT;`);
    } finally {
      await store.close();
    }
    return;
  }
  const store = await PostgresStore.open(db);
  try {
    await store.pool.query(`INSERT INTO attempts (job_key, run_id, attempt, started_at, ended_at, latency_ms, status, outcome, prompt_tokens, completion_tokens, cost_usd)
      SELECT key, 'bench-answers', 1, ${now}, ${now} + 420, 420, 200, 'done', 52, 24, 0.0000222 FROM jobs WHERE state != 'done'`);
    await store.pool.query(`UPDATE jobs SET state = 'done', attempts = 1, output = ${output},
      response = json_build_object('id', 'chatcmpl-' || substr(key, 1, 24), 'object', 'chat.completion', 'created', ${Math.floor(now / 1000)},
        'model', 'gpt-4o-mini-2024-07-18', 'choices', json_build_array(json_build_object('index', 0, 'message',
          json_build_object('role', 'assistant', 'content', ${output}), 'finish_reason', 'stop')),
        'usage', json_build_object('prompt_tokens', 52, 'completion_tokens', 24, 'total_tokens', 76))::text,
      prompt_tokens = 52, completion_tokens = 24, cost_usd = 0.0000222, finished_at = ${now}, updated_at = ${now}
      WHERE state != 'done'`);
    await store.pool.query('VACUUM ANALYZE jobs');
    await store.pool.query('VACUUM ANALYZE attempts');
  } finally {
    await store.close();
  }
}

/** `run -c 64 --limit 10,000` against the zero-latency fake: jobs/s over the busy span, and peak RSS. */
async function runFigures(db: string, fake: FakeProcess): Promise<{ rate: number; peakMB: number; done: number }> {
  fake.clear();
  const r = await must([
    'run',
    '--db',
    db,
    '--base-url',
    fake.url,
    '-c',
    '64',
    '--limit',
    String(RUN_LIMIT),
    '--progress',
    'none',
    '--timeout',
    '60',
  ]);
  const s = await fake.stats();
  return { rate: s.ok / Math.max(0.001, (s.lastAt - s.firstAt) / 1000), peakMB: r.peakMB, done: s.ok };
}

const FORMATS = ['jsonl', 'csv', 'openai-batch'] as const;

/** Each format's export figures from a queue of `N` rows and one of `SMALL`. */
async function exportLines(bigDb: string, smallDb: string): Promise<void> {
  for (const format of FORMATS) {
    const s = await exportFigures(smallDb, SMALL, format);
    const b = await exportFigures(bigDb, N, format);
    line(`export --format ${format}, ${fmt(N)} rows`, `${fmt(b.rate)} rows/s`, '> 100,000/s', b.rate > 100_000);
    line(
      `  peak RSS (${fmt(SMALL)} rows: ${fmt(s.peakMB)} MB)`,
      `${fmt(b.peakMB)} MB`,
      `flat: within 20% of ${fmt(SMALL)} rows`,
      b.peakMB <= 1.2 * s.peakMB,
    );
    console.log(`    (${fmt(b.bytes / N)} bytes a row; ${fmt(SMALL)} rows at ${fmt(s.rate)} rows/s; ${fmt(b.cpuS, 1)} s CPU at ${fmt(N)})`);
  }
}

/** An answered queue of `count` documents kept between runs, made (enqueued and answered) when missing. */
async function keptQueue(kind: Kind, count: number, file: string): Promise<string> {
  if (kind === 'sqlite') {
    const db = join(process.env.LLMQ_SCALE_KEEP || tmpdir(), `llmq-scale-${count}.db`);
    if (existsSync(db)) return db;
    const tmp = `${db}.making`;
    for (const ext of ['', '-wal', '-shm']) rmSync(tmp + ext, { force: true });
    await must(enqueueArgs(file, tmp));
    await answerAll(kind, tmp);
    renameSync(tmp, db);
    return db;
  }
  const schema = `llmq_scale_${count}`;
  const url = `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}schema=${schema}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    const made = await admin.query(`SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'ready'`, [schema]);
    if (made.rowCount) return url;
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await must(enqueueArgs(file, url));
    await answerAll(kind, url);
    await admin.query(`CREATE TABLE "${schema}".ready ()`);
    return url;
  } finally {
    await admin.end();
  }
}

async function exportFigures(
  db: string,
  rows: number,
  format: string,
): Promise<{ rate: number; peakMB: number; bytes: number; cpuS: number }> {
  const out = join(dir, `export.${format}`);
  const r = await must(['export', '--db', db, '--format', format, '--out', out]);
  const bytes = statSync(out).size;
  rmSync(out, { force: true });
  return { rate: rows / r.wallS, peakMB: r.peakMB, bytes, cpuS: r.cpuS };
}

// ---- the bench

async function bench(kind: Kind, big: string, small: string, runFile: string, lineBytes: number): Promise<void> {
  console.log(`\n${kind}${kind === 'postgres' ? ' (fresh schemas, dropped after)' : ''}: ${fmt(N)} documents of ~${fmt(lineBytes)} bytes`);
  const fake = await FakeProcess.start({ latencyMs: 0 });
  try {
    await withQueue(kind, 'small', async (smallDb) => {
      await withQueue(kind, 'big', async (bigDb) => {
        const e1 = await must(enqueueArgs(small, smallDb));
        const rateSmall = SMALL / e1.wallS;
        // the rate target is at N (10M); at 100k the process start, the writer thread's start and the index build weigh more
        line(
          `enqueue ${fmt(SMALL)} docs`,
          `${fmt(rateSmall)} docs/s`,
          N === SMALL ? '> 42,000/s' : 'reference for the next line',
          N === SMALL ? rateSmall > 42_000 : null,
        );
        const e2 = N === SMALL ? e1 : await must(enqueueArgs(big, bigDb));
        if (N === SMALL) await must(enqueueArgs(big, bigDb));
        const rateBig = N / e2.wallS;
        if (N !== SMALL)
          line(
            `enqueue ${fmt(N)} docs`,
            `${fmt(rateBig)} docs/s`,
            `> 42,000/s, within 20% of ${fmt(SMALL)}`,
            rateBig > 42_000 && rateBig >= 0.8 * rateSmall,
          );
        line(`  (wall ${fmt(e2.wallS, 1)} s) peak RSS`, `${fmt(e2.peakMB)} MB`, '< 300 MB', e2.peakMB < 300);
        const again = await must(enqueueArgs(big, bigDb));
        // 2 minutes at ten million, in proportion below
        const againCap = (120 * N) / 10_000_000;
        line(
          `enqueue the same ${fmt(N)} again`,
          `${fmt(again.wallS, 1)} s`,
          N === 10_000_000 ? '< 120 s' : `< 120 s at 10M (${fmt(againCap, 1)} s here)`,
          again.wallS < againCap,
        );
        if (ENQUEUE_ONLY) {
          // client CPU beside wall time: what is left is the server's (and waiting)
          console.log(`    (CPU of llmq: ${[e1, e2, again].map((c) => `${fmt(c.cpuS, 1)} s of ${fmt(c.wallS, 1)} s`).join('; ')})`);
          return;
        }

        const bytesQueued = await queueBytes(kind, bigDb);
        const payload = await payloadBytes(kind, bigDb);
        line('database bytes per job, queued', `${fmt(bytesQueued / N)} B`, `request ${fmt(payload.request)} B + overhead`, null);

        const prices = await priceTableFrom({});
        const store = await openStore(bigDb);
        try {
          const statusMs = await timeMs(async () => buildStatusReport(await store.status(), { now: Date.now(), prices, db: 'bench' }), 5);
          line('status, in-process (median of 5)', `${fmt(statusMs, 1)} ms`, '< 100 ms', statusMs < 100);
          const ids = [0, Math.floor(N / 2), N - 1, 12_345 % N, Math.floor(N * 0.9)].map((n) => `doc-${String(n).padStart(8, '0')}`);
          let i = 0;
          const showMs = await timeMs(async () => {
            if (!(await store.item(ids[i++ % ids.length]!))) throw new Error('no such item');
          }, ids.length);
          line('show <id>, in-process (median of 5)', `${fmt(showMs, 2)} ms`, '< 50 ms', showMs < 50);
        } finally {
          await store.close();
        }
        const statusWall: number[] = [];
        for (let k = 0; k < 3; k++) statusWall.push((await must(['status', '--json', '--db', bigDb])).wallS * 1000);
        line('status --json, process wall (median of 3)', `${fmt(median(statusWall))} ms`, '< 250 ms', median(statusWall) < 250);

        // estimate reads every pending job and counts its prompt: as fast a job at N queued as at 100k
        // (its pages once stepped over every earlier job again: quadratic)
        const estimateRate = async (db: string, jobs: number) => jobs / (await must(['estimate', '--json', '--db', db])).wallS;
        const estimateSmall = await estimateRate(smallDb, SMALL);
        const estimateBig = N === SMALL ? estimateSmall : await estimateRate(bigDb, N);
        line(`estimate, ${fmt(SMALL)} queued`, `${fmt(estimateSmall)} jobs/s`, 'reference', null);
        if (N !== SMALL)
          line(
            `estimate, ${fmt(N)} queued`,
            `${fmt(estimateBig)} jobs/s`,
            `within 20% of ${fmt(SMALL)} queued`,
            estimateBig >= 0.8 * estimateSmall,
          );

        // the same run with 10k queued and with N queued
        const runSmall = await withQueue(kind, 'run-small', async (db) => {
          await must(enqueueArgs(runFile, db));
          return runFigures(db, fake);
        });
        const runBig = await runFigures(bigDb, fake);
        line(`run -c 64, ${fmt(RUN_LIMIT)} jobs, ${fmt(RUN_SMALL)} queued`, `${fmt(runSmall.rate)} jobs/s`, 'reference', null);
        line(`  peak RSS`, `${fmt(runSmall.peakMB)} MB`, 'reference', null);
        line(
          `run -c 64, ${fmt(RUN_LIMIT)} jobs, ${fmt(N)} queued`,
          `${fmt(runBig.rate)} jobs/s`,
          `within 20% of ${fmt(RUN_SMALL)} queued`,
          runBig.rate >= 0.8 * runSmall.rate,
        );
        line(`  peak RSS`, `${fmt(runBig.peakMB)} MB`, `within 20% of ${fmt(RUN_SMALL)} queued`, runBig.peakMB <= 1.2 * runSmall.peakMB);

        const t = performance.now();
        await answerAll(kind, bigDb);
        await answerAll(kind, smallDb);
        console.log(`  (every job given an answer in SQL: ${fmt((performance.now() - t) / 1000, 1)} s)`);
        const bytesDone = await queueBytes(kind, bigDb);
        const done = await payloadBytes(kind, bigDb);
        line(
          'database bytes per job, answered',
          `${fmt(bytesDone / N)} B`,
          `req ${fmt(done.request)} + answer ${fmt(done.answer)} B + overhead`,
          null,
        );

        await exportLines(bigDb, smallDb);

        // copy into a new SQLite file (a backup, or a queue brought back from PostgreSQL): a bulk load
        // whose random-key indexes are built at the end, so as fast a job at N as at 100k
        const copyRate = async (db: string, jobs: number) =>
          withQueue('sqlite', 'copy-target', async (to) => jobs / (await must(['copy', '--from', db, '--to', to, '--json'])).wallS);
        const copySmall = await copyRate(smallDb, SMALL);
        const copyBig = N === SMALL ? copySmall : await copyRate(bigDb, N);
        line(`copy to a new SQLite file, ${fmt(SMALL)} answered`, `${fmt(copySmall)} jobs/s`, 'reference', null);
        if (N !== SMALL)
          line(
            `copy to a new SQLite file, ${fmt(N)} answered`,
            `${fmt(copyBig)} jobs/s`,
            `within 20% of ${fmt(SMALL)}`,
            copyBig >= 0.8 * copySmall,
          );
      });
    });
  } finally {
    await fake.close();
  }
}

console.log(
  `load average before: ${loadavg()
    .map((l) => fmt(l, 2))
    .join(' ')} on ${cpus().length} cores; build ${BIN}`,
);
const t0 = performance.now();
try {
  const big = writeDocs(N);
  const small = N === SMALL ? big : writeDocs(SMALL);
  const runFile = writeDocs(RUN_SMALL).file;
  console.log(`wrote ${fmt(N)} documents (${fmt((big.lineBytes * N) / MB)} MB) in ${fmt((performance.now() - t0) / 1000, 1)} s`);
  for (const kind of kinds) {
    if (EXPORT_ONLY) {
      console.log(`\n${kind}: export only, ${fmt(N)} answered jobs (kept between runs)`);
      await exportLines(await keptQueue(kind, N, big.file), await keptQueue(kind, SMALL, small.file));
    } else await bench(kind, big.file, small.file, runFile, big.lineBytes);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
console.log(
  `\ntook ${fmt((performance.now() - t0) / 1000)} s; load average after: ${loadavg()
    .map((l) => fmt(l, 2))
    .join(' ')}; ${misses} MISS`,
);
process.exitCode = misses ? 1 : 0;
