import { readFileSync } from 'node:fs';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { LATEST_VERSION, MIGRATIONS, rebuildJobs } from '../src/store/sqlite/migrations.js';
import { tempDir } from './helpers/tmp.js';
import { sqliteAtVersion } from './helpers/stores.js';

function columns(db: Database.Database, table: string): string[] {
  return (db.prepare(`PRAGMA table_info(${table})`).all() as Array<{ name: string }>).map((c) => c.name);
}

describe('sqlite schema', () => {
  it('migrates a blank database to the exact schema', async () => {
    const path = join(tempDir(), 'q.db');
    const store = new SqliteStore(path);
    const db = store.db;
    expect(db.pragma('journal_mode', { simple: true })).toBe('wal');
    const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all();
    expect(tables).toEqual([
      'attempts',
      'batches',
      'bulk_load',
      'copying',
      'failure_counts',
      'item_counts',
      'items',
      'job_counts',
      'job_requests',
      'jobs',
      'lanes',
      'llmq_migrations',
      'rejections',
      'runs',
      'spend',
      'superseded',
    ]);
    // docs/database.md names every table (what users query with sqlite3)
    const documented = readFileSync(new URL('../docs/database.md', import.meta.url), 'utf8');
    expect(tables.filter((t) => !documented.includes(`| \`${t}\` |`))).toEqual([]);
    expect(columns(db, 'jobs')).toEqual([
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
      'counts_kept',
      'orphaned',
      'unsent_deaths',
    ]);
    expect(columns(db, 'items')).toEqual(['seq', 'id', 'source', 'job_key', 'meta', 'created_at', 'updated_at']);
    expect(columns(db, 'attempts')).toEqual([
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
      'job_seq',
    ]);
    expect(columns(db, 'spend')).toEqual([
      'run_id',
      'reserved_nanousd',
      'in_flight',
      'spent_nanousd',
      'unknown_nanousd',
      'unknown_tries',
      'unpriced_tries',
      'updated_at',
    ]);
    expect(columns(db, 'runs')).toEqual([
      'id',
      'host',
      'pid',
      'started_at',
      'heartbeat_at',
      'ended_at',
      'exit_reason',
      'options',
      'stats',
      'unsent',
    ]);
    expect(columns(db, 'lanes')).toEqual(['base_url', 'model', 'rpm', 'tpm', 'source', 'learned_at']);
    expect(columns(db, 'batches')).toEqual([
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
    const indexes = db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND name NOT LIKE 'sqlite_%' ORDER BY name")
      .pluck()
      .all();
    expect(columns(db, 'job_counts')).toEqual([
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
    expect(columns(db, 'failure_counts')).toEqual(['error', 'jobs']);
    expect(columns(db, 'item_counts')).toEqual(['items']);
    // no index serves counting any more (jobs_usage, jobs_retrying went in status_counts): status reads the counts triggers keep
    expect(indexes).toEqual([
      'attempts_by_job',
      'attempts_by_key',
      'batches_open',
      'failure_counts_top',
      'items_job',
      'jobs_age',
      'jobs_claim',
      'jobs_claim_model',
      'jobs_key',
      'jobs_lease',
      'jobs_orphaned',
      'runs_open',
      'superseded_by',
    ]);
    // jobs.key is unique by a named index (a bulk load drops and rebuilds it), not by an inline constraint
    expect(db.prepare("SELECT sql FROM sqlite_master WHERE name = 'jobs_key'").pluck().get()).toBe(
      'CREATE UNIQUE INDEX jobs_key ON jobs (key)',
    );
    expect(db.prepare("SELECT count(*) FROM sqlite_master WHERE tbl_name = 'jobs' AND name LIKE 'sqlite_autoindex%'").pluck().get()).toBe(
      0,
    );
    const triggers = db.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name").pluck().all();
    expect(triggers).toEqual([
      'attempts_latency',
      'items_count_delete',
      'items_count_insert',
      'jobs_count_delete',
      'jobs_count_insert',
      'jobs_count_update',
      'jobs_failure_delete',
      'jobs_failure_insert',
      'jobs_failure_update',
      'jobs_request_delete',
    ]);
    expect(db.prepare('SELECT version FROM llmq_migrations').pluck().all()).toEqual(MIGRATIONS.map((m) => m.version));
    await store.close();
    // reopening applies nothing new
    const again = new SqliteStore(path);
    expect(again.db.prepare('SELECT count(*) FROM llmq_migrations').pluck().get()).toBe(MIGRATIONS.length);
    await again.close();
  });

  const keyIndexes = (db: Database.Database) =>
    db.prepare("SELECT name FROM sqlite_master WHERE tbl_name = 'jobs' AND name IN ('jobs_key', 'sqlite_autoindex_jobs_1')").pluck().all();

  it('upgrades an empty v6 queue to jobs whose key is unique by the named index jobs_key', async () => {
    const store = new SqliteStore(sqliteAtVersion(6, ''));
    expect(store.db.prepare('SELECT max(version) FROM llmq_migrations').pluck().get()).toBe(LATEST_VERSION);
    expect(keyIndexes(store.db)).toEqual(['jobs_key']);
    expect(store.db.prepare("SELECT count(*) FROM sqlite_master WHERE tbl_name = 'jobs' AND type = 'trigger'").pluck().get()).toBe(7);
    await store.close();
  });

  it('upgrades a v6 queue with jobs without copying them: rows, counts, key constraint and foreign keys as they were', async () => {
    // seq with a gap, every state, a lease, an answer with cost, a failure
    const path = sqliteAtVersion(
      6,
      `INSERT INTO jobs (seq, key, request, model, state, attempts, lease_owner, lease_expires_at, output, prompt_tokens,
        completion_tokens, cost_usd, error, created_at, updated_at) VALUES
      (1, 'k1', '{"a":1}', 'm1', 'pending', 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 1, 1),
      (3, 'k3', '{"a":3}', 'm1', 'running', 1, 'run-a', 99, NULL, NULL, NULL, NULL, NULL, 2, 2),
      (4, 'k4', '{"a":4}', 'm2', 'done', 1, NULL, NULL, 'hi', 10, 5, 0.5, NULL, 3, 3),
      (7, 'k7', '{"a":7}', 'm2', 'failed', 3, NULL, NULL, NULL, NULL, NULL, NULL, 'HTTP 400', 4, 4);
      INSERT INTO items (id, source, job_key, created_at, updated_at) VALUES ('a', 's', 'k1', 1, 1), ('b', 's', 'k4', 1, 1), ('c', 's', 'k4', 1, 1);`,
    );
    const raw = new Database(path, { readonly: true });
    const read = (db: Database.Database) => ({
      jobs: db.prepare('SELECT * FROM jobs ORDER BY seq').all(),
      items: db.prepare('SELECT * FROM items ORDER BY seq').all(),
      counts: db.prepare('SELECT * FROM job_counts ORDER BY model, state').all(),
      failures: db.prepare('SELECT * FROM failure_counts').all(),
    });
    const before = read(raw);
    raw.close();

    const store = new SqliteStore(path);
    const db = store.db;
    expect(db.prepare('SELECT max(version) FROM llmq_migrations').pluck().get()).toBe(LATEST_VERSION);
    // migration 7 adds latency_ms, NULL for jobs tried before it; migration 12 counts_kept, 0; migration 15
    // orphaned, 1 for the jobs no item points at (k3, k7); migration 19 unsent_deaths, 0
    expect(read(db)).toEqual({
      ...before,
      jobs: before.jobs.map((j) => ({
        ...(j as object),
        latency_ms: null,
        counts_kept: 0,
        orphaned: ['k3', 'k7'].includes((j as { key: string }).key) ? 1 : 0,
        unsent_deaths: 0,
      })),
    });
    expect(keyIndexes(db)).toEqual(['sqlite_autoindex_jobs_1']);
    expect(db.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(db.pragma('foreign_key_check')).toEqual([]);
    expect(() => db.exec(`INSERT INTO jobs (key, request, model, created_at, updated_at) VALUES ('k1', '{}', 'm1', 5, 5)`)).toThrow(
      /UNIQUE/,
    );
    expect(() => db.exec(`INSERT INTO items (id, source, job_key, created_at, updated_at) VALUES ('z', 's', 'nope', 5, 5)`)).toThrow(
      /FOREIGN KEY/,
    );
    const r = await store.enqueue([{ itemId: 'd', source: 's', key: 'k9', request: '{"a":9}', model: 'm1', priority: 0, meta: null }], 10);
    expect(r).toMatchObject({ newJobs: 1, newItems: 1 });
    const status = await store.status();
    expect(status.counts).toEqual({ pending: 2, running: 1, done: 1, failed: 1 });
    expect(status.items).toBe(4);
    await store.close();
  });

  it('rebuilds jobs (what a bulk load does to an old empty queue) exactly as the migrations leave it', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    const db = store.db;
    const shape = () => ({
      columns: db.prepare('PRAGMA table_xinfo(jobs)').all(),
      indexes: (
        db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name").all() as Array<{
          name: string;
          sql: string;
        }>
      ).map((i) => ({ ...i, sql: i.sql.replace(/\s+/g, ' ') })),
      triggers: db.prepare("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'trigger' ORDER BY name").all(),
    });
    const before = shape();
    db.pragma('foreign_keys = OFF');
    rebuildJobs(db);
    db.pragma('foreign_keys = ON');
    expect(shape()).toEqual(before);
    // and the rebuilt table still keeps latencies and counts
    await store.enqueue([{ itemId: 'a', source: 'a.txt', meta: null, key: 'k1', request: '{}', model: 'm', priority: 0 }], 1);
    db.prepare(
      "INSERT INTO attempts (job_key, run_id, attempt, started_at, ended_at, latency_ms, status, outcome, job_seq) VALUES ('k1', 'r', 1, 1, 2, 42, 200, 'done', (SELECT seq FROM jobs WHERE key = 'k1'))",
    ).run();
    expect(db.prepare("SELECT latency_ms FROM jobs WHERE key = 'k1'").pluck().get()).toBe(42);
    expect((await store.status()).counts.pending).toBe(1);
    await store.close();
  });

  it('refuses a database written by a newer llmq', async () => {
    const path = join(tempDir(), 'q.db');
    await new SqliteStore(path).close();
    const raw = new Database(path);
    raw.prepare('INSERT INTO llmq_migrations VALUES (?, ?, ?)').run(LATEST_VERSION + 1, 'future', Date.now());
    raw.close();
    expect(() => new SqliteStore(path)).toThrow(/written by a newer llmq.*Upgrade llmq/);
  });

  it('refuses an SQLite file that is not an llmq database', () => {
    const path = join(tempDir(), 'other.db');
    const raw = new Database(path);
    raw.exec('CREATE TABLE customers (id INTEGER)');
    raw.close();
    expect(() => new SqliteStore(path)).toThrow(/not an llmq one.*customers/);
    // and nothing was written into it
    const after = new Database(path);
    expect(after.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all()).toEqual(['customers']);
    after.close();
  });
});
