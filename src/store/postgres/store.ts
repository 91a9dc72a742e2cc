import type pg from 'pg';
import type {
  AttemptRecord, AttemptRow, ClaimOptions, ClaimResult, Completion, EnqueueResult, EnqueueRow, ExportFilter, ExportRow, FailedItemRow,
  ItemDetail, ItemRow, JobRow, LaneLimitRow, RetryFailedFilter, RunInfo, RunRow, RunStats, StatusSnapshot, Store,
} from '../types.js';
import { connectionError, createPool, parsePgUrl, query } from './connect.js';
import { migrate } from './migrations.js';
import { enqueuePg } from './enqueue.js';
import { PgReader } from './read.js';
import { PgCopier } from './copy.js';
import { PgBatches } from './batches.js';

/**
 * Insert one attempt row; its values are the first 11 parameters of the statement it is part of.
 * Data-modifying CTEs run to completion whether or not the main query reads them, so a state
 * change and its attempt row go in one statement, which is one transaction and one round trip.
 */
const INSERT_ATTEMPT = `INSERT INTO attempts (job_key, run_id, attempt, started_at, ended_at, latency_ms, status, outcome, error,
  prompt_tokens, completion_tokens) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`;

function attemptParams(a: AttemptRecord): unknown[] {
  return [a.key, a.runId, a.attempt, a.startedAt, a.endedAt, Math.max(0, a.endedAt - a.startedAt), a.status, a.outcome, a.error,
    a.usage?.promptTokens ?? null, a.usage?.completionTokens ?? null];
}

/** Fail a held job; its four parameters (error, now, key, owner) start at `$first`. */
function failSql(first: number): string {
  const [error, now, key, owner] = [0, 1, 2, 3].map((i) => `$${first + i}`);
  return `UPDATE jobs SET state = 'failed', error = ${error}, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = ${now}, updated_at = ${now} WHERE key = ${key} AND state = 'running' AND lease_owner = ${owner}`;
}

/**
 * The claim: lock up to `limit` pending jobs in priority-then-FIFO order, skipping rows another run
 * has locked (so concurrent claims never wait on each other nor take the same job), and in the same
 * statement either start them (attempts + 1, leased) or, when their attempts are used up (a crash
 * loop), fail them. MATERIALIZED makes the locked set be chosen exactly once.
 */
const CLAIM_SQL = `
WITH picked AS MATERIALIZED (
  SELECT seq FROM jobs WHERE state = 'pending' AND run_after <= $2::bigint AND NOT (model = ANY($6::text[]))
  ORDER BY priority, seq LIMIT $5::int FOR UPDATE SKIP LOCKED
)
UPDATE jobs SET
  state = CASE WHEN attempts >= $1::int THEN 'failed' ELSE 'running' END,
  attempts = CASE WHEN attempts >= $1::int THEN attempts ELSE attempts + 1 END,
  error = CASE WHEN attempts >= $1::int
    THEN 'gave up after ' || attempts || ' attempts; last error: ' || coalesce(error, 'the run working on it died')
    ELSE error END,
  finished_at = CASE WHEN attempts >= $1::int THEN $2::bigint ELSE NULL END,
  lease_owner = CASE WHEN attempts >= $1::int THEN NULL ELSE $3::text END,
  lease_expires_at = CASE WHEN attempts >= $1::int THEN NULL ELSE $4::bigint END,
  updated_at = $2::bigint
WHERE seq IN (SELECT seq FROM picked)
RETURNING seq, key, request, model, priority, attempts, state`;

interface PendingCompletion {
  readonly key: string;
  readonly c: Completion;
  resolve(changed: boolean): void;
  reject(error: unknown): void;
}

/** Answers per statement; more wait for the next one (the parameters are arrays, so this bounds its size, not a count). */
const COMPLETE_BATCH = 500;

/**
 * Group commit of answers: the batch arrives as one array per column (17 parameters whatever its
 * size). Every row inserts its attempt; the first row for each key stores the answer and marks the
 * job done, unless it already is. Not tied to the lease: an answer that arrives after the lease
 * moved on is paid for, so keep it. Returns the 1-based positions of the rows that marked a job done.
 */
const COMPLETE_SQL = `
WITH input AS MATERIALIZED (
  SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[], $7::int[], $8::text[],
    $9::text[], $10::int[], $11::int[], $12::text[], $13::text[], $14::text[], $15::int[], $16::int[], $17::bool[])
    WITH ORDINALITY AS t(a_key, run_id, attempt, started_at, ended_at, latency_ms, status, outcome, error, a_prompt, a_completion,
      key, output, response, prompt_tokens, completion_tokens, first, i)
), attempt AS (
  INSERT INTO attempts (job_key, run_id, attempt, started_at, ended_at, latency_ms, status, outcome, error, prompt_tokens, completion_tokens)
  SELECT a_key, run_id, attempt, started_at, ended_at, latency_ms, status, outcome, error, a_prompt, a_completion FROM input ORDER BY i
), done AS (
  UPDATE jobs SET state = 'done', output = input.output, response = input.response, prompt_tokens = input.prompt_tokens,
    completion_tokens = input.completion_tokens, error = NULL, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = input.ended_at, updated_at = input.ended_at
  FROM input WHERE input.first AND jobs.key = input.key AND jobs.state <> 'done'
  RETURNING input.i
) SELECT i FROM done`;

/**
 * The shared store: many runs on many machines work one queue. Every method is one statement or
 * one short transaction; nothing is held open between calls.
 */
export class PostgresStore implements Store {
  readonly kind = 'postgres' as const;
  readonly location: string;
  /** The schema the tables live in. */
  readonly schema: string;
  readonly pool: pg.Pool;
  readonly batches: PgBatches;
  readonly #read: PgReader;
  readonly #copy: PgCopier;

  private constructor(pool: pg.Pool, location: string, schema: string) {
    this.pool = pool;
    this.location = location;
    this.schema = schema;
    this.#read = new PgReader(pool);
    this.#copy = new PgCopier(pool);
    this.batches = new PgBatches(pool);
  }

  /** Connect, create the schema if missing, migrate it forward, and hand back a ready store. */
  static async open(url: string): Promise<PostgresStore> {
    const target = parsePgUrl(url);
    const pool = createPool(target);
    try {
      await migrate(pool, target.schema, target.location);
    } catch (error) {
      await pool.end().catch(() => {});
      throw connectionError(error, target.location);
    }
    return new PostgresStore(pool, target.location, target.schema);
  }

  enqueue(rows: readonly EnqueueRow[], now: number): Promise<EnqueueResult> {
    return enqueuePg(this.pool, rows, now);
  }

  async startRun(run: RunInfo): Promise<void> {
    await this.#q(`INSERT INTO runs (id, host, pid, started_at, heartbeat_at, options) VALUES ($1, $2, $3, $4, $4, $5)`,
      [run.id, run.host, run.pid, run.startedAt, JSON.stringify(run.options)]);
  }

  async heartbeat(runId: string, now: number, leaseUntil: number, stats: RunStats): Promise<void> {
    await this.#q(`WITH run AS (UPDATE runs SET heartbeat_at = $1, stats = $2 WHERE id = $3)
      UPDATE jobs SET lease_expires_at = $4 WHERE lease_owner = $3 AND state = 'running'`,
    [now, JSON.stringify(stats), runId, leaseUntil]);
  }

  async finishRun(runId: string, now: number, exitReason: string, stats: RunStats): Promise<void> {
    await this.#q('UPDATE runs SET heartbeat_at = $1, ended_at = $1, exit_reason = $2, stats = $3 WHERE id = $4',
      [now, exitReason, JSON.stringify(stats), runId]);
  }

  activeRuns(): Promise<RunRow[]> {
    return this.#read.activeRuns();
  }

  async reclaim(now: number, deadOwners: readonly string[]): Promise<number> {
    const r = await this.#q<{ n: number }>(`WITH back AS (
        UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = $1
        WHERE state = 'running' AND (lease_expires_at < $1 OR lease_owner = ANY($2::text[])) RETURNING key
      ), died AS (
        UPDATE runs SET ended_at = $1, exit_reason = 'died' WHERE id = ANY($2::text[]) AND ended_at IS NULL
      ) SELECT count(*)::int AS n, coalesce(array_agg(key), '{}') AS keys FROM back`, [now, [...deadOwners]]);
    await this.#dropOrphans((r.rows[0] as unknown as { keys: string[] }).keys);
    return r.rows[0]!.n;
  }

  async claim(o: ClaimOptions): Promise<ClaimResult> {
    const rows = (await this.#q<{ seq: number; key: string; request: string; model: string; priority: number; attempts: number; state: string }>(
      CLAIM_SQL, [o.maxAttempts, o.now, o.owner, o.leaseUntil, o.limit, [...(o.skipModels ?? [])]])).rows;
    // RETURNING comes back in no promised order; keep priority, then FIFO.
    rows.sort((a, b) => a.priority - b.priority || a.seq - b.seq);
    let exhausted = 0;
    const jobs = [];
    for (const r of rows) {
      if (r.state === 'failed') exhausted++;
      else jobs.push({ key: r.key, request: r.request, model: r.model, priority: r.priority, attempts: r.attempts });
    }
    return { jobs, exhausted };
  }

  async startRetry(key: string, owner: string, now: number, leaseUntil: number): Promise<number | null> {
    const r = await this.#q<{ attempts: number }>(`UPDATE jobs SET attempts = attempts + 1, lease_expires_at = $1, updated_at = $2
      WHERE key = $3 AND state = 'running' AND lease_owner = $4 RETURNING attempts`, [leaseUntil, now, key, owner]);
    return r.rows[0]?.attempts ?? null;
  }

  /**
   * Answers that arrive in the same turn of the event loop are committed together (group commit),
   * like the SQLite store: one statement stores every answer of the batch, its attempt rows and the
   * `done` states, so it is one transaction, one round trip and one WAL flush for many jobs. Each
   * promise resolves once that statement has committed, and all of them reject if it fails.
   */
  complete(key: string, c: Completion): Promise<boolean> {
    return new Promise((resolve, reject) => {
      this.#completions.push({ key, c, resolve, reject });
      if (this.#completions.length === 1) setImmediate(this.#flushCompletions);
    });
  }

  #completions: PendingCompletion[] = [];
  /** Batches sent and not yet answered, so `close` can wait for them. */
  readonly #flushing = new Set<Promise<void>>();

  readonly #flushCompletions = (): void => {
    const all = this.#completions;
    this.#completions = [];
    for (let i = 0; i < all.length; i += COMPLETE_BATCH) {
      const done = this.#completeBatch(all.slice(i, i + COMPLETE_BATCH)).finally(() => this.#flushing.delete(done));
      this.#flushing.add(done);
    }
  };

  async #completeBatch(batch: PendingCompletion[]): Promise<void> {
    // The first answer for a key marks it done; a second one in the same batch finds it done (false), as if it came later.
    const first = new Map<string, number>();
    batch.forEach((b, i) => { if (!first.has(b.key)) first.set(b.key, i); });
    const col = <T>(f: (b: PendingCompletion) => T) => batch.map(f);
    const updated = new Set<number>();
    try {
      const r = await this.#q<{ i: number }>(COMPLETE_SQL, [
        col((b) => b.c.attempt.key), col((b) => b.c.attempt.runId), col((b) => b.c.attempt.attempt),
        col((b) => b.c.attempt.startedAt), col((b) => b.c.attempt.endedAt),
        col((b) => Math.max(0, b.c.attempt.endedAt - b.c.attempt.startedAt)), col((b) => b.c.attempt.status),
        col((b) => b.c.attempt.outcome), col((b) => b.c.attempt.error),
        col((b) => b.c.attempt.usage?.promptTokens ?? null), col((b) => b.c.attempt.usage?.completionTokens ?? null),
        col((b) => b.key), col((b) => b.c.output), col((b) => b.c.response),
        col((b) => b.c.usage.promptTokens), col((b) => b.c.usage.completionTokens),
        batch.map((b, i) => first.get(b.key) === i),
      ]);
      for (const row of r.rows) updated.add(row.i);
    } catch (error) {
      for (const b of batch) b.reject(error);
      return;
    }
    batch.forEach((b, i) => b.resolve(updated.has(i + 1)));
  }

  async recordAttempt(a: AttemptRecord, o: { countAttempt: boolean; error: string | null }): Promise<void> {
    await this.#q(`WITH attempt AS (${INSERT_ATTEMPT})
      UPDATE jobs SET error = $12, attempts = attempts - $13, updated_at = $5
      WHERE key = $1 AND state = 'running' AND lease_owner = $2`, [...attemptParams(a), o.error, o.countAttempt ? 0 : 1]);
  }

  async fail(key: string, owner: string, error: string, attempt: AttemptRecord | null, now: number): Promise<void> {
    if (attempt) await this.#q(`WITH attempt AS (${INSERT_ATTEMPT}) ${failSql(12)}`, [...attemptParams(attempt), error, now, key, owner]);
    else await this.#q(failSql(1), [error, now, key, owner]);
  }

  async release(owner: string, o: { refund: boolean; now: number; keys?: readonly string[] }): Promise<number> {
    // With `keys`, only those jobs (the ones whose request never went out); without, every job the run holds.
    const r = await this.#q<{ key: string }>(`UPDATE jobs SET state = 'pending', attempts = greatest(attempts - $1, 0), lease_owner = NULL,
      lease_expires_at = NULL, updated_at = $2 WHERE lease_owner = $3 AND state = 'running' AND ($4::text[] IS NULL OR key = ANY($4::text[]))
      RETURNING key`,
    [o.refund ? 1 : 0, o.now, owner, o.keys ? [...o.keys] : null]);
    await this.#dropOrphans(r.rows.map((x) => x.key));
    return r.rowCount ?? 0;
  }

  /**
   * A job handed back that no item needs any more (its document changed while it ran) is dropped,
   * never to be sent: the same rule enqueue applies to the old job of a changed document.
   */
  async #dropOrphans(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    await this.#q(`WITH dropped AS (
        DELETE FROM jobs j WHERE j.key = ANY($1::text[]) AND j.state = 'pending'
          AND NOT EXISTS (SELECT 1 FROM items i WHERE i.job_key = j.key) RETURNING j.key
      ) DELETE FROM attempts a WHERE a.job_key IN (SELECT key FROM dropped)`, [[...keys]]);
  }

  async saveLaneLimits(row: LaneLimitRow): Promise<void> {
    await this.#q(`INSERT INTO lanes (base_url, model, rpm, tpm, source, learned_at) VALUES ($1, $2, $3, $4, $5, $6)
      ON CONFLICT (base_url, model) DO UPDATE SET rpm = excluded.rpm, tpm = excluded.tpm, source = excluded.source,
        learned_at = excluded.learned_at`, [row.baseUrl, row.model, row.rpm, row.tpm, row.source, row.at]);
  }

  laneLimits(): Promise<LaneLimitRow[]> {
    return this.#read.laneLimits();
  }

  async nextPendingAt(): Promise<number | null> {
    return (await this.#q<{ v: number | null }>(`SELECT min(run_after) AS v FROM jobs WHERE state = 'pending'`)).rows[0]!.v;
  }

  async retryFailed(filter: RetryFailedFilter, now: number): Promise<number> {
    const r = await this.#q(`UPDATE jobs SET state = 'pending', attempts = 0, run_after = 0, error = NULL, finished_at = NULL,
        updated_at = $1
      WHERE state = 'failed' AND ($2::text IS NULL OR strpos(lower(error), lower($2::text)) > 0)
        AND ($3::text IS NULL OR coalesce(error, 'unknown error') = $3::text)`, [now, filter.errorContains ?? null, filter.errorIs ?? null]);
    return r.rowCount ?? 0;
  }

  status(now: number): Promise<StatusSnapshot> {
    return this.#read.status(now);
  }

  item(id: string): Promise<ItemDetail | null> {
    return this.#read.item(id);
  }

  failedItems(error: string, limit: number): Promise<FailedItemRow[]> {
    return this.#read.failedItems(error, limit);
  }

  exportRows(filter: ExportFilter): AsyncIterable<ExportRow> {
    return this.#read.exportRows(filter);
  }

  dumpJobs(): AsyncIterable<JobRow> {
    return this.#copy.dumpJobs();
  }
  dumpItems(): AsyncIterable<ItemRow> {
    return this.#copy.dumpItems();
  }
  dumpAttempts(): AsyncIterable<AttemptRow> {
    return this.#copy.dumpAttempts();
  }
  dumpRuns(): AsyncIterable<RunRow> {
    return this.#copy.dumpRuns();
  }
  loadJobs(rows: readonly JobRow[]): Promise<void> {
    return this.#copy.loadJobs(rows);
  }
  loadItems(rows: readonly ItemRow[]): Promise<void> {
    return this.#copy.loadItems(rows);
  }
  loadAttempts(rows: readonly AttemptRow[]): Promise<void> {
    return this.#copy.loadAttempts(rows);
  }
  loadRuns(rows: readonly RunRow[]): Promise<void> {
    return this.#copy.loadRuns(rows);
  }

  async close(): Promise<void> {
    if (this.#completions.length > 0) this.#flushCompletions();
    await Promise.allSettled([...this.#flushing]);
    if (!this.pool.ended) await this.pool.end();
  }

  #q<R extends pg.QueryResultRow = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<pg.QueryResult<R>> {
    return query<R>(this.pool, sql, params);
  }
}
