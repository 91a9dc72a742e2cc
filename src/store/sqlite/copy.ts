import type { Db } from './open.js';
import { toJob, toRun } from '../rows.js';
import type { AttemptRow, ItemRow, JobRow, RunRow } from '../types.js';

const PAGE = 1000;

/**
 * Whole-table reads and writes for `llmq copy`. Reads page by the table's own order key (keyset, so
 * a page never rescans what came before); each load is one transaction for its batch.
 */
export class SqliteCopier {
  readonly #db: Db;
  constructor(db: Db) {
    this.#db = db;
  }

  async *dumpJobs(): AsyncIterable<JobRow> {
    for await (const r of this.#pages('SELECT * FROM jobs WHERE seq > ? ORDER BY seq LIMIT ?', 'seq')) yield toJob(r as never);
  }

  async *dumpItems(): AsyncIterable<ItemRow> {
    for await (const r of this.#pages('SELECT * FROM items WHERE seq > ? ORDER BY seq LIMIT ?', 'seq')) {
      const i = r as { id: string; source: string; job_key: string; meta: string | null; created_at: number; updated_at: number };
      yield { id: i.id, source: i.source, jobKey: i.job_key, meta: i.meta ? JSON.parse(i.meta) : null, createdAt: i.created_at, updatedAt: i.updated_at };
    }
  }

  async *dumpAttempts(): AsyncIterable<AttemptRow> {
    for await (const r of this.#pages('SELECT * FROM attempts WHERE id > ? ORDER BY id LIMIT ?', 'id')) {
      const a = r as {
        job_key: string; run_id: string; attempt: number; started_at: number; ended_at: number; latency_ms: number;
        status: number | null; outcome: AttemptRow['outcome']; error: string | null; prompt_tokens: number | null; completion_tokens: number | null;
      };
      yield {
        key: a.job_key, runId: a.run_id, attempt: a.attempt, startedAt: a.started_at, endedAt: a.ended_at, latencyMs: a.latency_ms,
        status: a.status, outcome: a.outcome, error: a.error,
        usage: a.prompt_tokens === null ? null : { promptTokens: a.prompt_tokens, completionTokens: a.completion_tokens ?? 0 },
      };
    }
  }

  async *dumpRuns(): AsyncIterable<RunRow> {
    // runs has no sequence; rowid is its insertion order.
    for await (const r of this.#pages('SELECT rowid AS _seq, * FROM runs WHERE rowid > ? ORDER BY rowid LIMIT ?', '_seq')) yield toRun(r as never);
  }

  loadJobs(rows: readonly JobRow[]): void {
    const insert = this.#db.prepare(`INSERT INTO jobs (key, request, model, state, priority, attempts, run_after, lease_owner,
        lease_expires_at, output, response, prompt_tokens, completion_tokens, error, created_at, updated_at, finished_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    this.#db.transaction(() => {
      for (const j of rows) {
        insert.run(j.key, j.request, j.model, j.state, j.priority, j.attempts, j.runAfter, j.leaseOwner, j.leaseExpiresAt,
          j.output, j.response, j.usage?.promptTokens ?? null, j.usage?.completionTokens ?? null, j.error, j.createdAt,
          j.updatedAt, j.finishedAt);
      }
    }).immediate();
  }

  loadItems(rows: readonly ItemRow[]): void {
    const insert = this.#db.prepare('INSERT INTO items (id, source, job_key, meta, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)');
    this.#db.transaction(() => {
      for (const i of rows) insert.run(i.id, i.source, i.jobKey, i.meta ? JSON.stringify(i.meta) : null, i.createdAt, i.updatedAt);
    }).immediate();
  }

  loadAttempts(rows: readonly AttemptRow[]): void {
    const insert = this.#db.prepare(`INSERT INTO attempts (job_key, run_id, attempt, started_at, ended_at, latency_ms, status,
        outcome, error, prompt_tokens, completion_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    this.#db.transaction(() => {
      for (const a of rows) {
        insert.run(a.key, a.runId, a.attempt, a.startedAt, a.endedAt, a.latencyMs, a.status, a.outcome, a.error,
          a.usage?.promptTokens ?? null, a.usage?.completionTokens ?? null);
      }
    }).immediate();
  }

  loadRuns(rows: readonly RunRow[]): void {
    const insert = this.#db.prepare(`INSERT INTO runs (id, host, pid, started_at, heartbeat_at, ended_at, exit_reason, options, stats)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    this.#db.transaction(() => {
      for (const r of rows) {
        insert.run(r.id, r.host, r.pid, r.startedAt, r.heartbeatAt, r.endedAt, r.exitReason, JSON.stringify(r.options),
          r.stats ? JSON.stringify(r.stats) : null);
      }
    }).immediate();
  }

  /** One page per query, each its own implicit transaction, so a long copy never holds a read lock. */
  async *#pages(sql: string, orderKey: string): AsyncIterable<Record<string, unknown>> {
    const page = this.#db.prepare(sql);
    let after = 0;
    for (;;) {
      const rows = page.all(after, PAGE) as Array<Record<string, unknown>>;
      yield* rows;
      if (rows.length < PAGE) return;
      after = rows[rows.length - 1]![orderKey] as number;
    }
  }
}
