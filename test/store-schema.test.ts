import Database from 'better-sqlite3';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { LATEST_VERSION, MIGRATIONS } from '../src/store/sqlite/migrations.js';
import { tempDir } from './helpers/tmp.js';

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
      'failure_counts',
      'item_counts',
      'items',
      'job_counts',
      'jobs',
      'lanes',
      'llmq_migrations',
      'runs',
      'spend',
    ]);
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
    expect(columns(db, 'runs')).toEqual(['id', 'host', 'pid', 'started_at', 'heartbeat_at', 'ended_at', 'exit_reason', 'options', 'stats']);
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
      'attempts_job',
      'batches_open',
      'failure_counts_top',
      'items_job',
      'jobs_age',
      'jobs_claim',
      'jobs_claim_model',
      'jobs_lease',
      'runs_open',
    ]);
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
    ]);
    expect(db.prepare('SELECT version FROM llmq_migrations').pluck().all()).toEqual(MIGRATIONS.map((m) => m.version));
    await store.close();
    // reopening applies nothing new
    const again = new SqliteStore(path);
    expect(again.db.prepare('SELECT count(*) FROM llmq_migrations').pluck().get()).toBe(MIGRATIONS.length);
    await again.close();
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
