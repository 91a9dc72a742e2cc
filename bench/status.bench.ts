// llmq status on a large queue: in-process store.status() and `llmq status --json` wall time (process start included).
// Targets: store.status() < 100 ms and `status --json` < 250 ms at 1M and 10M jobs, on SQLite and PostgreSQL.
//   npm run bench status                      1M jobs, both stores
//   BENCH_JOBS=10000000 BENCH_TEXT=20 npm run bench status -- postgres   (20-byte documents: quicker to build)
//   LLMQ_BENCH_BEFORE=/tmp/old  a copy of bin/ and dist/ from before a change: the queue is built and measured
//                               with it first, then opened (migrated) and measured with this build.
import { mkdtempSync, rmSync } from 'node:fs';
import { spawn, spawnSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import pg from 'pg';
import { fmt, verdict } from './helpers.js';

const JOBS = Number(process.env.BENCH_JOBS ?? 1_000_000);
// bytes of document text per request: less makes a 10M-job queue quick to build (status reads no request text)
const TEXT = Number(process.env.BENCH_TEXT ?? 480);
const PG_URL = process.env.LLMQ_TEST_PG_URL || 'postgres://postgres@127.0.0.1:5432/test';
const HERE = fileURLToPath(new URL('..', import.meta.url));
const BEFORE = process.env.LLMQ_BENCH_BEFORE;
const builds = [...(BEFORE ? [{ name: 'before', root: BEFORE }] : []), { name: BEFORE ? 'after' : 'this build', root: HERE }];
const kinds = ['sqlite', 'postgres'].filter((k) => process.argv.length <= 2 || process.argv.slice(2).includes(k));
const now = Date.now();

// A realistic mix, made inside the database (the point is reading a big queue, not writing one): a third done with
// usage and cost, one in a thousand failed (a few reasons), one in a hundred pending after a try, two models.
const request = (filler: string) => `'{"max_tokens":64,"messages":[{"content":"' || ${filler} || i || '","role":"user"}]}'`;
const MODEL = `CASE WHEN i % 5 = 0 THEN 'gpt-4o' ELSE 'gpt-4o-mini' END`;
const STATE = `CASE WHEN i % 1000 = 1 THEN 'failed' WHEN i % 3 = 0 THEN 'done' ELSE 'pending' END`;

async function buildSqlite(root: string, path: string): Promise<void> {
  const { SqliteStore } = await import(pathToFileURL(join(root, 'dist/store/sqlite/store.js')).href);
  const store = new SqliteStore(path);
  store.db.exec(`
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${JOBS})
    INSERT INTO jobs (key, request, model, state, attempts, prompt_tokens, completion_tokens, cost_usd, error, output, created_at, updated_at)
    SELECT lower(hex(randomblob(32))), ${request(`substr(hex(zeroblob(${TEXT})), 1, ${TEXT})`)}, ${MODEL}, ${STATE},
      CASE WHEN i % 100 = 2 OR i % 1000 = 1 THEN 1 ELSE 0 END,
      CASE WHEN i % 3 = 0 THEN 250 END, CASE WHEN i % 3 = 0 THEN 60 END, CASE WHEN i % 6 = 0 THEN 0.0000735 END,
      CASE WHEN i % 1000 = 1 THEN 'HTTP 400: bad request ' || (i % 7) END, CASE WHEN i % 3 = 0 THEN 'ok' END, ${now} + i, ${now} + i FROM n;
    INSERT INTO items (id, source, job_key, meta, created_at, updated_at) SELECT 'doc-' || seq, 'bench', key, NULL, created_at, created_at FROM jobs;`);
  await store.close();
}

async function buildPostgres(root: string, url: string): Promise<void> {
  const { PostgresStore } = await import(pathToFileURL(join(root, 'dist/store/postgres/store.js')).href);
  const store = await PostgresStore.open(url);
  await store.pool.query(`
    INSERT INTO jobs (key, request, model, state, attempts, prompt_tokens, completion_tokens, cost_usd, error, output, created_at, updated_at)
    SELECT md5(i::text) || md5((i * 7)::text), ${request(`repeat('0', ${TEXT})`)}, ${MODEL}, ${STATE},
      CASE WHEN i % 100 = 2 OR i % 1000 = 1 THEN 1 ELSE 0 END,
      CASE WHEN i % 3 = 0 THEN 250 END, CASE WHEN i % 3 = 0 THEN 60 END, CASE WHEN i % 6 = 0 THEN 0.0000735 END,
      CASE WHEN i % 1000 = 1 THEN 'HTTP 400: bad request ' || (i % 7) END, CASE WHEN i % 3 = 0 THEN 'ok' END, ${now} + i, ${now} + i
    FROM generate_series(1, ${JOBS}) AS i`);
  await store.pool.query(`INSERT INTO items (id, source, job_key, meta, created_at, updated_at)
    SELECT 'doc-' || seq, 'bench', key, NULL, created_at, created_at FROM jobs`);
  await store.pool.query('VACUUM ANALYZE jobs').catch(() => {});
  await store.pool.query('VACUUM ANALYZE items').catch(() => {});
  await store.close();
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function measure(
  kind: string,
  root: string,
  location: string,
): Promise<{ openMs: number; statusMs: number; cliMs: number; startMs: number; total: number }> {
  const t0 = performance.now();
  const store =
    kind === 'sqlite'
      ? new (await import(pathToFileURL(join(root, 'dist/store/sqlite/store.js')).href)).SqliteStore(location)
      : await (await import(pathToFileURL(join(root, 'dist/store/postgres/store.js')).href)).PostgresStore.open(location);
  const openMs = performance.now() - t0; // includes a migration (its backfill) the first time a build opens the queue
  const times: number[] = [];
  let total = 0;
  for (let i = 0; i < 7; i++) {
    const t = performance.now();
    total = (await store.status()).total;
    times.push(performance.now() - t);
  }
  await store.close();
  const cli: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    const r = spawnSync(process.execPath, [join(root, 'bin/llmq.js'), 'status', '--json', '--db', location], { encoding: 'utf8' });
    cli.push(performance.now() - t);
    if (r.status !== 0) throw new Error(`status --json failed: ${r.stderr}`);
  }
  // the same process start without a queue: what of `status --json` is not status
  const start: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    spawnSync(process.execPath, [join(root, 'bin/llmq.js'), '--version']);
    start.push(performance.now() - t);
  }
  return { openMs, statusMs: median(times), cliMs: median(cli), startMs: median(start), total };
}

/**
 * `llmq serve`: a page load (the page, its script and style, its config, and the status snapshot its event stream
 * opens with), timed from the first request to the snapshot, with the server already up; and the status poll it
 * reports (readMs). Each load is a new stream to an idle server, so each one polls the store.
 */
async function dashboard(root: string, location: string): Promise<{ loadMs: number; pollMs: number }> {
  const child = spawn(process.execPath, [join(root, 'bin/llmq.js'), 'serve', '--port', '0', '--read-only', '--db', location], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  try {
    let err = '';
    const url = await new Promise<string>((resolve, reject) => {
      child.stderr!.on('data', (d: Buffer) => {
        err += d.toString();
        const u = /at (http:\/\/\S+)/.exec(err)?.[1];
        if (u && /Ctrl-C/.test(err)) resolve(u);
      });
      child.once('exit', (code) => reject(new Error(`llmq serve exited with ${code}: ${err}`)));
    });
    const loads: number[] = [];
    const polls: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      await Promise.all(['', 'app.js', 'style.css', 'api/config'].map(async (p) => (await fetch(url + p)).arrayBuffer()));
      const ac = new AbortController();
      const res = await fetch(url + 'events', { signal: ac.signal });
      let text = '';
      for await (const chunk of res.body!) {
        text += Buffer.from(chunk).toString();
        const m = /event: snapshot\ndata: (.*)\n\n/.exec(text);
        if (m) {
          loads.push(performance.now() - t);
          polls.push(JSON.parse(m[1]!).readMs);
          break;
        }
      }
      ac.abort();
      await new Promise((r) => setTimeout(r, 100)); // let the server see the stream close (and stop polling)
    }
    return { loadMs: median(loads), pollMs: median(polls) };
  } finally {
    child.kill('SIGTERM');
  }
}

for (const kind of kinds) {
  const dir = mkdtempSync(join(tmpdir(), 'llmq-bench-status-'));
  const schema = `llmq_bench_status_${process.pid}`;
  const location = kind === 'sqlite' ? join(dir, 'q.db') : `${PG_URL}?schema=${schema}`;
  try {
    const t0 = performance.now();
    await (kind === 'sqlite' ? buildSqlite : buildPostgres)(builds[0]!.root, kind === 'sqlite' ? location : location);
    console.log(`${kind}: built a queue of ${fmt(JOBS)} jobs with ${builds[0]!.name} in ${fmt((performance.now() - t0) / 1000, 1)} s`);
    for (const b of builds) {
      const r = await measure(kind, b.root, location);
      if (r.total !== JOBS) throw new Error(`status counted ${r.total} jobs, expected ${JOBS}`);
      console.log(
        `  ${b.name.padEnd(10)} open ${fmt(r.openMs).padStart(7)} ms   store.status() median ${fmt(r.statusMs, 1).padStart(7)} ms ` +
          `(< 100 ${verdict(r.statusMs < 100)})   status --json median ${fmt(r.cliMs).padStart(6)} ms (< 250 ${verdict(r.cliMs < 250)}; ` +
          `llmq --version ${fmt(r.startMs)} ms)`,
      );
      const d = await dashboard(b.root, location);
      console.log(
        `  ${''.padEnd(10)} llmq serve: page load median ${fmt(d.loadMs).padStart(6)} ms (< 1000 ${verdict(d.loadMs < 1000)})   ` +
          `its status poll median ${fmt(d.pollMs, 1)} ms`,
      );
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
    if (kind === 'postgres') {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
      await c.end();
    }
  }
}
