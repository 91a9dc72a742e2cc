import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { beforeEach, describe, expect, it } from 'vitest';
import { ONE_ENQUEUE_AT_A_TIME_SQL } from '../src/store/postgres/enqueue.js';
import { PostgresStore } from '../src/store/postgres/store.js';
import type { EnqueueResult, EnqueueRow } from '../src/store/types.js';
import { runCli } from './helpers/cli.js';
import { PG_URL, STORE_KINDS, freshPgUrl, row, skipUnavailable } from './helpers/stores.js';
import { tempDir } from './helpers/tmp.js';
import { waitFor } from './helpers/wait.js';

// A fresh PostgreSQL queue is loaded in bulk between beginLoad and endLoad (src/store/postgres/bulk-load.ts):
// what it stores must be what the batch-by-batch path stores, and a load killed half way must leave nothing to repair.

const postgres = STORE_KINDS.find((k) => k.name === 'postgres')!;

async function sql<T extends pg.QueryResultRow>(url: string, text: string, params: unknown[] = []): Promise<T[]> {
  const schema = new URL(url).searchParams.get('schema')!;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(`SET search_path = "${schema}"`);
    return (await client.query<T>(text, params)).rows;
  } finally {
    await client.end();
  }
}

/** Batches of 1,500 rows with what the plain path must get right: identical requests within a batch and across batches, meta, priorities, models. */
function batches(): EnqueueRow[][] {
  const all: EnqueueRow[] = [];
  for (let i = 0; i < 4500; i++) {
    const text = i % 7 === 0 ? `same text ${i % 3}` : i % 11 === 0 ? `text ${i - 1600}` : `text ${i}`;
    all.push(
      row(`doc-${String(i).padStart(5, '0')}`, text, {
        priority: i % 5 === 0 ? -1 : 0,
        model: i % 2 ? 'gpt-a' : 'gpt-b',
        meta: i % 3 === 0 ? { n: i, tag: 'ü"\\' } : null,
      }),
    );
  }
  return [all.slice(0, 1500), all.slice(1500, 3000), all.slice(3000)];
}

type Counted = Omit<EnqueueResult, 'fromAnotherFile' | 'sourceRenamed' | 'keptItems' | 'firstMoved' | 'keptRaised' | 'joinedFailed'>;

function sum(results: EnqueueResult[], repeated = 0): Counted {
  const t = { newJobs: -repeated, newItems: 0, movedItems: 0, unchanged: 0, droppedJobs: 0, orphanedAnswers: 0, reprioritized: 0 };
  for (const r of results) for (const k of Object.keys(t) as (keyof Counted)[]) t[k] += r[k];
  return t;
}

/** Everything enqueue stores, in the order claims and exports see it. */
async function contents(url: string) {
  return {
    jobs: await sql(url, 'SELECT key, request, model, priority, state, attempts, created_at FROM jobs ORDER BY seq'),
    items: await sql(url, 'SELECT id, source, job_key, meta, created_at FROM items ORDER BY seq'),
    counts: await sql(url, 'SELECT model, state, sum(jobs)::int AS jobs FROM job_counts GROUP BY 1, 2 HAVING sum(jobs) <> 0 ORDER BY 1, 2'),
    items_counted: (await sql<{ n: number }>(url, 'SELECT sum(items)::int AS n FROM item_counts'))[0]!.n,
    indexes: await sql(
      url,
      `SELECT indexname, replace(indexdef, current_schema() || '.', '') AS indexdef FROM pg_indexes WHERE schemaname = current_schema() AND tablename IN ('jobs', 'items') ORDER BY 1`,
    ),
    constraints: await sql(
      url,
      `SELECT conname, pg_get_constraintdef(oid) AS def, convalidated FROM pg_constraint
       WHERE conrelid IN ('jobs'::regclass, 'items'::regclass) ORDER BY 1`,
    ),
  };
}

/**
 * A load (`rows`, one batch) begun while another enqueue's transaction has read items and will write
 * jobs next, holding the enqueues' turn when `turn`. Once the load is done or waits on a lock, the
 * other writes jobs and commits. The load's result; a deadlock between the two rejects it.
 */
async function loadBesideEnqueue(url: string, store: PostgresStore, rows: EnqueueRow[], o: { turn: boolean }): Promise<EnqueueResult> {
  const other = new pg.Client({ connectionString: PG_URL });
  await other.connect();
  try {
    await other.query(`SET search_path = "${new URL(url).searchParams.get('schema')}"`);
    await other.query('BEGIN');
    if (o.turn) await other.query(ONE_ENQUEUE_AT_A_TIME_SQL);
    await other.query('SELECT count(*) FROM items');
    store.beginLoad();
    let loaded = false;
    const loading = store.enqueue(rows, 2).finally(() => (loaded = true));
    loading.catch(() => {}); // awaited below, after the other's write
    await waitFor(async () => loaded || (await other.query(`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted`)).rows[0].n > 0, {
      what: 'the load to finish or wait on a lock',
    });
    await other.query('UPDATE jobs SET priority = priority WHERE false'); // a write to jobs: its table lock is the point
    await other.query('COMMIT');
    const result = await loading;
    await store.endLoad();
    return result;
  } finally {
    await other.end();
  }
}

describe('postgres bulk load of a fresh queue', () => {
  beforeEach((ctx) => skipUnavailable(postgres, ctx));

  it('stores row for row what the batch-by-batch path stores, counts and indexes included', async () => {
    const now = 1_700_000_000_000;
    const plainUrl = freshPgUrl();
    const plain = await PostgresStore.open(plainUrl);
    const plainResults = [];
    for (const b of batches()) plainResults.push(await plain.enqueue(b, now));
    await plain.close();

    const bulkUrl = freshPgUrl();
    const bulk = await PostgresStore.open(bulkUrl);
    bulk.beginLoad();
    const bulkResults = [];
    for (const b of batches()) bulkResults.push(await bulk.enqueue(b, now));
    const { repeatedJobs } = await bulk.endLoad();
    await bulk.close();

    expect(repeatedJobs).toBeGreaterThan(0);
    expect(sum(bulkResults, repeatedJobs)).toEqual(sum(plainResults));
    const [want, got] = [await contents(plainUrl), await contents(bulkUrl)];
    expect(got.jobs.length).toBe(sum(plainResults).newJobs);
    expect(got).toEqual(want);
  });

  it('lets status read while a load holds the queue, showing what is committed', async () => {
    const url = freshPgUrl();
    const loader = await PostgresStore.open(url);
    const reader = await PostgresStore.open(url);
    loader.beginLoad();
    const [first] = batches();
    await loader.enqueue(first!, 1);
    const t0 = Date.now();
    const status = await reader.status();
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(status).toMatchObject({ total: 0, items: 0, oldestPendingAt: null });
    await loader.endLoad();
    expect(await reader.status()).toMatchObject({ items: 1500, oldestPendingAt: 1 });
    await Promise.all([loader.close(), reader.close()]);
  });

  it('loads text that COPY must escape (tabs, newlines, backslashes, \\N, a lone surrogate) as the plain path stores it', async () => {
    const odd = ['tab\there', 'line\nbreak', 'carriage\rreturn', 'back\\slash', '\\N', 'end\\', 'lone \ud800 surrogate', '', 'plain'];
    const load = () =>
      Array.from({ length: 1200 }, (_, i) => {
        const s = odd[i % odd.length]!;
        const r = row(`${s} ${i}`, `${s} text ${i % 600}`, { source: `${s}/${i}`, meta: i % 2 ? { s, n: i } : null });
        // a request as a caller may hand it, not only as the renderer writes it (JSON escapes control characters)
        return i % 3 ? r : { ...r, request: `${s}\t${r.request}` };
      });
    const urls = [freshPgUrl(), freshPgUrl()];
    const [plain, bulk] = await Promise.all(urls.map((u) => PostgresStore.open(u)));
    const plainResult = await plain!.enqueue(load(), 5);
    bulk!.beginLoad();
    const bulkResult = await bulk!.enqueue(load(), 5);
    expect(await bulk!.endLoad()).toEqual({ repeatedJobs: 0 });
    await Promise.all([plain!.close(), bulk!.close()]);
    expect(bulkResult).toEqual(plainResult);
    const [want, got] = [await contents(urls[0]!), await contents(urls[1]!)];
    expect(got.items.map((i) => (i as { id: string }).id)).toContain('lone \ufffd surrogate 6');
    expect(got).toEqual(want);
  });

  it('loads batch by batch into a queue that is not empty', async () => {
    const url = freshPgUrl();
    const store = await PostgresStore.open(url);
    const [first, second] = batches();
    await store.enqueue(first!, 1);
    store.beginLoad();
    const r = await store.enqueue([...first!.slice(0, 10), ...second!], 2);
    expect(await sql(url, 'SELECT count(*)::int AS n FROM items')).toEqual([{ n: 3000 }]);
    expect(await store.endLoad()).toEqual({ repeatedJobs: 0 });
    expect(r.unchanged).toBe(10);
    await store.close();
  });

  it('never locks a queue that has jobs: a load beside an enqueue that read items and then writes jobs does not deadlock', async () => {
    const url = freshPgUrl();
    const store = await PostgresStore.open(url);
    const [first, second] = batches();
    await store.enqueue(first!.slice(0, 10), 1);
    expect(await loadBesideEnqueue(url, store, second!, { turn: false })).toMatchObject({ newItems: 1500 });
    expect(await sql(url, 'SELECT count(*)::int AS n FROM items')).toEqual([{ n: 1510 }]);
    await store.close();
  });

  it('waits its turn behind an enqueue whose first batch is not committed yet, instead of deadlocking with it', async () => {
    const url = freshPgUrl();
    const store = await PostgresStore.open(url);
    const [, second] = batches();
    // into the empty queue: the other enqueue's first batch holds the turn, as a plain enqueue does
    expect(await loadBesideEnqueue(url, store, second!, { turn: true })).toMatchObject({ newItems: 1500 });
    expect(await sql(url, 'SELECT count(*)::int AS n FROM items')).toEqual([{ n: 1500 }]);
    await store.close();
  });

  it('leaves a queue killed half way through its load as it was, and the next enqueue and run do every job once', async () => {
    const url = freshPgUrl();
    const dir = tempDir();
    const child = spawn(process.execPath, [fileURLToPath(new URL('./helpers/bulk-load-child.mjs', import.meta.url)), url], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    // the child says when two batches are in and the third is on its way, then is killed without a word
    await new Promise<void>((resolve, reject) => {
      child.stdout!.setEncoding('utf8').on('data', (d: string) => d.includes('loading') && resolve());
      child.once('exit', (code) => reject(new Error(`the loading child exited early (${code})`)));
    });
    child.kill('SIGKILL');
    await new Promise((resolve) => child.once('exit', resolve));

    const after = await contents(url);
    expect(after.jobs).toEqual([]);
    expect(after.items).toEqual([]);
    expect(after.indexes.map((i) => i.indexname)).toEqual(expect.arrayContaining(['jobs_key_key', 'items_job']));
    expect(after.constraints.map((c) => c.conname)).toEqual(expect.arrayContaining(['items_job_key_fkey']));

    const file = join(dir, 'docs.jsonl');
    writeFileSync(file, Array.from({ length: 3000 }, (_, i) => JSON.stringify({ id: `d${i}`, text: `document ${i % 2500}` })).join('\n'));
    const enq = await runCli(['enqueue', file, '--db', url, '--model', 'mock-1', '--prompt', 'Summarize: {{text}}', '--json']);
    expect(enq.code, enq.stderr).toBe(0);
    expect(JSON.parse(enq.stdout)).toMatchObject({ newItems: 3000, newJobs: 2500 });
    const run = await runCli(['run', '--db', url, '--provider', 'mock', '--concurrency', '16', '--mock-latency', '0'], {
      timeoutMs: 120_000,
    });
    expect(run.code, run.stderr).toBe(0);
    expect(await sql(url, `SELECT state, count(*)::int AS n FROM jobs GROUP BY state`)).toEqual([{ state: 'done', n: 2500 }]);
    expect(
      await sql(
        url,
        `SELECT count(*)::int AS n FROM (SELECT job_key FROM attempts WHERE outcome = 'done' GROUP BY job_key HAVING count(*) = 1) a`,
      ),
    ).toEqual([{ n: 2500 }]);
    expect(await sql(url, `SELECT count(*)::int AS n FROM attempts`)).toEqual([{ n: 2500 }]);
  }, 180_000);
});
