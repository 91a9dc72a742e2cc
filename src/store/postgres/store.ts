import { GIVE_BACK_UNSENT_POSTGRES } from '../unsent.js';
import type pg from 'pg';
import { asPending, NO_MONEY, TAKEN_BACK, dropMockAnsweredWhere, mockRunWhere, takeBackWhere } from '../mock-answers.js';
import type {
  AnsweredJob,
  JobToRun,
  JobsToRunOptions,
  AttemptRecord,
  ClaimOptions,
  ClaimResult,
  Committed,
  Completion,
  EnqueueResult,
  EnqueueRow,
  ExportFilter,
  ForgetResult,
  ForgetWhich,
  ItemSeqSpan,
  ExportRow,
  EndLoadOptions,
  FailedItemRow,
  FailedJobCursor,
  FailedJobToResend,
  FolderItemRow,
  ItemSourceRow,
  KeyItemRow,
  ItemDetail,
  JobState,
  LaneLimitRow,
  ReserveRequest,
  ReserveResult,
  RetryFailedFilter,
  RunInfo,
  RunRow,
  RunStats,
  SourceRejections,
  StatusSnapshot,
  Store,
} from '../types.js';
import { connectionError, createPool, inTransaction, parsePgUrl, query } from './connect.js';
import { migrate } from './migrations.js';
import { pgText } from './pg-text.js';
import { LEFT_OUT_SET } from '../spend-amounts.js';
import { clockOffsetMs, refuseClockApart } from './clock.js';
import { foldCounts } from './counts.js';
import { AFTER_ENQUEUE_IN_PROGRESS_SQL, EnqueuePg, forgetItemsPg } from './enqueue.js';
import { BULK_MIN_ROWS, PgBulkLoad } from './bulk-load.js';
import { PgReader } from './read.js';
import { PgCopier } from './copy.js';
import { PgBatches } from './batches.js';
import { NOT_IN_A_LIVE_BATCH } from '../batches.js';
import { PgSpend, settlementParams } from './spend.js';
import { splitClaimed, type RawClaimed } from '../claim-result.js';
import { GroupCommit } from '../group-commit.js';
import { isBackendGone, retryTransient, TRANSIENT_RETRY_MS } from '../transient.js';
import { setTimeout as sleep } from 'node:timers/promises';
import { billedAnswerUsd, latencyOf, rejectionsValues } from '../rows.js';
import { cutOffReader } from '../cut-off-reader.js';
import { KEPT_REJECTED_SOURCES } from '../types.js';
import {
  ATTEMPT_PARAMS,
  attemptParams,
  CLAIM_AROUND_SQL,
  CLAIM_SQL,
  COMPLETE_BATCH,
  COMPLETE_SQL,
  dropOrphans,
  addedCost,
  failSql,
  INSERT_ATTEMPT,
  type PendingCompletion,
} from './statements.js';

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
  readonly copier: PgCopier;
  readonly #spend: PgSpend;
  readonly #plain: EnqueuePg;

  private constructor(pool: pg.Pool, location: string, schema: string) {
    this.pool = pool;
    this.location = location;
    this.schema = schema;
    this.#read = new PgReader(pool);
    this.copier = new PgCopier(pool);
    this.batches = new PgBatches(pool);
    this.#spend = new PgSpend(pool, schema);
    this.#plain = new EnqueuePg(pool);
  }

  /** Connect, create the schema if missing, migrate it forward, and hand back a ready store. */
  /** `existing`: the schema must already hold an llmq queue (the commands that only read or work one never create it). */
  static async open(url: string, options: { existing?: boolean } = {}): Promise<PostgresStore> {
    const target = parsePgUrl(url);
    const pool = createPool(target);
    try {
      await migrate(pool, target.schema, target.location, options.existing ?? false);
    } catch (error) {
      await pool.end().catch(() => {});
      throw connectionError(error, target.location);
    }
    return new PostgresStore(pool, target.location, target.schema);
  }

  async enqueue(rows: readonly EnqueueRow[], now: number): Promise<EnqueueResult> {
    if (this.#load === 'starting') {
      const bulk = rows.length >= BULK_MIN_ROWS && !hasRepeatedIds(rows) ? await PgBulkLoad.begin(this.pool) : null;
      this.#load = bulk ?? 'plain';
    }
    if (this.#load instanceof PgBulkLoad) {
      if (!hasRepeatedIds(rows)) return this.#load.load(rows, now);
      // an id twice in a batch moves its item within the batch: the plain path's work, once the load is in
      await this.#endBulk();
    }
    return this.#plain.enqueue(rows, now);
  }

  /**
   * An enqueue of many batches begins: if its first batch goes into an empty queue, the load is
   * done in bulk, in one transaction (src/store/postgres/bulk-load.ts), and `endLoad` builds the
   * key indexes and commits it.
   */
  beginLoad(): void {
    this.#load = 'starting';
  }

  /** The load ends (also when it failed half way): returns how many jobs counted as new repeated an earlier key of the load. */
  async endLoad(o: EndLoadOptions = {}): Promise<{ repeatedJobs: number }> {
    await this.#endBulk(o);
    const repeatedJobs = this.#repeatedJobs;
    this.#load = 'none';
    this.#repeatedJobs = 0;
    return { repeatedJobs };
  }

  #load: 'none' | 'starting' | 'plain' | PgBulkLoad = 'none';
  #repeatedJobs = 0;

  async #endBulk(o: EndLoadOptions = {}): Promise<void> {
    if (!(this.#load instanceof PgBulkLoad)) return;
    o.onIndexing?.({ resumable: false });
    const bulk = this.#load;
    this.#load = 'plain';
    this.#repeatedJobs += (await bulk.finish()).repeatedJobs;
  }

  async startRun(run: RunInfo): Promise<void> {
    // a run writes and reads leases other machines share: not with a clock far from theirs
    const offset = await clockOffsetMs(this.pool);
    await refuseClockApart(this.pool, offset, this.location);
    await this.#q(
      `WITH run AS (INSERT INTO runs (id, host, pid, started_at, heartbeat_at, options, clock_offset_ms) VALUES ($1, $2, $3, $4, $4, $5, $6))
      INSERT INTO spend (run_id, updated_at) VALUES ($1, $4) ON CONFLICT (run_id) DO NOTHING`,
      [run.id, run.host, run.pid, run.startedAt, JSON.stringify(run.options), offset],
    );
  }

  async heartbeat(runId: string, now: number, leaseUntil: number, stats: RunStats, unsent?: readonly string[]): Promise<readonly string[]> {
    // the jobs it holds that no item needs any more come back from the renewal itself
    const unneeded = await this.#q<{ key: string }>(
      `WITH run AS (UPDATE runs SET heartbeat_at = $1, stats = $2, unsent = $5 WHERE id = $3),
      renewed AS (UPDATE jobs SET lease_expires_at = $4 WHERE lease_owner = $3 AND state = 'running' RETURNING key, orphaned)
      SELECT key FROM renewed WHERE orphaned`,
      [now, JSON.stringify(stats), runId, leaseUntil, unsent?.length ? [...unsent] : null],
    );
    // while runs work, the status counts are folded every heartbeat (see FOLD_COUNTS_SQL)
    await foldCounts(this.pool);
    return unneeded.rows.map((r) => r.key);
  }

  async finishRun(runId: string, now: number, exitReason: string, stats: RunStats): Promise<void> {
    await this.#q(
      `WITH ended AS (
        UPDATE runs SET heartbeat_at = $1, ended_at = $1, exit_reason = $2, stats = $3 WHERE id = $4
      ) UPDATE spend SET ${LEFT_OUT_SET}, updated_at = $1 WHERE run_id = $4 AND in_flight > 0`,
      [now, exitReason, JSON.stringify(stats), runId],
    );
  }

  activeRuns(): Promise<RunRow[]> {
    return this.#read.activeRuns();
  }

  async reclaim(now: number, deadOwners: readonly string[], spared: readonly string[] = []): Promise<number> {
    // asked every few beats of every run: a look first, so that most never wait for an enqueue's turn (#handBack)
    const due =
      deadOwners.length > 0 ||
      ((
        await this.#q(
          `SELECT 1 FROM jobs WHERE state = 'running' AND lease_expires_at < $1 AND ${NOT_IN_A_LIVE_BATCH} AND NOT (coalesce(lease_owner, '') = ANY($2::text[])) LIMIT 1`,
          [now, [...spared]],
        )
      ).rowCount ?? 0) > 0;
    const back = !due
      ? 0
      : await this.#handBack(async (client) => {
          const r = await client.query<{ n: number; keys: string[] }>(
            `WITH back AS (
        UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = $1,
          attempts = attempts - ${GIVE_BACK_UNSENT_POSTGRES}, unsent_deaths = unsent_deaths + ${GIVE_BACK_UNSENT_POSTGRES}
        WHERE state = 'running' AND ((lease_expires_at < $1 AND ${NOT_IN_A_LIVE_BATCH} AND NOT (coalesce(lease_owner, '') = ANY($3::text[])))
          OR lease_owner = ANY($2::text[]))
        RETURNING key
      ), died AS (
        UPDATE runs SET ended_at = $1, exit_reason = 'died' WHERE id = ANY($2::text[]) AND ended_at IS NULL
      ), maybe_billed AS (
        UPDATE spend SET ${LEFT_OUT_SET}, updated_at = $1 WHERE run_id = ANY($2::text[]) AND in_flight > 0
      ) SELECT count(*)::int AS n, coalesce(array_agg(key), '{}') AS keys FROM back`,
            [now, [...deadOwners], [...spared]],
          );
          return { keys: r.rows[0]!.keys, result: r.rows[0]!.n };
        });
    return back + (await this.batches.abandonUnsent(deadOwners, now));
  }

  async claim(o: ClaimOptions): Promise<ClaimResult> {
    const params = [o.maxAttempts, o.now, o.owner, o.leaseUntil, o.limit];
    const skip = o.skipModels ?? [];
    const rows = (await this.#q<RawClaimed>(skip.length ? CLAIM_AROUND_SQL : CLAIM_SQL, skip.length ? [...params, [...skip]] : params))
      .rows;
    return splitClaimed(rows);
  }

  async startRetry(key: string, owner: string, now: number, leaseUntil: number): Promise<number | null> {
    const r = await this.#q<{ attempts: number }>(
      `UPDATE jobs SET attempts = attempts + 1, lease_expires_at = $1, updated_at = $2
      WHERE key = $3 AND state = 'running' AND lease_owner = $4 RETURNING attempts`,
      [leaseUntil, now, key, owner],
    );
    return r.rows[0]?.attempts ?? null;
  }

  /**
   * Answers that arrive in the same turn of the event loop are committed together (group commit),
   * like the SQLite store: one statement stores every answer of the batch, its attempt rows and the
   * `done` states, so it is one transaction, one round trip and one WAL flush for many jobs. Each
   * promise resolves once that statement has committed, and all of them reject if it fails.
   */
  complete(key: string, c: Completion): Promise<boolean> {
    return this.#completions.add({ key, c });
  }

  readonly #completions = new GroupCommit<PendingCompletion, boolean>((batch) => this.#completeBatch(batch), COMPLETE_BATCH);

  async #completeBatch(batch: readonly PendingCompletion[]): Promise<boolean[]> {
    // The first answer for a key marks it done; a second one in the same batch finds it done (false), as if it came later.
    const first = new Map<string, number>();
    batch.forEach((b, i) => {
      if (!first.has(b.key)) first.set(b.key, i);
    });
    const col = <T>(f: (b: PendingCompletion) => T) => batch.map(f);
    const settled = batch.map((b) => settlementParams(b.c.attempt));
    const params = [
      col((b) => b.c.attempt.key),
      col((b) => b.c.attempt.runId),
      col((b) => b.c.attempt.attempt),
      col((b) => b.c.attempt.startedAt),
      col((b) => b.c.attempt.endedAt),
      col((b) => latencyOf(b.c.attempt)),
      col((b) => b.c.attempt.status),
      col((b) => b.c.attempt.outcome),
      col((b) => pgText(b.c.attempt.error)),
      col((b) => b.c.attempt.usage?.promptTokens ?? null),
      col((b) => b.c.attempt.usage?.completionTokens ?? null),
      col((b) => b.key),
      col((b) => pgText(b.c.output)),
      col((b) => pgText(b.c.response)),
      col((b) => b.c.usage.promptTokens),
      col((b) => b.c.usage.completionTokens),
      batch.map((b, i) => first.get(b.key) === i),
      col((b) => b.c.attempt.costUsd ?? null),
      // the settlement of each answer, computed once: reserved, held, spent and unpriced of settlementParams
      ...[0, 1, 2, 5].map((k) => settled.map((p) => p[k])),
    ];
    const until = Date.now() + TRANSIENT_RETRY_MS;
    for (let delay = 100; ; delay = Math.min(delay * 2, 5000)) {
      try {
        const r = await this.#q<{ i: number }>(COMPLETE_SQL, params);
        const updated = new Set(r.rows.map((row) => row.i));
        return batch.map((_, i) => updated.has(i + 1));
      } catch (error) {
        // Answers paid for are not given up to a restarting server (or one whose administrator ended
        // the connection): whether the statement committed is final once the backend is gone, so it
        // is looked up (a read, asked again until the server is back) and written again only if not.
        if (!isBackendGone(error) || Date.now() > until) throw error;
        const stored = await retryTransient(() => this.#storedAnswers(batch), { alsoAfterLoss: true });
        if (stored) return stored;
        await sleep(delay);
      }
    }
  }

  /**
   * Whether a completion batch committed (its attempt rows are there: the statement wrote all or
   * nothing), and then which answers it stored: the first of their key, whose job is done at that
   * answer's end. Null when it did not commit.
   */
  async #storedAnswers(batch: readonly PendingCompletion[]): Promise<boolean[] | null> {
    const found = await this.#q<{ n: number }>(
      `SELECT count(*)::int AS n FROM attempts a
        JOIN unnest($1::text[], $2::text[], $3::int[], $4::bigint[]) AS t(job_key, run_id, attempt, started_at)
        ON a.job_key = t.job_key AND a.run_id = t.run_id AND a.attempt = t.attempt AND a.started_at = t.started_at`,
      [
        batch.map((b) => b.c.attempt.key),
        batch.map((b) => b.c.attempt.runId),
        batch.map((b) => b.c.attempt.attempt),
        batch.map((b) => b.c.attempt.startedAt),
      ],
    );
    if (found.rows[0]!.n === 0) return null;
    const jobs = await this.#q<{ key: string; finished_at: string | null }>(
      `SELECT key, finished_at FROM jobs WHERE key = ANY($1::text[]) AND state = 'done'`,
      [batch.map((b) => b.key)],
    );
    const doneAt = new Map(jobs.rows.map((j) => [j.key, j.finished_at === null ? null : Number(j.finished_at)]));
    const seen = new Set<string>();
    return batch.map((b) => {
      const first = !seen.has(b.key);
      seen.add(b.key);
      return first && doneAt.get(b.key) === b.c.attempt.endedAt;
    });
  }

  // updated_at left as the claim or the retry's start set it: a dead run's reclaim reads it (unsent.ts)
  async recordAttempt(a: AttemptRecord, o: { countAttempt: boolean; error: string | null }): Promise<void> {
    const [error, refund, billed] = [ATTEMPT_PARAMS + 1, ATTEMPT_PARAMS + 2, ATTEMPT_PARAMS + 3];
    await this.#q(
      `WITH ${INSERT_ATTEMPT}
      UPDATE jobs SET error = coalesce($${error}, error), attempts = attempts - $${refund}, cost_usd = ${addedCost(`$${billed}`)}
      WHERE key = $1 AND state = 'running' AND lease_owner = $2`,
      [...attemptParams(a), pgText(o.error), o.countAttempt ? 0 : 1, billedAnswerUsd(a)],
    );
  }

  async fail(key: string, owner: string, error: string, attempt: AttemptRecord | null, now: number): Promise<void> {
    await this.#handBack(async (client) => {
      const r = attempt
        ? await client.query(`WITH ${INSERT_ATTEMPT} ${failSql(ATTEMPT_PARAMS + 1)}`, [
            ...attemptParams(attempt),
            pgText(error),
            now,
            key,
            owner,
            billedAnswerUsd(attempt),
          ])
        : await client.query(failSql(1), [pgText(error), now, key, owner, null]);
      return { keys: r.rowCount === 1 ? [key] : [], result: undefined };
    });
  }

  async release(owner: string, o: { refund: boolean; now: number; keys?: readonly string[] }): Promise<number> {
    // With `keys`, only those jobs (the ones whose request never went out); without, every job the run
    // holds: asked by an idle run each time it looks whether it is done, so a look first (as reclaim)
    if (
      !o.keys &&
      ((await this.#q(`SELECT 1 FROM jobs WHERE lease_owner = $1 AND state = 'running' LIMIT 1`, [owner])).rowCount ?? 0) === 0
    )
      return 0;
    return this.#handBack(async (client) => {
      const r = await client.query<{ key: string }>(
        `UPDATE jobs SET state = 'pending', attempts = greatest(attempts - $1, 0), lease_owner = NULL,
        lease_expires_at = NULL, updated_at = $2 WHERE lease_owner = $3 AND state = 'running' AND ($4::text[] IS NULL OR key = ANY($4::text[]))
        RETURNING key`,
        [o.refund ? 1 : 0, o.now, owner, o.keys ? [...o.keys] : null],
      );
      return { keys: r.rows.map((x) => x.key), result: r.rowCount ?? 0 };
    });
  }

  /**
   * A change that hands back or fails jobs, and the drop of those no item needs any more, in one
   * transaction: apart, a process killed or a connection lost between the two left such a job
   * pending, to be sent and paid for. The enqueue's turn is waited for first, before the jobs' rows
   * are locked, as a batch hands its jobs back (`requeueHeld`): an enqueue in progress may wait on those rows, while the
   * drop waits on its turn.
   */
  async #handBack<R>(change: (client: pg.PoolClient) => Promise<{ keys: readonly string[]; result: R }>): Promise<R> {
    return inTransaction(this.pool, async (client) => {
      await client.query(AFTER_ENQUEUE_IN_PROGRESS_SQL);
      const { keys, result } = await change(client);
      await dropOrphans(client, keys, { turnTaken: true });
      return result;
    });
  }

  /**
   * A job handed back or failed that no item needs any more (its document changed while it ran) is
   * dropped, never to be sent (a failed one kept would be sent again by retry-failed): the same rule
   * enqueue applies to the old job of a changed document.
   */
  async #dropOrphans(keys: readonly string[]): Promise<void> {
    if (keys.length === 0) return;
    await inTransaction(this.pool, (client) => dropOrphans(client, keys));
  }

  async saveLaneLimits(row: LaneLimitRow): Promise<void> {
    await this.#q(
      `INSERT INTO lanes (base_url, model, rpm, tpm, source, learned_at) VALUES ($1, $2, $3, $4, $5, $6)
      ON CONFLICT (base_url, model) DO UPDATE SET rpm = excluded.rpm, tpm = excluded.tpm, source = excluded.source,
        learned_at = excluded.learned_at`,
      [row.baseUrl, row.model, row.rpm, row.tpm, row.source, row.at],
    );
  }

  laneLimits(): Promise<LaneLimitRow[]> {
    return this.#read.laneLimits();
  }

  reserve(request: ReserveRequest): Promise<ReserveResult> {
    return this.#spend.reserve(request);
  }

  unreserve(runId: string, usd: number, now: number): Promise<void> {
    return this.#spend.unreserve(runId, usd, now);
  }

  committed(runId: string): Promise<Committed> {
    return this.#spend.committed(runId);
  }

  async nextPendingAt(): Promise<number | null> {
    return (await this.#q<{ v: number | null }>(`SELECT min(run_after) AS v FROM jobs WHERE state = 'pending'`)).rows[0]!.v;
  }

  forgetItems(which: ForgetWhich, o: { now: number; dryRun?: boolean }): Promise<ForgetResult> {
    return forgetItemsPg(this.pool, which, o);
  }

  async keepRejections(sources: readonly SourceRejections[]): Promise<void> {
    // an input named twice, the later: one statement may not change a row twice
    const rows = [...new Map(sources.map((r) => [r.source, r])).values()].map(rejectionsValues);
    await inTransaction(this.pool, async (db) => {
      if (rows.length) {
        await db.query(
          `WITH given AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[]) AS g (source, rejected, first, at)),
            cleared AS (DELETE FROM rejections WHERE source IN (SELECT source FROM given WHERE rejected = 0))
          INSERT INTO rejections (source, rejected, first, at) SELECT * FROM given WHERE rejected > 0
          ON CONFLICT (source) DO UPDATE SET rejected = EXCLUDED.rejected, first = EXCLUDED.first, at = EXCLUDED.at`,
          [0, 1, 2, 3].map((i) => rows.map((r) => r[i])),
        );
      }
      await db.query(
        `DELETE FROM rejections WHERE source NOT IN (SELECT source FROM rejections ORDER BY at DESC, source COLLATE "C" LIMIT $1)`,
        [KEPT_REJECTED_SOURCES],
      );
    });
  }

  async retryFailed(filter: RetryFailedFilter, now: number): Promise<number> {
    // failed jobs no item needs, which versions before `fail` dropped them left behind: gone, never retried
    const orphans = await this.#q<{ key: string }>(
      `SELECT key FROM jobs j WHERE j.state = 'failed' AND NOT EXISTS (SELECT 1 FROM items i WHERE i.job_key = j.key)`,
    );
    await this.#dropOrphans(orphans.rows.map((r) => r.key));
    const r = await this.#q(
      `UPDATE jobs SET state = 'pending', attempts = 0, run_after = 0, error = NULL, finished_at = NULL,
        updated_at = $1
      WHERE state = 'failed' AND ($2::text IS NULL OR strpos(lower(error), lower($2::text)) > 0)
        AND ($3::text IS NULL OR coalesce(error, 'unknown error') = $3::text)
        AND ($4::text IS NULL OR strpos(lower(coalesce(error, '')), lower($4::text)) = 0)`,
      [now, filter.errorContains ?? null, filter.errorIs ?? null, filter.errorLacks ?? null],
    );
    return r.rowCount ?? 0;
  }

  async takeBackMockAnswers(now: number, quietSince: number): Promise<number> {
    return inTransaction(this.pool, async (db) => {
      // the mock runs' rows locked: two real runs starting together take each answer back once; and
      // with no mock run to look at (nearly always), nothing else is read
      const runs = (
        await db.query<{ id: string }>(`SELECT id FROM runs WHERE ${mockRunWhere('postgres', { quietSince: '$1' })} FOR UPDATE`, [
          quietSince,
        ])
      ).rows.map((r) => r.id);
      if (runs.length === 0) return 0;
      const set = '(SELECT unnest($2::text[]))';
      const back = await db.query(`UPDATE jobs SET ${asPending('postgres')}, updated_at = $1 WHERE ${takeBackWhere('postgres', set)}`, [
        now,
        runs,
      ]);
      await db.query(
        `WITH dropped AS (DELETE FROM jobs WHERE ${dropMockAnsweredWhere('postgres', '(SELECT unnest($1::text[]))')} RETURNING key)
        DELETE FROM attempts WHERE job_key IN (SELECT key FROM dropped)`,
        [runs],
      );
      // only those that ended: one gone quiet may yet answer more
      await db.query(
        `UPDATE runs SET options = (options::jsonb || jsonb_build_object('${TAKEN_BACK}', $1::bigint))::text
        WHERE id IN ${set} AND ended_at IS NOT NULL`,
        [now, runs],
      );
      await db.query(`UPDATE spend SET ${NO_MONEY}, updated_at = $1 WHERE run_id IN ${set}`, [now, runs]);
      return back.rowCount ?? 0;
    });
  }

  status(): Promise<StatusSnapshot> {
    return this.#read.status();
  }

  item(id: string): Promise<ItemDetail | null> {
    return this.#read.item(id);
  }

  stateCounts(): Promise<Record<JobState, number>> {
    return this.#read.stateCounts();
  }

  itemStates(ids: readonly string[]): Promise<Array<JobState | null>> {
    return this.#read.itemStates(ids);
  }

  folderItems(folder: string, limit: number, afterSeq?: number): Promise<FolderItemRow[]> {
    return this.#read.folderItems(folder, limit, afterSeq);
  }

  lineItemIds(file: string, limit: number, afterId?: string): Promise<string[]> {
    return this.#read.lineItemIds(file, limit, afterId);
  }

  itemsEndingIn(name: string, limit: number): Promise<ItemSourceRow[]> {
    return this.#read.itemsEndingIn(name, limit);
  }

  itemsByKeyPrefix(prefix: string, limit: number, afterKey?: string): Promise<KeyItemRow[]> {
    return this.#read.itemsByKeyPrefix(prefix, limit, afterKey);
  }

  failedItems(error: string, limit: number): Promise<FailedItemRow[]> {
    return this.#read.failedItems(error, limit);
  }

  failedJobsToResend(filter: RetryFailedFilter, after: FailedJobCursor | null, limit: number): Promise<FailedJobToResend[]> {
    return this.#read.failedJobsToResend(filter, after, limit);
  }

  async cutOffAnswersToResend(
    after: FailedJobCursor | null,
    limit: number,
  ): Promise<{ jobs: FailedJobToResend[]; last: FailedJobCursor | null }> {
    return this.#read.cutOffAnswersToResend(after, limit, await cutOffReader());
  }

  exportPages(filter: ExportFilter): AsyncIterable<readonly ExportRow[]> {
    return this.#read.exportPages(filter);
  }

  itemSeqSpan(): Promise<ItemSeqSpan | null> {
    return this.#read.itemSeqSpan();
  }

  jobsToRun(now: number, o?: JobsToRunOptions): AsyncIterable<JobToRun> {
    return this.#read.jobsToRun(now, o);
  }

  async answered(model: string, o: { limit: number; withRequest: boolean }): Promise<AnsweredJob[]> {
    return this.#read.answered(model, o);
  }

  /** A schema has no file that could be removed under it. */
  queueFileChange(): null {
    return null;
  }

  async close(): Promise<void> {
    // a load left open is committed, as each batch of a plain enqueue is
    await this.#endBulk();
    await this.#completions.drain();
    if (!this.pool.ended) await this.pool.end();
  }

  #q<R extends pg.QueryResultRow = Record<string, unknown>>(sql: string, params: unknown[] = []): Promise<pg.QueryResult<R>> {
    return query<R>(this.pool, sql, params);
  }
}

function hasRepeatedIds(rows: readonly EnqueueRow[]): boolean {
  return new Set(rows.map((r) => r.itemId)).size !== rows.length;
}
