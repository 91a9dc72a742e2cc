import { folderPrefix, ITEM_STATES_PER_QUERY } from '../pages.js';
import { COUNTS_COLUMNS, STATE_COUNTS_SQL, stateCountsOf, tallyJobs, type StateTokensRow } from '../tally.js';
import { NOT_IN_A_LIVE_BATCH, SENT_ONLINE } from '../batches.js';
import { mockAnswersMayStand, mockAnswersToRun, notAnsweredByMock } from '../mock-answers.js';
import { SPEND_COLUMNS, spendOfJoined } from '../spend-amounts.js';
import type pg from 'pg';
import type {
  AnsweredJob,
  ExportFilter,
  ItemSeqSpan,
  ExportRow,
  FailedItemRow,
  FailedJobCursor,
  FailedJobToResend,
  FolderItemRow,
  ItemSourceRow,
  KeyItemRow,
  ItemDetail,
  JobState,
  JobToRun,
  JobsToRunOptions,
  LaneLimitRow,
  RetryFailedFilter,
  RunRow,
  StatusSnapshot,
} from '../types.js';
import { inClaimOrder, JOBS_PAGE, type RawJobToRun } from '../claim-order.js';
import {
  LANES_SQL,
  toAttempt,
  exportJobColumns,
  exportRowOf,
  toJob,
  toLane,
  toRejections,
  toRun,
  withTheirItems,
  cutOffOf,
  type RawAttempt,
  type RawFailedJob,
  type RawItemToResend,
  type RawJob,
  type RawLane,
  type RawRejections,
  type RawRun,
} from '../rows.js';
import { inTransaction, query } from './connect.js';
import { foldCounts } from './counts.js';
import { KeptJobs, pairedInOrder, RANGE_MIN, type RawItem } from '../export-pairing.js';
import { LAST_WORKED_SQL } from '../last-run.js';

const EXPORT_PAGE = 1000;
/** Jobs kept from earlier pages for items that share a job or come a little out of order. */
const KEPT_JOBS = 2 * EXPORT_PAGE;

/** The attempts of job `j` (as `a`), through attempts_job. */
const ATTEMPTS_OF_JOB = 'a.job_key = j.key';

/**
 * A job as the export reads it: exportJobColumns (key and state first), or when states are asked
 * for, key and state then exportJobColumns (all NULL for a state not asked for).
 */
type ExportJob = readonly [key: string, state: JobState, ...columns: unknown[]];
/** A page of items, the run read from the first one's job, and how many of them it pairs. */
interface ExportPage {
  readonly page: RawItem[];
  readonly run: ExportJob[];
  readonly paired: number;
}

/**
 * The export's reads: a page of items; a run of jobs in seq order from one job's ($1) on, $2 of
 * them; jobs by key ($1). When states are asked for, $3 (run) or $2 (byKey): the columns of a job
 * in another state are not read, only its key and state (what the pairing needs).
 */
function exportPageSql(filter: ExportFilter) {
  const columns = exportJobColumns(filter, ATTEMPTS_OF_JOB);
  const job = (states: string) =>
    filter.states?.length
      ? `j.key, j.state, x.* FROM jobs j LEFT JOIN LATERAL (SELECT ${columns} WHERE j.state = ANY(${states}::text[])) x ON true`
      : `${columns} FROM jobs j`;
  return {
    items: `SELECT seq, id, source, meta, job_key FROM items WHERE seq > $1 ${filter.items ? 'AND seq <= $2' : ''}
      ORDER BY seq LIMIT ${EXPORT_PAGE}`,
    run: `SELECT ${job('$3')} WHERE j.seq >= (SELECT seq FROM jobs WHERE key = $1) ORDER BY j.seq LIMIT $2`,
    byKey: `SELECT ${job('$2')} WHERE j.key = ANY($1::text[])`,
  };
}

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
 * What status reads of `jobs` itself: the first entry of jobs_age (state, created_at), and the done
 * entries of the partial index jobs_orphaned. A bulk load (bulk-load.ts) holds `jobs` exclusively
 * until it commits, and what it loads is invisible until then anyway: rather than wait minutes for
 * the load, status shows the queue as committed (a load only starts on an empty queue: no oldest
 * pending job, no orphaned answer).
 */
async function readJobsUnlessLoading(db: pg.PoolClient): Promise<{ oldestPendingAt: number | null; orphaned: number }> {
  await db.query(`SAVEPOINT jobs_read; SET LOCAL lock_timeout = '${LOCK_WAIT_MS}ms'`);
  try {
    const row = (
      await db.query<{
        oldest: number | null;
        orphaned: number;
      }>(`SELECT (SELECT min(created_at) FROM jobs WHERE state = 'pending') AS oldest,
        (SELECT count(*) FROM jobs WHERE orphaned AND state = 'done')::int AS orphaned`)
    ).rows[0]!;
    await db.query('RELEASE SAVEPOINT jobs_read; SET LOCAL lock_timeout = DEFAULT');
    return { oldestPendingAt: row.oldest, orphaned: row.orphaned };
  } catch (error) {
    if ((error as { code?: string }).code !== LOCK_NOT_AVAILABLE) throw error;
    await db.query('ROLLBACK TO SAVEPOINT jobs_read');
    return { oldestPendingAt: null, orphaned: 0 };
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
        const { oldestPendingAt, orphaned } = await readJobsUnlessLoading(db);
        const activeRuns = (await db.query<RawRun>(ACTIVE_RUNS)).rows.map(toRun);
        // the last run that sent something (one that found nothing to do would hide it), by when it ended
        const last = (
          await db.query<RawRun>(`SELECT * FROM runs
          ORDER BY (ended_at IS NULL OR coalesce((stats::jsonb ->> 'requests')::bigint, 0) > 0) DESC,
            ${LAST_WORKED_SQL} DESC, started_at DESC, seq DESC LIMIT 1`)
        ).rows[0];
        const lanes = (await db.query<RawLane>(LANES_SQL)).rows.map(toLane);
        const spend = (
          await db.query<RawRun & Record<string, unknown>>(`SELECT r.*, ${SPEND_COLUMNS} FROM runs r
          JOIN spend s ON s.run_id = r.id ORDER BY r.started_at DESC, r.seq DESC`)
        ).rows.map((r) => ({ ...toRun(r), spend: spendOfJoined(r)! }));
        const rejected = (
          await db.query<RawRejections>('SELECT source, rejected, first, at FROM rejections ORDER BY at DESC, source COLLATE "C"')
        ).rows.map(toRejections);
        return {
          ...tallyJobs(rows, orphaned),
          items,
          failures,
          oldestPendingAt,
          activeRuns,
          lastRun: last ? toRun(last) : null,
          lanes,
          spend,
          rejected,
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

  async failedJobsToResend(filter: RetryFailedFilter, after: FailedJobCursor | null, limit: number): Promise<FailedJobToResend[]> {
    const jobs = (
      await query<RawFailedJob>(
        this.#pool,
        `SELECT created_at, seq, key, error, request, model, priority FROM jobs
        WHERE state = 'failed' AND (created_at, seq) > ($1::bigint, $2::bigint)
          AND ($3::text IS NULL OR strpos(lower(error), lower($3::text)) > 0)
          AND ($4::text IS NULL OR coalesce(error, 'unknown error') = $4::text)
        ORDER BY created_at, seq LIMIT $5`,
        [after?.createdAt ?? Number.MIN_SAFE_INTEGER, after?.seq ?? 0, filter.errorContains ?? null, filter.errorIs ?? null, limit],
      )
    ).rows;
    if (jobs.length === 0) return [];
    const items = (
      await query<RawItemToResend>(this.#pool, 'SELECT job_key, id, source, meta FROM items WHERE job_key = ANY($1::text[]) ORDER BY seq', [
        jobs.map((j) => j.key),
      ])
    ).rows;
    return withTheirItems(jobs, items);
  }

  async cutOffAnswersToResend(
    after: FailedJobCursor | null,
    limit: number,
    cutOff: (response: string | null) => boolean,
  ): Promise<{ jobs: FailedJobToResend[]; last: FailedJobCursor | null }> {
    // a body that does not hold "length" is no such answer
    const rows = (
      await query<RawFailedJob & { response: string | null }>(
        this.#pool,
        `SELECT created_at, seq, key, NULL AS error, request, model, priority, response FROM jobs
        WHERE state = 'done' AND (created_at, seq) > ($1::bigint, $2::bigint) AND strpos(response, '"length"') > 0
        ORDER BY created_at, seq LIMIT $3`,
        [after?.createdAt ?? Number.MIN_SAFE_INTEGER, after?.seq ?? 0, limit],
      )
    ).rows;
    const { cut, last } = cutOffOf(rows, cutOff);
    if (cut.length === 0) return { jobs: [], last };
    const items = (
      await query<RawItemToResend>(this.#pool, 'SELECT job_key, id, source, meta FROM items WHERE job_key = ANY($1::text[]) ORDER BY seq', [
        cut.map((j) => j.key),
      ])
    ).rows;
    return { jobs: withTheirItems(cut, items), last };
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

  async itemStates(ids: readonly string[]): Promise<Array<JobState | null>> {
    const states = new Array<JobState | null>(ids.length).fill(null);
    const sql = `SELECT u.at, j.state FROM unnest($1::text[]) WITH ORDINALITY AS u(id, at)
      JOIN items i ON i.id = u.id JOIN jobs j ON j.key = i.job_key`;
    for (let i = 0; i < ids.length; i += ITEM_STATES_PER_QUERY) {
      const some = ids.slice(i, i + ITEM_STATES_PER_QUERY);
      // ordinality counts from 1 (a bigint, as text)
      for (const row of (await query<{ at: string; state: JobState }>(this.#pool, sql, [some])).rows)
        states[i + Number(row.at) - 1] = row.state;
    }
    return states;
  }

  /** Sums the counts as they are, folded or not: no write (the heartbeat folds them). */
  async stateCounts(): Promise<Record<JobState, number>> {
    return stateCountsOf((await query<{ state: JobState; n: string }>(this.#pool, STATE_COUNTS_SQL)).rows);
  }

  async folderItems(folder: string, limit: number, afterSeq = 0): Promise<FolderItemRow[]> {
    const rows = await query<{ seq: string; id: string }>(
      this.#pool,
      `SELECT seq, id FROM items WHERE seq > $1 AND source = $2 || id AND source !~ ':[0-9]+$' ORDER BY seq LIMIT $3`,
      [afterSeq, folderPrefix(folder), limit],
    );
    return rows.rows.map((r) => ({ seq: Number(r.seq), id: r.id }));
  }

  async lineItemIds(file: string, limit: number, afterId = ''): Promise<string[]> {
    // a range of items_line_id (migration 16): the ids `file:` and digits sort between `file:` and `file;` by bytes
    const rows = await query<{ id: string }>(
      this.#pool,
      `SELECT id FROM items WHERE source = id AND (id COLLATE "C") > $1 AND (id COLLATE "C") > $2 || ':' AND (id COLLATE "C") < $2 || ';'
        AND substr(id, length($2) + 2) ~ '^[0-9]+$' ORDER BY (id COLLATE "C") LIMIT $3`,
      [afterId, file, limit],
    );
    return rows.rows.map((r) => r.id);
  }

  async itemsEndingIn(name: string, limit: number): Promise<ItemSourceRow[]> {
    const rows = await query<ItemSourceRow>(
      this.#pool,
      `SELECT id, source FROM items WHERE length(id) > length($1) AND right(id, length($1) + 1) = '/' || $1 ORDER BY seq LIMIT $2`,
      [name, limit],
    );
    return rows.rows;
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
   * the next page is asked for as soon as the last one is in, so the database works on it while
   * this one is written. The pages run on one connection with parallel plans off: costing the scan
   * to the end of the table, the planner chose a parallel plan for some column sets and started
   * workers for each page of 1,000 rows, which made that export 2.5 times slower than the others.
   *
   * Looking each item's job up by key (the join this replaced) costs a random walk of jobs_key
   * (SHA-256 keys) and a heap page per row. Jobs are made in the order of the first item that asks
   * for each, so a page of items mostly wants a run of consecutive jobs: one lookup finds where the
   * run starts, the run is read in seq order and paired with the items by position, and only the
   * jobs the run did not bring are looked up (as SQLite's exportPagesMerged does).
   */
  async *exportPages(filter: ExportFilter): AsyncIterable<readonly ExportRow[]> {
    const states = filter.states?.length ? [...filter.states] : null;
    const sql = exportPageSql(filter);
    const client = await this.#pool.connect();
    const rowsOf = async <R>(text: string, values: unknown[]) =>
      // values, not an object per row (as SQLite's raw mode)
      (await client.query<R[] & unknown[]>({ text, values, rowMode: 'array' })).rows as unknown as R[];
    const kept = new KeptJobs<ExportJob>(KEPT_JOBS);
    // where exportJobColumns start in an ExportJob
    const at = states ? 2 : 0;
    const runFrom = (key: string, n: number) => rowsOf<ExportJob>(sql.run, states ? [key, n, states] : [key, n]);
    const itemParams = (after: number) => (filter.items ? [after, filter.items.upToSeq] : [after]);
    /** A page's items and their jobs, read in one transaction: as of one moment, as a join reads them. */
    const readPage = async (after: number): Promise<ExportPage> => {
      await client.query(SNAPSHOT);
      const page = await rowsOf<RawItem>(sql.items, itemParams(after));
      const first = page[0];
      const run = first && !kept.has(first[4]) ? await runFrom(first[4], page.length) : [];
      const paired = pairedInOrder(page, run);
      if (paired < page.length) {
        for (const job of run) kept.keep(job);
        let wanted = [...new Set(page.slice(paired).map((i) => i[4]))].filter((k) => !kept.has(k));
        while (wanted.length >= RANGE_MIN) {
          const want = new Set(wanted);
          const got = await runFrom(wanted[0]!, wanted.length);
          let hits = 0;
          for (const job of got) {
            kept.keep(job);
            if (want.has(job[0])) hits++;
          }
          wanted = wanted.filter((k) => !kept.has(k));
          // a run that brought mostly other jobs (or none): the rest are scattered, look them up by key
          if (hits * 2 < got.length || got.length === 0) break;
        }
        if (wanted.length > 0) for (const job of await rowsOf<ExportJob>(sql.byKey, states ? [wanted, states] : [wanted])) kept.keep(job);
      }
      await client.query('COMMIT');
      return { page, run, paired };
    };
    let failed: unknown = null;
    let next: Promise<ExportPage> | null = null;
    try {
      await client.query('SET max_parallel_workers_per_gather = 0');
      next = readPage(filter.items?.afterSeq ?? 0);
      while (next) {
        const { page, run, paired }: ExportPage = await next;
        const rows: ExportRow[] = [];
        for (let n = 0; n < page.length; n++) {
          const i = page[n]!;
          const job = n < paired ? run[n] : kept.get(i[4]);
          // no job: the join left such an item out too (the foreign key keeps it from happening)
          if (!job || (states && !states.includes(job[1]))) continue;
          rows.push(exportRowOf(i[1], i[2], i[3], job, at));
        }
        kept.pageDone(page, paired);
        next = page.length < EXPORT_PAGE ? null : readPage(page[page.length - 1]![0]);
        // a reader that stops early leaves the prefetch behind: its failure is nobody's to hear
        next?.catch(() => {});
        yield rows;
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

  async *jobsToRun(now: number, o: JobsToRunOptions = {}): AsyncIterable<JobToRun> {
    const cols = 'seq, key, model, request, priority, attempts';
    const expired = (
      await query<RawJobToRun>(
        this.#pool,
        `SELECT ${cols} FROM jobs WHERE state = 'running' AND ${NOT_IN_A_LIVE_BATCH}
          AND (lease_expires_at < $1 AND NOT (coalesce(lease_owner, '') = ANY($2::text[])) OR lease_owner = ANY($3::text[]))`,
        [now, [...(o.spared ?? [])], [...(o.deadOwners ?? [])]],
      )
    ).rows;
    if (o.mockAnswersBefore !== undefined) {
      // taken back, they start again at no attempts
      const mocked = await query<RawJobToRun>(
        this.#pool,
        `SELECT ${cols.replace('attempts', '0 AS attempts, 1 AS mocked')} FROM jobs WHERE ${mockAnswersToRun('postgres', '$1')}`,
        [o.mockAnswersBefore],
      );
      expired.push(...mocked.rows);
    }
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
    const mock = (await query(this.#pool, mockAnswersMayStand('postgres'))).rows.length > 0;
    const rows = (
      await query<{ prompt_tokens: number; completion_tokens: number; request: string | null; latency_ms: number | null }>(
        this.#pool,
        `SELECT j.prompt_tokens, j.completion_tokens, ${o.withRequest ? 'j.request' : 'NULL AS request'},
        (SELECT latency_ms FROM attempts a WHERE ${ATTEMPTS_OF_JOB} AND a.outcome = 'done' AND ${SENT_ONLINE('a')} ORDER BY a.id DESC LIMIT 1) AS latency_ms
      FROM jobs j WHERE j.model = $1 AND j.state = 'done'${mock ? ` AND ${notAnsweredByMock('postgres', ATTEMPTS_OF_JOB)}` : ''}
      ORDER BY j.created_at DESC, j.seq DESC LIMIT $2`,
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
