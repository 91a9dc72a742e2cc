// Scaling out: 1, 2 and 4 `llmq run` processes working one queue, on SQLite (one file) and on PostgreSQL
// (one schema), against the test fake in its own process. Figures are held against the ideal
// runs x concurrency / latency; a zero-latency pass finds each store's ceiling on this machine.
//   npm run bench scale-out               both stores, both passes
//   npm run bench scale-out -- sqlite     (or postgres; or latency / ceiling) to run a part
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { PostgresStore } from '../src/store/postgres/store.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { seedJobs } from '../test/helpers/seed.js';
import { FakeProcess, fmt } from './helpers.js';

const PG_URL = process.env.LLMQ_TEST_PG_URL || 'postgres://postgres@127.0.0.1:5432/test';
// LLMQ_BENCH_BIN runs another build (e.g. a copy of bin/ and dist/ from before a change) for before/after figures.
const BIN = process.env.LLMQ_BENCH_BIN || fileURLToPath(new URL('../bin/llmq.js', import.meta.url));
const RUNS = [1, 2, 4];
const TICK = 100; // USER_HZ: /proc times are in 1/100 s
const dir = mkdtempSync(join(tmpdir(), 'llmq-scale-'));
const args = process.argv.slice(2);
const want = (x: string, group: string[]) => !args.some((a) => group.includes(a)) || args.includes(x);

type Kind = 'sqlite' | 'postgres';
interface Pass {
  readonly name: string;
  readonly latencyMs: number;
  readonly concurrency: number;
  jobs(runs: number): number;
}
interface Result {
  kind: Kind;
  pass: string;
  runs: number;
  concurrency: number;
  latencyMs: number;
  jobs: number;
  steady: number;
  wall: number;
  ideal: number | null;
  duplicates: number;
  received: number;
  done: number;
  busy: number;
  runCores: number;
  fakeCores: number;
  pgCores: number;
  /** Jobs per CPU-second spent by the runs, postgres and the fake: the cost, less sensitive to other load than jobs/s. */
  perCpu: number;
  /** PostgreSQL only: commits in the database and WAL flushes of the server per job (server-wide counters, so others' work counts too). */
  commitsPerJob: number | null;
  walSyncsPerJob: number | null;
}

const PASSES: Pass[] = [
  // ~2.5 s of work at the ideal rate, whatever the number of runs
  { name: 'latency', latencyMs: 50, concurrency: 16, jobs: (runs) => Math.round(((runs * 16) / 0.05) * 2.5) },
  // no latency: the requests cost nothing, so what is left is the store and the CPU
  { name: 'ceiling', latencyMs: 0, concurrency: 32, jobs: () => 5_000 },
];

/** CPU ticks of a process (user + system), or null once it is gone. */
function ticks(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(f[11]) + Number(f[12]);
  } catch {
    return null;
  }
}

function postgresPids(): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'postgres') out.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** Machine-wide busy and total jiffies. */
function machine(): { busy: number; total: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = f.reduce((a, b) => a + b, 0);
  return { busy: total - f[3]! - f[4]!, total };
}

/** Follows CPU time of a changing set of processes, by polling (a process's last reading before it exits counts). */
class CpuWatch {
  #first = new Map<number, number>();
  #last = new Map<number, number>();
  #timer: NodeJS.Timeout;
  constructor(
    private pids: () => number[],
    baseline: boolean,
  ) {
    if (baseline)
      for (const p of pids()) {
        const t = ticks(p);
        if (t !== null) this.#first.set(p, t);
      }
    this.#timer = setInterval(() => this.poll(), 100);
  }
  poll(): void {
    for (const p of this.pids()) {
      const t = ticks(p);
      if (t === null) continue;
      if (!this.#first.has(p)) this.#first.set(p, 0);
      this.#last.set(p, t);
    }
  }
  /** CPU seconds used since the start. */
  stop(): number {
    this.poll();
    clearInterval(this.#timer);
    let sum = 0;
    for (const [p, t] of this.#last) sum += t - (this.#first.get(p) ?? 0);
    return sum / TICK;
  }
}

async function withQueue<T>(
  kind: Kind,
  jobs: number,
  fn: (db: string, span: () => Promise<{ done: number; ms: number }>) => Promise<T>,
): Promise<T> {
  if (kind === 'sqlite') {
    const file = join(dir, `q-${randomBytes(4).toString('hex')}.db`);
    const store = new SqliteStore(file);
    await seedJobs(store, jobs);
    await store.close();
    try {
      return await fn(file, async () => {
        const s = new SqliteStore(file);
        try {
          const r = s.db
            .prepare(`SELECT count(*) AS done, max(ended_at) - min(started_at) AS ms FROM attempts WHERE outcome = 'done'`)
            .get() as { done: number; ms: number };
          return r;
        } finally {
          await s.close();
        }
      });
    } finally {
      for (const ext of ['', '-wal', '-shm']) rmSync(file + ext, { force: true });
    }
  }
  const schema = `llmq_bench_${randomBytes(5).toString('hex')}`;
  const url = `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}schema=${schema}`;
  const store = await PostgresStore.open(url);
  try {
    await seedJobs(store, jobs);
    await store.pool.query('ANALYZE');
    return await fn(url, async () => {
      const r = await store.pool.query(
        `SELECT count(*) AS done, max(ended_at) - min(started_at) AS ms FROM attempts WHERE outcome = 'done'`,
      );
      return { done: Number(r.rows[0].done), ms: Number(r.rows[0].ms) };
    });
  } finally {
    await store.close();
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

function runCli(db: string, url: string, concurrency: number): { pid: number; exit: Promise<number> } {
  const child = spawn(
    process.execPath,
    [BIN, 'run', '--db', db, '--base-url', url, '--concurrency', String(concurrency), '--progress', 'none'],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, LLMQ_API_KEY: 'sk-bench', NO_COLOR: '1' },
    },
  );
  let err = '';
  child.stderr!.on('data', (d) => {
    err += d;
  });
  const exit = new Promise<number>((resolve) =>
    child.once('exit', (code) => {
      if (code !== 0) process.stderr.write(`llmq run exited ${code}: ${err.slice(-2000)}\n`);
      resolve(code ?? 1);
    }),
  );
  return { pid: child.pid!, exit };
}

/** Server-wide commit and WAL-flush counters, or null for SQLite. */
async function pgCounters(kind: Kind): Promise<{ commits: number; syncs: number } | null> {
  if (kind !== 'postgres') return null;
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    const r = await c.query(`SELECT (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits,
      (SELECT wal_sync FROM pg_stat_wal) AS syncs`);
    return { commits: Number(r.rows[0].commits), syncs: Number(r.rows[0].syncs) };
  } finally {
    await c.end();
  }
}

async function measure(kind: Kind, pass: Pass, runs: number, fake: FakeProcess): Promise<Result> {
  const jobs = pass.jobs(runs);
  fake.configure({ latencyMs: pass.latencyMs });
  fake.clear();
  return withQueue(kind, jobs, async (db, span) => {
    const p0 = await pgCounters(kind);
    const m0 = machine();
    const children: Array<{ pid: number; exit: Promise<number> }> = [];
    const runWatch = new CpuWatch(() => children.map((c) => c.pid), false);
    const fakeWatch = new CpuWatch(() => [fake.pid], true);
    const pgWatch = new CpuWatch(kind === 'postgres' ? postgresPids : () => [], true);
    const t0 = performance.now();
    for (let i = 0; i < runs; i++) children.push(runCli(db, fake.url, pass.concurrency));
    const codes = await Promise.all(children.map((c) => c.exit));
    const wallS = (performance.now() - t0) / 1000;
    const [runCpu, fakeCpu, pgCpu] = [runWatch.stop(), fakeWatch.stop(), pgWatch.stop()];
    const m1 = machine();
    if (codes.some((c) => c !== 0)) throw new Error(`a run failed (exit codes ${codes.join(', ')})`);
    // backends report their counters when they end or about once a second
    if (p0) await new Promise((r) => setTimeout(r, 1100));
    const p1 = await pgCounters(kind);
    const s = await span();
    const stats = await fake.stats();
    const ideal = pass.latencyMs > 0 ? (runs * pass.concurrency) / (pass.latencyMs / 1000) : null;
    return {
      kind,
      pass: pass.name,
      runs,
      concurrency: pass.concurrency,
      latencyMs: pass.latencyMs,
      jobs,
      steady: s.done / (s.ms / 1000),
      wall: s.done / wallS,
      ideal,
      duplicates: stats.duplicates,
      received: stats.received,
      done: s.done,
      busy: (m1.busy - m0.busy) / (m1.total - m0.total),
      runCores: runCpu / wallS,
      fakeCores: fakeCpu / wallS,
      pgCores: pgCpu / wallS,
      perCpu: s.done / (runCpu + pgCpu + fakeCpu),
      commitsPerJob: p0 && p1 ? (p1.commits - p0.commits) / s.done : null,
      walSyncsPerJob: p0 && p1 ? (p1.syncs - p0.syncs) / s.done : null,
    };
  });
}

function row(r: Result): string {
  const eff = r.ideal ? `${fmt((100 * r.steady) / r.ideal, 0).padStart(4)}%` : '    -';
  const ok = r.done === r.jobs && r.received === r.jobs && r.duplicates === 0;
  return (
    `  ${String(r.runs).padStart(4)} ${fmt(r.jobs).padStart(7)} ${fmt(r.steady).padStart(8)} ${fmt(r.wall).padStart(8)} ` +
    `${(r.ideal ? fmt(r.ideal) : '-').padStart(7)} ${eff}   ${String(r.duplicates).padStart(4)} ${ok ? 'ok  ' : 'MISS'}  ` +
    `${fmt(100 * r.busy).padStart(4)}%   ${fmt(r.runCores, 2)} / ${fmt(r.pgCores, 2)} / ${fmt(r.fakeCores, 2)}   ${fmt(r.perCpu).padStart(6)}` +
    (r.commitsPerJob === null ? '' : `   ${fmt(r.commitsPerJob, 2).padStart(5)} / ${fmt(r.walSyncsPerJob!, 2)}`)
  );
}

function header(kind: Kind): string {
  return (
    '  runs    jobs   jobs/s   wall/s   ideal   eff.  dups sent   CPU busy  cores: runs / postgres / fake   jobs/CPU-s' +
    (kind === 'postgres' ? '  commits / WAL flushes per job' : '')
  );
}

function verdictFor(kind: Kind, results: Result[]): string {
  const lat = results.filter((r) => r.kind === kind && r.pass === 'latency');
  const ceil = results.filter((r) => r.kind === kind && r.pass === 'ceiling');
  const cores = cpus().length;
  const parts: string[] = [];
  if (lat.length) {
    const busy = Math.min(...lat.map((r) => r.busy));
    const full = lat.filter((r) => r.ideal && r.steady / r.ideal >= 0.85).map((r) => r.runs);
    parts.push(
      `With 50 ms requests it reaches ${lat.map((r) => `${fmt((100 * r.steady) / r.ideal!)}%`).join(' / ')} of the ideal with ` +
        `${lat.map((r) => r.runs).join(' / ')} runs (${fmt(lat.at(-1)!.steady)} of ${fmt(lat.at(-1)!.ideal!)} jobs/s at ${lat.at(-1)!.runs}), so it ` +
        (full.length ? `keeps up (>= 85%) up to ${Math.max(...full)} run(s)` : 'does not keep up even with 1 run') +
        (busy > 0.9
          ? `; the machine was at least ${fmt(100 * busy)}% busy throughout: CPU-bound on ${cores} cores, not held by the store`
          : ''),
    );
  }
  if (ceil.length) {
    const best = ceil.reduce((a, b) => (b.steady > a.steady ? b : a));
    const last = ceil.at(-1)!;
    parts.push(
      `With free requests it peaks at ~${fmt(best.steady)} jobs/s with ${best.runs} run(s) ` +
        `(${ceil.map((r) => `${r.runs}: ${fmt(r.steady)}`).join(', ')}), which is where it stops scaling on this machine`,
    );
    const why: string[] = [];
    if (last.busy > 0.9)
      why.push(
        `${last.runs} runs on ${cores} cores are CPU-bound (machine ${fmt(100 * last.busy)}% busy; the llmq runs alone use ${fmt(last.runCores, 2)} cores)`,
      );
    if (last.perCpu < 0.9 * ceil[0]!.perCpu)
      why.push(
        `jobs per CPU-second fall from ${fmt(ceil[0]!.perCpu)} to ${fmt(last.perCpu)} as runs are added, so each added run costs more than it brings`,
      );
    if (kind === 'postgres') {
      why.push(
        `PostgreSQL itself uses ${fmt(Math.max(...ceil.map((r) => r.pgCores)), 2)} cores at most and ${fmt(Math.max(...ceil.map((r) => r.commitsPerJob ?? 0)), 2)} commits per job, so the server is not the limit here`,
      );
    } else {
      why.push(
        `every SQLite write happens inside a run under the file's one write lock, and a run that finds it taken waits in SQLite's busy handler with its whole event loop blocked (better-sqlite3 is synchronous), so runs wait for each other instead of adding throughput`,
      );
    }
    parts.push(why.join('; '));
  }
  return `  ${kind}: ${parts.join('. ')}.`;
}

const kinds = (['sqlite', 'postgres'] as Kind[]).filter((k) => want(k, ['sqlite', 'postgres']));
const passes = PASSES.filter((p) => want(p.name, ['latency', 'ceiling']));
const fake = await FakeProcess.start({ latencyMs: 0 });
const results: Result[] = [];
console.log(
  `load average before: ${loadavg()
    .map((l) => fmt(l, 2))
    .join(' ')} on ${cpus().length} cores`,
);
console.log(`jobs/s is measured from the first request to the last answer (attempts table); wall/s includes starting the processes.`);
console.log(`CPU busy is the whole machine (others' work included); cores are CPU-seconds per wall second of the llmq runs, of every`);
console.log(`postgres process, and of the fake; jobs/CPU-s divides the jobs by those CPU-seconds (what a job costs, whatever else runs).`);
try {
  for (const pass of passes) {
    console.log(
      pass.latencyMs > 0
        ? `\n(${pass.name}) fake latency ${pass.latencyMs} ms, --concurrency ${pass.concurrency} per run; ideal = runs x ${pass.concurrency} / ${pass.latencyMs / 1000} s`
        : `\n(${pass.name}) zero-latency fake, --concurrency ${pass.concurrency} per run: the store and CPU ceiling`,
    );
    for (const kind of kinds) {
      console.log(` ${kind}${kind === 'postgres' ? ' (fresh schema per row, dropped after)' : ' (one file)'}`);
      console.log(header(kind));
      for (const runs of RUNS) {
        const r = await measure(kind, pass, runs, fake);
        results.push(r);
        console.log(row(r));
      }
    }
  }
} finally {
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
}
const dups = results.reduce((a, r) => a + r.duplicates, 0);
const missing = results.filter((r) => r.done !== r.jobs || r.received !== r.jobs).length;
console.log(
  `\nsent twice: ${dups} job(s) over ${results.length} rows; rows where sent != jobs or done != jobs: ${missing}  ${dups === 0 && missing === 0 ? 'PASS' : 'MISS'}`,
);
console.log(
  `load average after: ${loadavg()
    .map((l) => fmt(l, 2))
    .join(' ')}`,
);
console.log('where scaling stops:');
for (const kind of kinds) console.log(verdictFor(kind, results));
if (dups > 0 || missing > 0) process.exitCode = 1;
