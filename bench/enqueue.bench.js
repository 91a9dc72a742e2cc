// Enqueue throughput: 100,000 JSONL documents of about 1 KB through the real ingest path, next to a
// floor measured in the same run on the same file: read it, JSON.parse each line, render and hash the
// request, and insert the same job and item rows with raw prepared statements in one transaction.
// Both timings include closing the database (the WAL checkpoint), so neither defers its writes.
// Then the CLI itself: a fresh enqueue and the same file again (which must add nothing), each with
// its peak RSS, on SQLite and (with BENCH_PG_URL) on PostgreSQL; and on SQLite an enqueue resumed
// after one stopped a third of the way, whose rows go into a queue that has jobs (not in bulk).
// Targets: core within 1.1x of the floor, above 50,000 documents/s; peak RSS under 300 MB.
//
// BENCH_DOCS=n documents (default 100,000); BENCH_DOC_BYTES=n their size (default 1000);
// BENCH_CLI_ONLY=1 skips the floor and core (for 1M-10M runs: the floor holds the file in memory);
// BENCH_PG_URL=postgres://... also runs the CLI on PostgreSQL, in a fresh schema it drops after;
// LLMQ_BENCH_BIN=/path/to/bin/llmq.js runs another build's CLI (before/after figures).
import { hash } from 'node:crypto';
import { createReadStream, createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { spawnSync } from 'node:child_process';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { enqueue } from '../dist/ingest/enqueue.js';
import { parseTemplate } from '../dist/ingest/template.js';
import { SqliteStore } from '../dist/store/sqlite/store.js';

const N = Number(process.env.BENCH_DOCS ?? 100_000);
const DOC_BYTES = Number(process.env.BENCH_DOC_BYTES ?? 1000);
const CLI_ONLY = process.env.BENCH_CLI_ONLY === '1';
const PG_URL = process.env.BENCH_PG_URL;
const PROMPT = 'Summarize the following document in 3 to 5 sentences.\n\n{{text}}';
const MODEL = 'gpt-4o-mini';
const MAX_TOKENS = 512;
const bin = process.env.LLMQ_BENCH_BIN || fileURLToPath(new URL('../bin/llmq.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'llmq-bench-enqueue-'));

// Streamed to the file, so that ten million documents never sit in memory. xorshift32: every text
// differs (one job per document), as real documents do.
async function generate(file) {
  const words = (
    'the of and to in is that for it as was with be by on not he this are or his from at which but have an they ' +
    'report model queue budget quarterly revenue customer support ticket invoice shipment delay contract review meeting ' +
    'engineering release latency outage database migration summary analysis forecast'
  ).split(' ');
  let seed = 42;
  const rand = () => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) / 2 ** 32;
  };
  const out = createWriteStream(file);
  let lines = [];
  for (let i = 0; i < N; i++) {
    let text = '';
    while (text.length < DOC_BYTES - 40) text += words[Math.floor(rand() * words.length)] + (rand() < 0.08 ? '. ' : ' ');
    lines.push(JSON.stringify({ id: `doc-${String(i).padStart(8, '0')}`, text, lang: 'en' }));
    if (lines.length === 10_000 || i === N - 1) {
      if (!out.write(lines.join('\n') + '\n')) await new Promise((resolve) => out.once('drain', resolve));
      lines = [];
    }
  }
  await new Promise((resolve, reject) => out.end((error) => (error ? reject(error) : resolve())));
}

async function core(file, db) {
  const store = new SqliteStore(db);
  const t0 = performance.now();
  const s = await enqueue(store, {
    sources: [file],
    request: { prompt: parseTemplate(PROMPT), system: null, model: MODEL, maxTokens: MAX_TOKENS, priority: 0 },
  });
  await store.close(); // timed: closing checkpoints the WAL, part of getting the rows on disk
  const ms = performance.now() - t0;
  if (s.newItems !== N || s.rejected !== 0)
    throw new Error(`expected ${N} new items, got ${JSON.stringify({ ...s, rejections: undefined })}`);
  return ms;
}

async function floor(file, db) {
  const store = new SqliteStore(db); // same schema and pragmas; nothing else of it is used
  // an enqueue's connection settings: without them (temp_store above all) one transaction of
  // 100,000 inserts writes its statement journals to a temporary file, and the floor took 8.8 s
  for (const p of SqliteStore.ENQUEUE_PRAGMAS) store.db.pragma(p);
  const t0 = performance.now();
  const insertJob = store.db.prepare(`INSERT INTO jobs (key, request, model, priority, created_at, updated_at)
    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`);
  const insertItem = store.db.prepare('INSERT INTO items (id, source, job_key, meta, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)');
  const head = `{"max_tokens":${MAX_TOKENS},"messages":[{"content":`;
  const tail = `,"role":"user"}],"model":"${MODEL}"}`;
  const [before, after] = PROMPT.split('{{text}}');
  const now = Date.now();
  const lines = readFileSync(file, 'utf8').split('\n');
  store.db.transaction(() => {
    for (let i = 0; i < lines.length; i++) {
      if (lines[i] === '') continue;
      const { id, text, ...meta } = JSON.parse(lines[i]);
      const request = head + JSON.stringify(before + text + after) + tail;
      const key = hash('sha256', request, 'hex'); // the fastest SHA-256 Node has, as jobKey uses
      insertJob.run(key, request, MODEL, 0, now, now);
      insertItem.run(id, `${file}:${i + 1}`, key, JSON.stringify(meta), now, now);
    }
  })();
  await store.close();
  const ms = performance.now() - t0;
  return ms;
}

// Not a target: what this machine's disk path allows at all. The raw lines, no parsing, no hashing,
// into a one-column table with no index, WAL mode as llmq uses it. Neither path can beat this.
function ceiling(file, db) {
  const d = new Database(db);
  d.pragma('journal_mode = WAL');
  d.pragma('synchronous = NORMAL');
  d.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)');
  const t0 = performance.now();
  const insert = d.prepare('INSERT INTO t (v) VALUES (?)');
  const lines = readFileSync(file, 'utf8').split('\n');
  d.transaction(() => {
    for (const line of lines) if (line !== '') insert.run(line);
  })();
  d.close();
  return performance.now() - t0;
}

// The child reports its own peak RSS and CPU time as it exits (Node gives no rusage of a spawned
// child). CPU time is the figure to compare when the machine is shared: wall time moves with load.
const REPORT_RSS =
  'data:text/javascript,process.on("exit",()=>{const u=process.resourceUsage();' +
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the child's code, a template literal written out as text
  'process.stderr.write(`\\nllmq-bench-usage ${u.maxRSS} ${(u.userCPUTime+u.systemCPUTime)/1e6} ${u.systemCPUTime/1e6}\\n`)})';

function cli(file, db, cwd = undefined) {
  const t0 = performance.now();
  const r = spawnSync(process.execPath, ['--import', REPORT_RSS, bin, 'enqueue', file, '--db', db, '--prompt', PROMPT, '--json'], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    cwd,
  });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`llmq enqueue exited ${r.status}: ${r.stderr}`);
  const summary = JSON.parse(r.stdout);
  const [, rss, cpu, sys] = /llmq-bench-usage (\d+) ([\d.]+) ([\d.]+)/.exec(r.stderr) ?? [];
  return { ms, rssMiB: Number(rss) / 1024, cpuS: Number(cpu), sysS: Number(sys), summary };
}

function cliPair(label, file, db) {
  const fresh = cli(file, db);
  if (fresh.summary.newItems !== N) throw new Error(`expected ${N} new items, got ${JSON.stringify(fresh.summary)}`);
  const again = cli(file, db);
  if (again.summary.newItems !== 0 || again.summary.newJobs !== 0 || again.summary.unchanged !== N) {
    throw new Error(`the same file again must add nothing, got ${JSON.stringify(again.summary)}`);
  }
  const line = (what, r) =>
    `${label} ${what}: ${fmt(rate(r.ms)).padStart(7)} docs/s  (${(r.ms / 1000).toFixed(1)} s; ` +
    `CPU ${r.cpuS.toFixed(1)} s, of it system ${r.sysS.toFixed(1)} s)  peak RSS ${r.rssMiB.toFixed(0)} MiB`;
  console.log(line('enqueue CLI, fresh     ', fresh));
  console.log(line('enqueue CLI, same again', again));
  return [fresh, again];
}

// An enqueue stopped a third of the way (Ctrl-C), then the same input again: a third of the
// documents are stored under the same ids and sources, the rest go into a queue that has jobs, so
// not in bulk. The first third is a file of the same name in a folder of its own, given by the same
// relative path, so its items' sources are those of the whole file's first lines.
async function cliResumed(label, file, db) {
  const third = Math.floor(N / 3);
  const partDir = join(dir, 'resumed-part');
  mkdirSync(partDir, { recursive: true });
  await firstLines(file, join(partDir, 'docs.jsonl'), third);
  const part = cli('docs.jsonl', db, partDir);
  rmSync(partDir, { recursive: true, force: true });
  if (part.summary.newItems !== third) throw new Error(`expected ${third} new items, got ${JSON.stringify(part.summary)}`);
  const resumed = cli('docs.jsonl', db, dirname(file));
  if (resumed.summary.unchanged !== third || resumed.summary.newItems !== N - third) {
    throw new Error(`the resumed enqueue must add the rest and keep the third, got ${JSON.stringify(resumed.summary)}`);
  }
  console.log(
    `${label} enqueue CLI, resumed after a third: ${fmt(rate(resumed.ms)).padStart(7)} docs/s  (${(resumed.ms / 1000).toFixed(1)} s; ` +
      `CPU ${resumed.cpuS.toFixed(1)} s, of it system ${resumed.sysS.toFixed(1)} s)  peak RSS ${resumed.rssMiB.toFixed(0)} MiB`,
  );
  return [resumed];
}

/** Copy the first `n` lines of `from` to `to`, streamed: at ten million documents the file does not fit in memory. */
async function firstLines(from, to, n) {
  const out = createWriteStream(to);
  let copied = 0;
  for await (const line of createInterface({ input: createReadStream(from), crlfDelay: Number.POSITIVE_INFINITY })) {
    if (copied === n) break;
    if (!out.write(line + '\n')) await new Promise((resolve) => out.once('drain', resolve));
    copied++;
  }
  await new Promise((resolve, reject) => out.end((error) => (error ? reject(error) : resolve())));
}

function pgSchema(sql) {
  const r = spawnSync(
    process.execPath,
    [
      '-e',
      `const pg = require('pg'); const c = new pg.Client(process.argv[1]);
    c.connect().then(() => c.query(process.argv[2])).then(() => c.end(), (e) => { console.error(e.message); process.exit(1); })`,
      PG_URL,
      sql,
    ],
    { encoding: 'utf8', cwd: fileURLToPath(new URL('..', import.meta.url)) },
  );
  if (r.status !== 0) throw new Error(`PostgreSQL: ${r.stderr}`);
}

const rate = (ms) => Math.round(N / (ms / 1000));
const fmt = (n) => n.toLocaleString('en-US');

try {
  const file = join(dir, 'docs.jsonl');
  await generate(file);
  const mb = statSync(file).size / 1024 / 1024;
  console.log(`input: ${fmt(N)} JSONL documents, ${mb.toFixed(1)} MiB (about ${Math.round((mb * 1024 * 1024) / N)} bytes each)`);
  // This machine is shared: say how busy it was, since every figure below moves with it.
  console.log(
    `machine: ${cpus().length} cores, load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')} (1, 5, 15 min)`,
  );
  if (!CLI_ONLY) {
    // Alternate floor and core, best of 5 each, so neither gets a warmer cache or a quieter moment.
    const floors = [],
      cores = [];
    for (let i = 0; i < 5; i++) {
      floors.push(await floor(file, join(dir, `floor-${i}.db`)));
      cores.push(await core(file, join(dir, `core-${i}.db`)));
      rmSync(join(dir, `floor-${i}.db`), { force: true });
      rmSync(join(dir, `core-${i}.db`), { force: true });
      globalThis.gc?.();
    }
    const f = Math.min(...floors),
      c = Math.min(...cores);
    const top = Math.min(ceiling(file, join(dir, 'ceiling-0.db')), ceiling(file, join(dir, 'ceiling-1.db')));
    const ratio = c / f;
    console.log(`floor  (read, parse, hash, raw INSERTs, 1 txn): ${fmt(rate(f)).padStart(7)} docs/s  (${f.toFixed(0)} ms)`);
    console.log(`enqueue core (enqueue() on SqliteStore):       ${fmt(rate(c)).padStart(7)} docs/s  (${c.toFixed(0)} ms)`);
    console.log(`(machine ceiling: raw lines into a bare table, no index: ${fmt(rate(top))} docs/s, ${top.toFixed(0)} ms)`);
    console.log(`core / floor time: ${ratio.toFixed(2)}x   target <= 1.10x   ${ratio <= 1.1 ? 'PASS' : 'MISS'}`);
    console.log(`core rate: ${fmt(rate(c))} docs/s   target > 50,000 docs/s   ${rate(c) > 50_000 ? 'PASS' : 'MISS'}`);
  }
  const db = join(dir, 'cli.db');
  const runs = cliPair('sqlite', file, db);
  console.log(`sqlite database: ${fmt(Math.round(statSync(db).size / N))} bytes per document`);
  rmSync(db, { force: true });
  runs.push(...(await cliResumed('sqlite', file, join(dir, 'resumed.db'))));
  if (PG_URL) {
    const schema = `llmq_bench_enqueue_${process.pid}`;
    pgSchema(`CREATE SCHEMA ${schema}`);
    try {
      const url = new URL(PG_URL);
      url.searchParams.set('schema', schema);
      runs.push(...cliPair('postgres', file, url.toString()));
    } finally {
      pgSchema(`DROP SCHEMA ${schema} CASCADE`);
    }
  }
  const peak = Math.max(...runs.map((r) => r.rssMiB));
  console.log(`peak RSS of the CLI: ${peak.toFixed(0)} MiB   target < 300 MiB   ${peak < 300 ? 'PASS' : 'MISS'}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
