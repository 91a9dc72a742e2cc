import { COUNTS_COLUMNS, tallyJobs, type StateTokensRow } from '../tally.js';
import { SPEND_COLUMNS, spendOfJoined } from '../spend-amounts.js';
import type pg from 'pg';
import type {
  AnsweredJob,
  ExportFilter,
  ItemSeqSpan,
  ExportRow,
  FailedItemRow,
  KeyItemRow,
  ItemDetail,
  JobToRun,
  LaneLimitRow,
  RunRow,
  StatusSnapshot,
} from '../types.js';
import { inClaimOrder, JOBS_PAGE, type RawJobToRun } from '../claim-order.js';
import {
  exportColumns,
  LANES_SQL,
  toAttempt,
  toExportRow,
  toJob,
  toLane,
  toRun,
  type RawAttempt,
  type RawExport,
  type RawJob,
  type RawLane,
  type RawRun,
} from '../rows.js';
import { inTransaction, query } from './connect.js';
import { foldCounts } from './counts.js';

const EXPORT_PAGE = 1000;

/** The reads of `llmq show`: each one row (or one job's attempts) found through an index, however big the queue. */
export const ITEM_SQL = Object.freeze({
  item: 'SELECT * FROM items WHERE id = $1',
  job: 'SELECT * FROM jobs WHERE key = $1',
  attempts: 'SELECT * FROM attempts WHERE job_key = $1 ORDER BY id',
});
// One consistent view across the several reads of status/item, and no locks taken.
const SNAPSHOT = 'BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY';

/** The read side of the PostgreSQL store: status, one item, and the export stream. */
/**
 * The first entry of jobs_age (state, created_at). A bulk load (bulk-load.ts) holds `jobs`
 * exclusively until it commits, and what it loads is invisible until then anyway: rather than wait
 * minutes for the load, status shows the queue as committed (no oldest pending job).
 */
async function oldestPending(db: pg.PoolClient): Promise<number | null> {
  await db.query(`SAVEPOINT oldest; SET LOCAL lock_timeout = '${LOCK_WAIT_MS}ms'`);
  try {
    const v = (await db.query(`SELECT min(created_at) AS v FROM jobs WHERE state = 'pending'`)).rows[0]!.v as number | null;
    await db.query('RELEASE SAVEPOINT oldest; SET LOCAL lock_timeout = DEFAULT');
    return v;
  } catch (error) {
    if ((error as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw error;
    await db.query('ROLLBACK TO SAVEPOINT oldest');
    return null;
  }
}

const LOCK_WAIT_MS = 500;
const LOCK_NOT_AVAILABLE = '55P03';

export class PgReader {
  readonly #pool: pg.Pool;
  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  /**
   * Every figure comes from the counts the migration `status_counts` keeps, or walks an index to its
   * first entry, so this costs the same at any queue size. It folds those counts first when it may write.
   */
  async status(): Promise<StatusSnapshot> {
    await foldCounts(this.#pool);
    return inTransaction(
      this.#pool,
      async (db) => {
        // COLLATE "C" orders like SQLite (by bytes), whatever the database's locale.
        const rows = (
          await db.query<StateTokensRow>(`SELECT ${COUNTS_COLUMNS} FROM job_counts GROUP BY model, state ORDER BY model COLLATE "C", state`)
        ).rows;
        const one = async <T>(sql: string): Promise<T> => (await db.query(sql)).rows[0]!.v as T;
        const items = await one<number>('SELECT coalesce(sum(items), 0)::bigint AS v FROM item_counts');
        const failures = (
          await db.query<{ error: string; count: number }>(`SELECT error, sum(jobs)::bigint AS count FROM failure_counts
          GROUP BY error HAVING sum(jobs) > 0 ORDER BY 2 DESC, error COLLATE "C" LIMIT 10`)
        ).rows;
        const oldestPendingAt = await oldestPending(db);
        const activeRuns = (await db.query<RawRun>(ACTIVE_RUNS)).rows.map(toRun);
        // the last run that sent something: one that found nothing to do would hide it
        const last = (
          await db.query<RawRun>(`SELECT * FROM runs
          ORDER BY (ended_at IS NULL OR coalesce((stats::jsonb ->> 'requests')::bigint, 0) > 0) DESC, started_at DESC, seq DESC LIMIT 1`)
        ).rows[0];
        const lanes = (await db.query<RawLane>(LANES_SQL)).rows.map(toLane);
        const spend = (
          await db.query<RawRun & Record<string, unknown>>(`SELECT r.*, ${SPEND_COLUMNS} FROM runs r
          JOIN spend s ON s.run_id = r.id ORDER BY r.started_at DESC, r.seq DESC`)
        ).rows.map((r) => ({ ...toRun(r), spend: spendOfJoined(r)! }));
        return {
          ...tallyJobs(rows),
          items,
          failures,
          oldestPendingAt,
          activeRuns,
          lastRun: last ? toRun(last) : null,
          lanes,
          spend,
        };
      },
      SNAPSHOT,
    );
  }

  async laneLimits(): Promise<LaneLimitRow[]> {
    return (await query<RawLane>(this.#pool, LANES_SQL)).rows.map(toLane);
  }

  async activeRuns(): Promise<RunRow[]> {
    return (await query<RawRun>(this.#pool, ACTIVE_RUNS)).rows.map(toRun);
  }

  async failedItems(error: string, limit: number): Promise<FailedItemRow[]> {
    return (
      await query<FailedItemRow>(
        this.#pool,
        `SELECT i.id, i.source, j.key, j.attempts FROM jobs j JOIN items i ON i.job_key = j.key
      WHERE j.state = 'failed' AND coalesce(j.error, 'unknown error') = $1 ORDER BY j.created_at, j.seq, i.seq LIMIT $2`,
        [error, limit],
      )
    ).rows;
  }

  async itemsByKeyPrefix(prefix: string, limit: number, afterKey = ''): Promise<KeyItemRow[]> {
    // hex keys: every key that starts with the prefix sorts below the prefix followed by 'g'
    return (
      await query<KeyItemRow>(
        this.#pool,
        `SELECT job_key AS key, id AS "itemId" FROM items WHERE job_key >= $1 AND job_key > $2 AND job_key < $3 ORDER BY job_key, seq LIMIT $4`,
        [prefix, afterKey, `${prefix}g`, limit],
      )
    ).rows;
  }

  item(id: string): Promise<ItemDetail | null> {
    return inTransaction(
      this.#pool,
      async (db) => {
        const item = (await db.query<{ id: string; source: string; job_key: string; meta: string | null }>(ITEM_SQL.item, [id])).rows[0];
        if (!item) return null;
        const job = (await db.query<RawJob>(ITEM_SQL.job, [item.job_key])).rows[0]!;
        const attempts = (await db.query<RawAttempt>(ITEM_SQL.attempts, [item.job_key])).rows.map(toAttempt);
        return { id: item.id, source: item.source, meta: item.meta ? JSON.parse(item.meta) : null, job: toJob(job), attempts };
      },
      SNAPSHOT,
    );
  }

  /**
   * Items in input order, a page at a time (keyset on seq), so a million rows never sit in memory;
   * the next page is asked for as soon as the last one's end is known, so the database works on it
   * while this one is written. The pages run on one connection with parallel plans off: costing the
   * scan to the end of the table, the planner chose a parallel plan for some column sets (the
   * response without the latency, what openai-batch reads) and started workers for each page of
   * 1,000 rows, which made that export 2.5 times slower than the others.
   */
  async *exportPages(filter: ExportFilter): AsyncIterable<readonly ExportRow[]> {
    const states = filter.states?.length ? [...filter.states] : null;
    const sql = `SELECT ${exportColumns(filter)}
      FROM items i
      -- LATERAL: walk items in seq order and look each job up by key, stopping at the page size,
      -- rather than joining the whole jobs table for every page
      CROSS JOIN LATERAL (SELECT * FROM jobs WHERE jobs.key = i.job_key
        AND ($2::text[] IS NULL OR jobs.state = ANY($2::text[]))) j
      WHERE i.seq > $1 ${filter.items ? 'AND i.seq <= $3' : ''} ORDER BY i.seq LIMIT ${EXPORT_PAGE}`;
    const client = await this.#pool.connect();
    let failed: unknown = null;
    let next: Promise<RawExport[]> | null = null;
    try {
      await client.query('SET max_parallel_workers_per_gather = 0');
      // No upper bound unless asked: with one the planner, costing the whole range, joined all of jobs for each page (15 times slower).
      const params = (after: number) => (filter.items ? [after, states, filter.items.upToSeq] : [after, states]);
      const fetch = async (after: number) => (await client.query<RawExport>(sql, params(after))).rows;
      next = fetch(filter.items?.afterSeq ?? 0);
      while (next) {
        const rows: RawExport[] = await next;
        next = rows.length < EXPORT_PAGE ? null : fetch(Number(rows[rows.length - 1]!.seq));
        // a reader that stops early leaves the prefetch behind: its failure is nobody's to hear
        next?.catch(() => {});
        yield rows.map(toExportRow);
      }
    } catch (error) {
      failed = error;
      throw error;
    } finally {
      // not before the prefetch is back: the caller closes the pool next
      await next?.catch(() => {});
      // the connection goes back to the pool as it came, or is dropped when that cannot be done
      if (!failed) await client.query('RESET max_parallel_workers_per_gather').catch((error: unknown) => (failed = error));
      client.release(failed ? (failed as Error) : undefined);
    }
  }

  async itemSeqSpan(): Promise<ItemSeqSpan | null> {
    const span = (
      await query<{ first: string | null; last: string | null }>(
        this.#pool,
        'SELECT (SELECT min(seq) FROM items) AS first, (SELECT max(seq) FROM items) AS last',
      )
    ).rows[0]!;
    return span.first === null || span.last === null ? null : { first: Number(span.first), last: Number(span.last) };
  }

  async *jobsToRun(now: number): AsyncIterable<JobToRun> {
    const cols = 'seq, key, model, request, priority, attempts';
    const expired = (
      await query<RawJobToRun>(this.#pool, `SELECT ${cols} FROM jobs WHERE state = 'running' AND lease_expires_at < $1`, [now])
    ).rows;
    yield* inClaimOrder(
      expired,
      async (after) =>
        (after
          ? await query<RawJobToRun>(
              this.#pool,
              `SELECT ${cols} FROM jobs WHERE state = 'pending' AND (priority, seq) > ($1, $2)
          ORDER BY priority, seq LIMIT ${JOBS_PAGE}`,
              [after.priority, after.seq],
            )
          : await query<RawJobToRun>(
              this.#pool,
              `SELECT ${cols} FROM jobs WHERE state = 'pending' ORDER BY priority, seq LIMIT ${JOBS_PAGE}`,
            )
        ).rows,
    );
  }

  /** Newest first in jobs_age's order (state, created_at), so the walk stops at the limit instead of sorting every done job. */
  async answered(model: string, o: { limit: number; withRequest: boolean }): Promise<AnsweredJob[]> {
    const rows = (
      await query<{ prompt_tokens: number; completion_tokens: number; request: string | null; latency_ms: number | null }>(
        this.#pool,
        `SELECT j.prompt_tokens, j.completion_tokens, ${o.withRequest ? 'j.request' : 'NULL AS request'},
        (SELECT latency_ms FROM attempts a WHERE a.job_key = j.key AND a.outcome = 'done' ORDER BY a.id DESC LIMIT 1) AS latency_ms
      FROM jobs j WHERE j.model = $1 AND j.state = 'done' ORDER BY j.created_at DESC, j.seq DESC LIMIT $2`,
        [model, o.limit],
      )
    ).rows;
    return rows.map((r) => ({
      promptTokens: r.prompt_tokens,
      completionTokens: r.completion_tokens,
      latencyMs: r.latency_ms,
      request: r.request,
    }));
  }
}

const ACTIVE_RUNS = 'SELECT * FROM runs WHERE ended_at IS NULL ORDER BY started_at DESC, seq DESC';
