import { folderPrefix, ITEM_STATES_PER_QUERY } from '../pages.js';
import { COUNTS_COLUMNS, STATE_COUNTS_SQL, stateCountsOf, tallyJobs, type StateTokensRow } from '../tally.js';
import { SPEND_COLUMNS, spendOfJoined } from '../spend-amounts.js';
import type { Db } from './open.js';
import { ATTEMPTS_OF_JOB } from './attempts.js';
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
import { exportPagesMerged } from './export-read.js';
import { JOB_COLUMNS, requestOf } from './requests.js';
import {
  LANES_SQL,
  toAttempt,
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
import { unplannedLimit } from './unplanned-limit.js';
import { NOT_IN_A_LIVE_BATCH, SENT_ONLINE } from '../batches.js';
import { mockAnswersMayStand, mockAnswersToRun, notAnsweredByMock } from '../mock-answers.js';
import { LAST_WORKED_SQL } from '../last-run.js';

/** `answered`'s read: a model's latest done jobs ($1 model, $2 how many) a real provider answered, each with its answering attempt's latency. */
export function answeredSql(withRequest: boolean, withoutMock = true): string {
  return `SELECT j.prompt_tokens, j.completion_tokens, ${withRequest ? `${requestOf('j')} AS request` : 'NULL AS request'},
      (SELECT latency_ms FROM attempts a WHERE ${ATTEMPTS_OF_JOB} AND a.outcome = 'done' AND ${SENT_ONLINE('a')} ORDER BY a.id DESC LIMIT 1) AS latency_ms
    FROM jobs j INDEXED BY jobs_age WHERE j.model = ? AND j.state = 'done'${withoutMock ? ` AND ${notAnsweredByMock('sqlite', ATTEMPTS_OF_JOB)}` : ''}
    ORDER BY j.created_at DESC, j.seq DESC LIMIT ${unplannedLimit('?')}`;
}

/** 1 for a run whose stats say it sent a request (a run still starting has none yet), else 0. */
const SENT_SOMETHING = "(ended_at IS NULL OR (json_valid(stats) AND coalesce(json_extract(stats, '$.requests'), 0) > 0))";

/** The reads of `llmq show`: each one row (or one job's attempts) found through an index, however big the queue. */
export const ITEM_SQL = Object.freeze({
  item: 'SELECT * FROM items WHERE id = ?',
  job: `SELECT ${JOB_COLUMNS} FROM jobs WHERE key = ?`,
  // the job's key twice: its attempts by seq, and those stored before migration 9 by key (ATTEMPTS_OF_JOB as a merge of two index walks)
  attempts: `SELECT a.* FROM jobs j JOIN attempts a ON a.job_seq = j.seq WHERE j.key = ?
    UNION ALL SELECT * FROM attempts WHERE job_seq IS NULL AND job_key = ? ORDER BY id`,
});

/** The read side of the SQLite store: status, one item, and the export stream. */
export class SqliteReader {
  readonly #db: Db;
  constructor(db: Db) {
    this.#db = db;
  }

  /**
   * Every figure comes from the counts the migration `status_counts` keeps, or walks an index to its
   * first entry, so this costs the same at any queue size.
   */
  status(): StatusSnapshot {
    const db = this.#db;
    return db.transaction(() => {
      const rows = db.prepare(`SELECT ${COUNTS_COLUMNS} FROM job_counts GROUP BY model, state`).all() as StateTokensRow[];
      const items = db.prepare('SELECT items FROM item_counts').pluck().get() as number;
      // the entries of the partial index jobs_orphaned that are done
      const orphaned = db.prepare(`SELECT count(*) FROM jobs WHERE orphaned = 1 AND state = 'done'`).pluck().get() as number;
      const failures = db
        .prepare(`SELECT error, jobs AS count FROM failure_counts INDEXED BY failure_counts_top WHERE jobs > 0
          ORDER BY jobs DESC, error LIMIT 10`)
        .all() as Array<{ error: string; count: number }>;
      // the first entry of jobs_age (state, created_at)
      const oldestPendingAt = db.prepare(`SELECT min(created_at) FROM jobs WHERE state = 'pending'`).pluck().get() as number | null;
      // the last run that sent something (one that found nothing to do would hide it), by when it
      // ended: of two runs side by side, the one started first may well end last
      const last = db
        .prepare(`SELECT * FROM runs ORDER BY ${SENT_SOMETHING} DESC, ${LAST_WORKED_SQL} DESC, started_at DESC LIMIT 1`)
        .get() as RawRun | undefined;
      return {
        ...tallyJobs(rows, orphaned),
        items,
        failures,
        oldestPendingAt: oldestPendingAt ?? null,
        activeRuns: this.activeRuns(),
        lastRun: last ? toRun(last) : null,
        lanes: this.laneLimits(),
        spend: this.runsWithSpend(),
        rejected: (db.prepare('SELECT source, rejected, first, at FROM rejections ORDER BY at DESC, source').all() as RawRejections[]).map(
          toRejections,
        ),
      };
    })();
  }

  stateCounts(): Record<JobState, number> {
    return stateCountsOf(this.#db.prepare(STATE_COUNTS_SQL).all() as Array<{ state: JobState; n: number }>);
  }

  /** Every run that keeps its money in `spend`, newest first. */
  runsWithSpend(): StatusSnapshot['spend'] {
    const rows = this.#db
      .prepare(`SELECT r.*, ${SPEND_COLUMNS} FROM runs r JOIN spend s ON s.run_id = r.id
      ORDER BY r.started_at DESC, r.rowid DESC`)
      .all() as Array<RawRun & Record<string, unknown>>;
    return rows.map((r) => ({ ...toRun(r), spend: spendOfJoined(r)! }));
  }

  laneLimits(): LaneLimitRow[] {
    return (this.#db.prepare(LANES_SQL).all() as RawLane[]).map(toLane);
  }

  activeRuns(): RunRow[] {
    const rows = this.#db.prepare('SELECT * FROM runs WHERE ended_at IS NULL ORDER BY started_at DESC').all() as RawRun[];
    return rows.map(toRun);
  }

  failedItems(error: string, limit: number): FailedItemRow[] {
    // In jobs_age's order (state, created_at, seq), so the walk stops at the limit instead of
    // sorting every failed job; a job's items come in their own index order (insertion).
    return this.#db
      .prepare(`SELECT i.id, i.source, j.key, j.attempts FROM jobs j INDEXED BY jobs_age JOIN items i ON i.job_key = j.key
      WHERE j.state = 'failed' AND coalesce(j.error, 'unknown error') = ? ORDER BY j.created_at, j.seq LIMIT ${unplannedLimit('?')}`)
      .all(error, limit) as FailedItemRow[];
  }

  failedJobsToResend(filter: RetryFailedFilter, after: FailedJobCursor | null, limit: number): FailedJobToResend[] {
    // along jobs_age (state, created_at, seq): by seq, each page sorted every failed job left
    const jobs = this.#db
      .prepare(`SELECT j.created_at, j.seq, j.key, j.error, ${requestOf('j')} AS request, j.model, j.priority FROM jobs j INDEXED BY jobs_age
        WHERE j.state = 'failed' AND (j.created_at, j.seq) > (@createdAt, @seq)
          AND (@text IS NULL OR instr(llmq_lower(j.error), llmq_lower(@text)) > 0)
          AND (@exact IS NULL OR coalesce(j.error, 'unknown error') = @exact)
        ORDER BY j.created_at, j.seq LIMIT ${unplannedLimit('@limit')}`)
      .all({
        createdAt: after?.createdAt ?? Number.MIN_SAFE_INTEGER,
        seq: after?.seq ?? 0,
        limit,
        text: filter.errorContains ?? null,
        exact: filter.errorIs ?? null,
      }) as RawFailedJob[];
    if (jobs.length === 0) return [];
    const items = this.#db
      .prepare('SELECT job_key, id, source, meta FROM items WHERE job_key IN (SELECT value FROM json_each(?)) ORDER BY seq')
      .all(JSON.stringify(jobs.map((j) => j.key))) as RawItemToResend[];
    return withTheirItems(jobs, items);
  }

  cutOffAnswersToResend(
    after: FailedJobCursor | null,
    limit: number,
    cutOff: (response: string | null) => boolean,
  ): { jobs: FailedJobToResend[]; last: FailedJobCursor | null } {
    // along jobs_age, as failed jobs are; a body that does not hold "length" is no such answer
    const rows = this.#db
      .prepare(`SELECT j.created_at, j.seq, j.key, NULL AS error, ${requestOf('j')} AS request, j.model, j.priority, j.response FROM jobs j INDEXED BY jobs_age
        WHERE j.state = 'done' AND (j.created_at, j.seq) > (@createdAt, @seq) AND instr(j.response, '"length"') > 0
        ORDER BY j.created_at, j.seq LIMIT ${unplannedLimit('@limit')}`)
      .all({ createdAt: after?.createdAt ?? Number.MIN_SAFE_INTEGER, seq: after?.seq ?? 0, limit }) as Array<
      RawFailedJob & { response: string | null }
    >;
    const { cut, last } = cutOffOf(rows, cutOff);
    if (cut.length === 0) return { jobs: [], last };
    const items = this.#db
      .prepare('SELECT job_key, id, source, meta FROM items WHERE job_key IN (SELECT value FROM json_each(?)) ORDER BY seq')
      .all(JSON.stringify(cut.map((j) => j.key))) as RawItemToResend[];
    return { jobs: withTheirItems(cut, items), last };
  }

  itemsByKeyPrefix(prefix: string, limit: number, afterKey = ''): KeyItemRow[] {
    // hex keys: every key that starts with the prefix sorts below the prefix followed by 'g'
    return this.#db
      .prepare(
        `SELECT job_key AS key, id AS itemId FROM items WHERE job_key >= ? AND job_key > ? AND job_key < ? ORDER BY job_key, seq LIMIT ${unplannedLimit('?')}`,
      )
      .all(prefix, afterKey, `${prefix}g`, limit) as KeyItemRow[];
  }

  itemStates(ids: readonly string[]): Array<JobState | null> {
    // json_each's key is the id's place in the array
    const statement = this.#db
      .prepare('SELECT v.key, j.state FROM json_each(?) v JOIN items i ON i.id = v.value JOIN jobs j ON j.key = i.job_key')
      .raw();
    const states = new Array<JobState | null>(ids.length).fill(null);
    for (let i = 0; i < ids.length; i += ITEM_STATES_PER_QUERY) {
      const found = statement.all(JSON.stringify(ids.slice(i, i + ITEM_STATES_PER_QUERY))) as Array<[number, JobState]>;
      for (const [at, state] of found) states[i + at] = state;
    }
    return states;
  }

  folderItems(folder: string, limit: number, afterSeq = 0): FolderItemRow[] {
    // a source ending in ':' and digits is a line's (rtrim takes the digits off)
    return this.#db
      .prepare(
        `SELECT seq, id FROM items WHERE seq > ? AND source = ? || id
          AND NOT (rtrim(source, '0123456789') <> source AND substr(rtrim(source, '0123456789'), -1) = ':')
          ORDER BY seq LIMIT ${unplannedLimit('?')}`,
      )
      .all(afterSeq, folderPrefix(folder), limit) as FolderItemRow[];
  }

  lineItemIds(file: string, limit: number, afterId = ''): string[] {
    // a range of the ids' index: the ids `file:` and digits sort between `file:` and `file;` (by bytes)
    return this.#db
      .prepare(
        `SELECT id FROM items WHERE id > max(@file || ':', @after) AND id < @file || ';' AND source = id
          AND rtrim(substr(id, length(@file) + 2), '0123456789') = '' ORDER BY id LIMIT ${unplannedLimit('@limit')}`,
      )
      .pluck()
      .all({ file, after: afterId, limit }) as string[];
  }

  itemsEndingIn(name: string, limit: number): ItemSourceRow[] {
    // substr rather than LIKE: a name may hold % and _
    return this.#db
      .prepare(
        `SELECT id, source FROM items WHERE length(id) > length(@name) AND substr(id, length(id) - length(@name)) = '/' || @name
          ORDER BY seq LIMIT ${unplannedLimit('@limit')}`,
      )
      .all({ name, limit }) as ItemSourceRow[];
  }

  item(id: string): ItemDetail | null {
    const db = this.#db;
    return db.transaction(() => {
      const item = db.prepare(ITEM_SQL.item).get(id) as { id: string; source: string; job_key: string; meta: string | null } | undefined;
      if (!item) return null;
      const job = db.prepare(ITEM_SQL.job).get(item.job_key) as RawJob;
      const attempts = (db.prepare(ITEM_SQL.attempts).all(item.job_key, item.job_key) as RawAttempt[]).map(toAttempt);
      return { id: item.id, source: item.source, meta: item.meta ? JSON.parse(item.meta) : null, job: toJob(job), attempts };
    })();
  }

  /** Items in input order, a page at a time, so a million rows never sit in memory at once. */
  async *exportPages(filter: ExportFilter): AsyncIterable<readonly ExportRow[]> {
    yield* exportPagesMerged(this.#db, filter);
  }

  itemSeqSpan(): ItemSeqSpan | null {
    // two subqueries: SQLite reads one end of the index for a lone min() or max(), but scans the table for both in one
    const span = this.#db.prepare('SELECT (SELECT min(seq) FROM items) AS first, (SELECT max(seq) FROM items) AS last').get() as {
      first: number | null;
      last: number | null;
    };
    return span.first === null || span.last === null ? null : { first: span.first, last: span.last };
  }

  jobsToRun(now: number, o: JobsToRunOptions = {}): AsyncIterable<JobToRun> {
    const cols = `seq, key, model, ${requestOf('jobs')} AS request, priority, attempts`;
    const expired = this.#db
      .prepare(`SELECT ${cols} FROM jobs WHERE state = 'running' AND ${NOT_IN_A_LIVE_BATCH}
        AND (lease_expires_at < ? AND coalesce(lease_owner, '') NOT IN (SELECT value FROM json_each(?))
          OR lease_owner IN (SELECT value FROM json_each(?)))`)
      .all(now, JSON.stringify(o.spared ?? []), JSON.stringify(o.deadOwners ?? [])) as RawJobToRun[];
    if (o.mockAnswersBefore !== undefined) {
      // taken back, they start again at no attempts
      const mocked = this.#db.prepare(
        `SELECT ${cols.replace('attempts', '0 AS attempts, 1 AS mocked')} FROM jobs WHERE ${mockAnswersToRun('sqlite', '@quietSince')}`,
      );
      expired.push(...(mocked.all({ quietSince: o.mockAnswersBefore }) as RawJobToRun[]));
    }
    const first = this.#db.prepare(`SELECT ${cols} FROM jobs WHERE state = 'pending' ORDER BY priority, seq LIMIT ${JOBS_PAGE}`);
    // Each page walks the jobs_claim index from where the last one ended: the rest of its priority,
    // then the priorities after it. Not the row value (priority, seq) > (?, ?): SQLite bounds that
    // walk by the priority alone and steps over every earlier job of it again, page after page
    // (400,000 jobs of one priority: 14 s, against 1.7 s for one pass).
    const samePriority = this.#db.prepare(`SELECT ${cols} FROM jobs WHERE state = 'pending' AND priority = ? AND seq > ?
      ORDER BY priority, seq LIMIT ${JOBS_PAGE}`);
    const laterPriorities = this.#db.prepare(`SELECT ${cols} FROM jobs WHERE state = 'pending' AND priority > ?
      ORDER BY priority, seq LIMIT ${unplannedLimit('?')}`);
    const next = (after: { priority: number; seq: number }): RawJobToRun[] => {
      const rows = samePriority.all(after.priority, after.seq) as RawJobToRun[];
      if (rows.length < JOBS_PAGE) rows.push(...(laterPriorities.all(after.priority, JOBS_PAGE - rows.length) as RawJobToRun[]));
      return rows;
    };
    return inClaimOrder(expired, async (after) => (after ? next(after) : (first.all() as RawJobToRun[])));
  }

  /** Newest first in jobs_age's order (state, created_at, seq), so the walk stops at the limit instead of sorting every done job. */
  answered(model: string, o: { limit: number; withRequest: boolean }): AnsweredJob[] {
    const mock = this.#db.prepare(mockAnswersMayStand('sqlite')).get() !== undefined;
    const rows = this.#db.prepare(answeredSql(o.withRequest, mock)).all(model, o.limit) as Array<{
      prompt_tokens: number;
      completion_tokens: number;
      request: string | null;
      latency_ms: number | null;
    }>;
    return rows.map((r) => ({
      promptTokens: r.prompt_tokens,
      completionTokens: r.completion_tokens,
      latencyMs: r.latency_ms,
      request: r.request,
    }));
  }
}
