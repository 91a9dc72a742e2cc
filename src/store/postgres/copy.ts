import { pgText } from './pg-text.js';
import type pg from 'pg';
import type { AttemptRow, CopyInProgress, DroppedCost, ItemRow, JobRow, QueueCopier, RunRow } from '../types.js';
import { DROPPED } from '../tally.js';
import { query } from './connect.js';
import {
  ATTEMPT_COLUMNS,
  attemptValues,
  toAttempt,
  toItem,
  toJob,
  toRun,
  type RawAttempt,
  type RawItem,
  type RawJob,
  type RawRun,
} from '../rows.js';
import { keysetPages } from '../pages.js';
import { nanoUp, SPEND_COLUMNS, spendOfJoined } from '../spend-amounts.js';

const PAGE = 1000;

/**
 * Whole-table reads and writes for `llmq copy`. Reads page by each table's sequence (keyset, one
 * short query per page); each load is one multi-row INSERT from arrays, so one round trip per batch.
 */
export class PgCopier implements QueueCopier {
  readonly #pool: pg.Pool;
  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async *dumpJobs(): AsyncIterable<JobRow> {
    for await (const r of this.#pages<RawJob & { seq: number }>('jobs', 'seq')) yield toJob(r);
  }

  async *dumpItems(): AsyncIterable<ItemRow> {
    for await (const i of this.#pages<RawItem & { seq: number }>('items', 'seq')) yield toItem(i);
  }

  async *dumpAttempts(): AsyncIterable<AttemptRow> {
    for await (const r of this.#pages<RawAttempt & { id: number }>('attempts', 'id')) yield toAttempt(r);
  }

  async *dumpRuns(): AsyncIterable<RunRow> {
    const from = `(SELECT r.*, ${SPEND_COLUMNS} FROM runs r LEFT JOIN spend s ON s.run_id = r.id) runs`;
    for await (const r of this.#pages<RawRun & { seq: number }>(from, 'seq')) yield { ...toRun(r), spend: spendOfJoined(r) };
  }

  async loadJobs(rows: readonly JobRow[]): Promise<void> {
    if (!rows.length) return;
    const col = <T>(f: (j: JobRow) => T) => rows.map(f);
    await query(
      this.#pool,
      `INSERT INTO jobs (key, request, model, state, priority, attempts, run_after, lease_owner,
        lease_expires_at, output, response, prompt_tokens, completion_tokens, error, created_at, updated_at, finished_at, cost_usd, latency_ms)
      SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[], $7::bigint[], $8::text[],
        $9::bigint[], $10::text[], $11::text[], $12::int[], $13::int[], $14::text[], $15::bigint[], $16::bigint[], $17::bigint[],
        $18::float8[], $19::bigint[])`,
      [
        col((j) => j.key),
        col((j) => j.request),
        col((j) => j.model),
        col((j) => j.state),
        col((j) => j.priority),
        col((j) => j.attempts),
        col((j) => j.runAfter),
        col((j) => j.leaseOwner),
        col((j) => j.leaseExpiresAt),
        col((j) => pgText(j.output)),
        col((j) => pgText(j.response)),
        col((j) => j.usage?.promptTokens ?? null),
        col((j) => j.usage?.completionTokens ?? null),
        col((j) => pgText(j.error)),
        col((j) => j.createdAt),
        col((j) => j.updatedAt),
        col((j) => j.finishedAt),
        col((j) => j.costUsd ?? null),
        col((j) => j.latencyMs ?? null),
      ],
    );
  }

  async loadItems(rows: readonly ItemRow[]): Promise<void> {
    if (!rows.length) return;
    await query(
      this.#pool,
      `INSERT INTO items (id, source, job_key, meta, created_at, updated_at)
      SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[])`,
      [
        // an id of a SQLite queue enqueued before ids with NUL were refused (jsonl.ts)
        rows.map((i) => pgText(i.id)),
        rows.map((i) => i.source),
        rows.map((i) => i.jobKey),
        rows.map((i) => (i.meta ? JSON.stringify(i.meta) : null)),
        rows.map((i) => i.createdAt),
        rows.map((i) => i.updatedAt),
      ],
    );
  }

  async dumpSuperseded(): Promise<Array<{ key: string; byKey: string }>> {
    return (await query<{ key: string; byKey: string }>(this.#pool, 'SELECT key, by_key AS "byKey" FROM superseded ORDER BY key')).rows;
  }

  async loadSuperseded(rows: ReadonlyArray<{ readonly key: string; readonly byKey: string }>): Promise<void> {
    if (!rows.length) return;
    await query(
      this.#pool,
      `INSERT INTO superseded (key, by_key) SELECT * FROM unnest($1::text[], $2::text[])
      ON CONFLICT (key) DO UPDATE SET by_key = EXCLUDED.by_key`,
      [rows.map((r) => r.key), rows.map((r) => r.byKey)],
    );
  }

  async dumpDroppedCosts(): Promise<DroppedCost[]> {
    const rows = await query<{ model: string; jobs: string; usd: number }>(
      this.#pool,
      `SELECT model, sum(jobs) AS jobs, sum(cost_usd) AS usd FROM job_counts WHERE state = '${DROPPED}' GROUP BY model ORDER BY model`,
    );
    return rows.rows.map((r) => ({ model: r.model, jobs: Number(r.jobs), usd: Number(r.usd) }));
  }

  async loadDroppedCosts(rows: readonly DroppedCost[]): Promise<void> {
    if (!rows.length) return;
    await query(
      this.#pool,
      `INSERT INTO job_counts SELECT model, '${DROPPED}', jobs, 0, 0, 0, usd, 0, 0
      FROM unnest($1::text[], $2::bigint[], $3::double precision[]) AS d (model, jobs, usd)`,
      [rows.map((r) => r.model), rows.map((r) => r.jobs), rows.map((r) => r.usd)],
    );
  }

  async markOrphans(): Promise<void> {
    await query(this.#pool, 'UPDATE jobs j SET orphaned = true WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.job_key = j.key)');
  }

  async beginCopy(source: string, now: number): Promise<void> {
    // a copy that stopped before any row went in left its mark on an empty queue: this one takes its place
    await query(this.#pool, 'WITH gone AS (DELETE FROM copying) INSERT INTO copying (source, started_at) VALUES ($1, $2)', [source, now]);
  }

  async endCopy(): Promise<void> {
    await query(this.#pool, 'DELETE FROM copying');
  }

  async copyInProgress(): Promise<CopyInProgress | null> {
    const r = await query<{ source: string; started_at: number }>(this.#pool, 'SELECT source, started_at FROM copying LIMIT 1');
    const row = r.rows[0];
    return row ? { source: row.source, startedAt: Number(row.started_at) } : null;
  }

  async loadAttempts(rows: readonly AttemptRow[]): Promise<void> {
    if (!rows.length) return;
    const values = rows.map((a) => attemptValues({ ...a, error: pgText(a.error) }, a.latencyMs, (billed) => billed));
    await query(
      this.#pool,
      `INSERT INTO attempts (${ATTEMPT_COLUMNS})
      SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[], $7::int[], $8::text[],
        $9::text[], $10::int[], $11::int[], $12::float8[], $13::bool[])`,
      // one array per column
      values[0]!.map((_, k) => values.map((v) => v[k])),
    );
  }

  async loadRuns(rows: readonly RunRow[]): Promise<void> {
    if (!rows.length) return;
    await query(
      this.#pool,
      `INSERT INTO runs (id, host, pid, started_at, heartbeat_at, ended_at, exit_reason, options, stats)
      SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[], $7::text[], $8::text[], $9::text[])`,
      [
        rows.map((r) => r.id),
        rows.map((r) => r.host),
        rows.map((r) => r.pid),
        rows.map((r) => r.startedAt),
        rows.map((r) => r.heartbeatAt),
        rows.map((r) => r.endedAt),
        rows.map((r) => r.exitReason),
        rows.map((r) => JSON.stringify(r.options)),
        rows.map((r) => (r.stats ? JSON.stringify(r.stats) : null)),
      ],
    );
    const spent = rows.filter((r) => r.spend);
    if (!spent.length) return;
    const m = (f: (r: RunRow) => number) => spent.map(f);
    await query(
      this.#pool,
      `INSERT INTO spend (run_id, reserved_nanousd, in_flight, spent_nanousd, unknown_nanousd, unknown_tries,
        unpriced_tries, updated_at)
      SELECT * FROM unnest($1::text[], $2::bigint[], $3::int[], $4::bigint[], $5::bigint[], $6::int[], $7::int[], $8::bigint[])`,
      [
        spent.map((r) => r.id),
        m((r) => nanoUp(r.spend!.reservedUsd)),
        m((r) => r.spend!.inFlight),
        m((r) => nanoUp(r.spend!.spentUsd)),
        m((r) => nanoUp(r.spend!.mayBeBilledUsd)),
        m((r) => r.spend!.mayBeBilledTries),
        m((r) => r.spend!.unpricedTries),
        m((r) => r.heartbeatAt),
      ],
    );
  }

  #pages<R extends pg.QueryResultRow>(table: string, orderKey: keyof R & string): AsyncIterable<R> {
    const sql = (size: number) => `SELECT * FROM ${table} WHERE ${orderKey} > $1 ORDER BY ${orderKey} LIMIT ${size}`;
    return keysetPages(async (after, size) => (await query<R>(this.#pool, sql(size), [after])).rows, orderKey, PAGE);
  }
}
