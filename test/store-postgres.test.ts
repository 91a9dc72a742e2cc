import { createServer, type AddressInfo } from 'node:net';
import pg from 'pg';
import { beforeEach, describe, expect, it } from 'vitest';
import { PostgresStore } from '../src/store/postgres/store.js';
import { parsePgUrl } from '../src/store/postgres/connect.js';
import { LATEST_VERSION, MIGRATIONS } from '../src/store/postgres/migrations.js';
import { openStore } from '../src/store/open-store.js';
import { StoreError } from '../src/errors.js';
import {
  OWNER,
  PG_URL,
  STORE_KINDS,
  T0,
  claimOpts,
  freshPgUrl,
  pgJobWrites,
  pgSchemaAtVersion,
  rows,
  skipUnavailable,
} from './helpers/stores.js';
import { docRow } from './helpers/populate.js';

// What only the PostgreSQL store has: schemas in the URL, migrations under an advisory lock,
// connection errors. The behaviour it shares with SQLite is in store-contract*.test.ts.

const postgres = STORE_KINDS.find((k) => k.name === 'postgres')!;

async function sql<T extends pg.QueryResultRow>(text: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    return (await client.query<T>(text, params)).rows;
  } finally {
    await client.end();
  }
}

describe('postgres store', () => {
  beforeEach((ctx) => skipUnavailable(postgres, ctx));

  it('creates the schema named in the URL and migrates it to the exact tables', async () => {
    const url = freshPgUrl();
    const schema = new URL(url).searchParams.get('schema')!;
    const store = await PostgresStore.open(url);
    expect(store.schema).toBe(schema);
    expect(store.kind).toBe('postgres');
    const tables = await sql<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1`,
      [schema],
    );
    expect(tables.map((t) => t.table_name)).toEqual([
      'attempts',
      'batches',
      'copying',
      'failure_counts',
      'item_counts',
      'items',
      'job_counts',
      'jobs',
      'lanes',
      'llmq_migrations',
      'rejections',
      'runs',
      'spend',
      'superseded',
    ]);
    const cols = async (table: string) =>
      (
        await sql<{ column_name: string }>(
          `SELECT column_name FROM information_schema.columns
      WHERE table_schema = $1 AND table_name = $2 ORDER BY ordinal_position`,
          [schema, table],
        )
      ).map((c) => c.column_name);
    expect(await cols('jobs')).toEqual([
      'seq',
      'key',
      'request',
      'model',
      'state',
      'priority',
      'attempts',
      'run_after',
      'lease_owner',
      'lease_expires_at',
      'output',
      'response',
      'prompt_tokens',
      'completion_tokens',
      'error',
      'created_at',
      'updated_at',
      'finished_at',
      'cost_usd',
      'latency_ms',
      'orphaned',
      'unsent_deaths',
    ]);
    expect(await cols('attempts')).toEqual([
      'id',
      'job_key',
      'run_id',
      'attempt',
      'started_at',
      'ended_at',
      'latency_ms',
      'status',
      'outcome',
      'error',
      'prompt_tokens',
      'completion_tokens',
      'cost_usd',
      'may_be_billed',
    ]);
    expect(await cols('spend')).toEqual([
      'run_id',
      'reserved_nanousd',
      'in_flight',
      'spent_nanousd',
      'unknown_nanousd',
      'unknown_tries',
      'unpriced_tries',
      'updated_at',
    ]);
    expect(await cols('items')).toEqual(['seq', 'id', 'source', 'job_key', 'meta', 'created_at', 'updated_at']);
    expect(await cols('runs')).toEqual([
      'seq',
      'id',
      'host',
      'pid',
      'started_at',
      'heartbeat_at',
      'ended_at',
      'exit_reason',
      'options',
      'stats',
      'clock_offset_ms',
      'unsent',
    ]);
    expect(await cols('batches')).toEqual([
      'id',
      'run_id',
      'base_url',
      'state',
      'provider_batch_id',
      'input_file_id',
      'provider_status',
      'jobs',
      'done',
      'failed',
      'requeued',
      'error',
      'created_at',
      'updated_at',
      'ended_at',
      'api_key_fingerprint',
      'api_key_hint',
      'provider_completed',
      'provider_failed',
    ]);
    expect(await cols('job_counts')).toEqual([
      'model',
      'state',
      'jobs',
      'retried',
      'prompt_tokens',
      'completion_tokens',
      'cost_usd',
      'unpriced_prompt',
      'unpriced_completion',
    ]);
    expect(await cols('failure_counts')).toEqual(['error', 'jobs']);
    expect(await cols('item_counts')).toEqual(['items']);
    const indexes = await sql<{ indexname: string }>(
      `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'jobs'
      ORDER BY 1`,
      [schema],
    );
    // no index serves counting any more: status reads the counts the triggers keep (and the few orphaned answers)
    expect(indexes.map((i) => i.indexname)).toEqual([
      'jobs_age',
      'jobs_claim',
      'jobs_claim_model',
      'jobs_key_key',
      'jobs_lease',
      'jobs_lease_expiry',
      'jobs_orphaned',
      'jobs_pkey',
    ]);
    const triggers = await sql<{ tgname: string }>(
      `SELECT tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
      JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT t.tgisinternal ORDER BY 1`,
      [schema],
    );
    expect(triggers.map((t) => t.tgname)).toEqual([
      'attempts_latency',
      'items_count_delete',
      'items_count_insert',
      'jobs_count_delete',
      'jobs_count_insert',
      'jobs_count_update',
    ]);
    await store.close();
    // reopening applies nothing new
    await (await PostgresStore.open(url)).close();
    expect(await sql(`SELECT version FROM "${schema}".llmq_migrations`)).toEqual(MIGRATIONS.map((m) => ({ version: m.version })));
  });

  it('compares job keys byte by byte (COLLATE "C"), also in a queue made before, which keeps its rows, foreign key and indexes', async () => {
    const url = freshPgUrl();
    const schema = new URL(url).searchParams.get('schema')!;
    const [a, b] = [docRow('a', 'first'), docRow('b', 'second')];
    // a queue as the llmq before stored it: two jobs, three items, an attempt
    await pgSchemaAtVersion(url, 7, async (client) => {
      await client.query(`INSERT INTO jobs (key, request, model, created_at, updated_at) VALUES ($1, $2, 'm', 1, 1), ($3, $4, 'm', 1, 1)`, [
        a.key,
        a.request,
        b.key,
        b.request,
      ]);
      await client.query(
        `INSERT INTO items (id, source, job_key, created_at, updated_at) VALUES ('a', 's', $1, 1, 1), ('b', 's', $2, 1, 1), ('c', 's', $1, 1, 1)`,
        [a.key, b.key],
      );
      await client.query(
        `INSERT INTO attempts (job_key, run_id, attempt, started_at, ended_at, latency_ms, outcome) VALUES ($1, 'r', 1, 1, 2, 1, 'retry')`,
        [b.key],
      );
    });
    const store = await PostgresStore.open(url);
    const collations = await sql(
      `SELECT table_name || '.' || column_name AS col, collation_name FROM information_schema.columns
       WHERE table_schema = $1 AND column_name IN ('key', 'job_key') ORDER BY 1`,
      [schema],
    );
    expect(collations).toEqual([
      { col: 'attempts.job_key', collation_name: 'C' },
      { col: 'items.job_key', collation_name: 'C' },
      { col: 'jobs.key', collation_name: 'C' },
      { col: 'superseded.key', collation_name: 'C' },
    ]);
    expect((await store.item('c'))!.job.key).toBe(a.key);
    expect((await store.item('b'))!.attempts).toHaveLength(1);
    expect(await store.enqueue([docRow('a', 'first'), docRow('d', 'second')], 2)).toMatchObject({ newJobs: 0, newItems: 1, unchanged: 1 });
    // the foreign key is back: an item of a job that does not exist is refused
    await expect(
      sql(`INSERT INTO "${schema}".items (id, source, job_key, created_at, updated_at) VALUES ('x', 's', 'nope', 1, 1)`),
    ).rejects.toThrow(/foreign key/);
    await store.close();
  });

  it("an answer writes its job's row once: the latency it stores is not written again by the attempts' trigger", async () => {
    const url = freshPgUrl();
    const store = await PostgresStore.open(url);
    await store.enqueue(rows(10), T0);
    await store.startRun({ id: OWNER, host: 'h', pid: 1, startedAt: T0, options: {} });
    const { jobs } = await store.claim(claimOpts());
    const usage = { promptTokens: 3, completionTokens: 2 };
    const attempt = (key: string, n: number) =>
      ({ key, runId: OWNER, attempt: 1, startedAt: T0, endedAt: T0 + 10 + n, status: 200, outcome: 'done', error: null, usage }) as const;
    await Promise.all(
      jobs.map((j, n) => store.complete(j.key, { owner: OWNER, output: 'ok', response: '{}', usage, attempt: attempt(j.key, n) })),
    );
    expect((await store.item('doc-0003'))!.job.latencyMs).toBe(13);
    await store.close();
    // each job: inserted, claimed, answered
    expect(await pgJobWrites(url, 10)).toEqual({ ins: 10, upd: 20 });
  });

  it('takes the schema from search_path too, and openStore dispatches on postgres://', async () => {
    const url = freshPgUrl().replace('schema=', 'search_path=');
    const store = await openStore(url);
    expect(store.kind).toBe('postgres');
    expect((store as PostgresStore).schema).toMatch(/^llmq_t_/);
    await store.close();
  });

  it('migrates once when several processes open a new schema together', async () => {
    const url = freshPgUrl();
    const stores = await Promise.all(Array.from({ length: 4 }, () => PostgresStore.open(url)));
    const schema = stores[0]!.schema;
    expect(await sql(`SELECT version FROM "${schema}".llmq_migrations`)).toEqual(MIGRATIONS.map((m) => ({ version: m.version })));
    await Promise.all(stores.map((s) => s.close()));
  });

  it('refuses a database written by a newer llmq', async () => {
    const url = freshPgUrl();
    const store = await PostgresStore.open(url);
    await sql(`INSERT INTO "${store.schema}".llmq_migrations VALUES ($1, 'future', 0)`, [LATEST_VERSION + 1]);
    await store.close();
    await expect(PostgresStore.open(url)).rejects.toThrow(/written by a newer llmq \(schema version \d+.*Upgrade llmq/);
  });

  it('refuses a schema whose tables llmq did not create', async () => {
    const url = freshPgUrl();
    const schema = new URL(url).searchParams.get('schema')!;
    await sql(`CREATE SCHEMA "${schema}"; CREATE TABLE "${schema}".jobs (id int)`);
    await expect(PostgresStore.open(url)).rejects.toThrow(/already has a table "jobs" that llmq did not create.*\?schema=/);
  });

  it('keeps startup options given in the URL next to its own search_path', async () => {
    const url = `${freshPgUrl()}&options=${encodeURIComponent('-c statement_timeout=4321')}`;
    const store = await PostgresStore.open(url);
    const r = await store.pool.query<{ t: string; p: string }>(`SELECT current_setting('statement_timeout') AS t, current_schema() AS p`);
    expect(r.rows[0]).toEqual({ t: '4321ms', p: store.schema });
    await store.close();
  });

  it('reads export pages with parallel plans off, and gives the connection back as it was, also to a reader that stops early', async () => {
    const store = await PostgresStore.open(freshPgUrl());
    await store.enqueue([docRow('a.txt', 'A'), docRow('b.txt', 'B')], 1);
    // every statement the pool's connections are given
    const sent: string[] = [];
    store.pool.on('acquire', (client) => {
      const marked = client as pg.PoolClient & { recorded?: boolean };
      if (marked.recorded) return;
      marked.recorded = true;
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as { query: unknown }).query = (...args: unknown[]) => {
        sent.push(typeof args[0] === 'string' ? args[0] : (args[0] as { text: string }).text);
        return query(...args);
      };
    });
    const ids: string[] = [];
    for await (const page of store.exportPages({})) ids.push(...page.map((r) => r.id));
    expect(ids).toEqual(['a.txt', 'b.txt']);
    for await (const _ of store.exportPages({})) break;
    const page = sent.findIndex((q) => q.includes('FROM items'));
    expect(sent.slice(0, page)).toEqual(['SET max_parallel_workers_per_gather = 0', 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY']);
    expect(sent.filter((q) => q.startsWith('RESET'))).toEqual([
      'RESET max_parallel_workers_per_gather',
      'RESET max_parallel_workers_per_gather',
    ]);
    const setting = await store.pool.query<{ w: string }>(`SELECT current_setting('max_parallel_workers_per_gather') AS w`);
    expect(setting.rows[0]!.w).not.toBe('0');
    await store.close();
  });

  it('says which database is missing', async () => {
    const url = new URL(PG_URL);
    url.pathname = '/llmq_no_such_database';
    await expect(PostgresStore.open(url.toString())).rejects.toThrow(
      /Cannot connect to PostgreSQL at .*llmq_no_such_database.*Check the database name/,
    );
  });

  it('says when what answers at the address is not PostgreSQL (it closes the connection at once)', async () => {
    const notPostgres = createServer((socket) => socket.end('HTTP/1.1 400 Bad Request\r\n\r\n'));
    await new Promise<void>((resolve) => notPostgres.listen(0, '127.0.0.1', resolve));
    try {
      const port = (notPostgres.address() as AddressInfo).port;
      await expect(PostgresStore.open(`postgres://llmq@127.0.0.1:${port}/test`)).rejects.toThrow(
        /Cannot connect to PostgreSQL at .*: the server there closed the connection at once .*Check that the host and port/,
      );
    } finally {
      notPostgres.close();
    }
  });

  it('refuses a parameter meant to name the schema that llmq does not read, and says what a too-long name is', () => {
    for (const url of [
      'postgres://u@h/db?shema=team_a',
      'postgres://u@h/db?currentSchema=team_a',
      'postgres://u@h/db?sslmode=disable&Schema=a',
    ]) {
      expect(() => parsePgUrl(url), url).toThrow(
        /has a parameter '(shema|currentSchema|Schema)', which llmq does not read: did you mean schema\?/,
      );
    }
    expect(parsePgUrl('postgres://u@h/db?schema=team_a&sslmode=disable&application_name=x').schema).toBe('team_a');
    expect(parsePgUrl('postgres://u@h/db?search_path=team_b').schema).toBe('team_b');
    expect(() => parsePgUrl(`postgres://u@h/db?schema=${'a'.repeat(64)}`)).toThrow(/at most 63 characters .*got 64/);
  });

  it('refuses a schema name that is not a plain identifier', async () => {
    await expect(PostgresStore.open(`${PG_URL}?schema=a;drop`)).rejects.toThrow(StoreError);
  });
});

describe('postgres store without a server', () => {
  it('names the URL without its password, and what to check', async () => {
    const error = await PostgresStore.open('postgres://bob:s3cret@127.0.0.1:1/test?schema=x').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(StoreError);
    const message = (error as Error).message;
    expect(message).toContain('postgres://bob:***@127.0.0.1:1/test');
    expect(message).toMatch(/Check that PostgreSQL is running and reachable/);
    expect(message).not.toContain('s3cret');
  });
});
