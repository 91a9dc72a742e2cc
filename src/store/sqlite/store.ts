import { QueueGoneError } from '../../errors.js';
import { GIVE_BACK_UNSENT_SQLITE } from '../unsent.js';
import { failsOnItsOwnSql } from '../own-failures.js';
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
import { KEPT_REJECTED_SOURCES, sourceFile, type EndLoadOptions, type FromAnotherFile, type MovedItem } from '../types.js';
import { immediateTxn, openSqlite, type Db, type OpenSqliteOptions } from './open.js';
import { SqliteReader } from './read.js';
import { SqliteCopier } from './copy.js';
import { SqliteBatches } from './batches.js';
import { NOT_IN_A_LIVE_BATCH } from '../batches.js';
import { SqliteSpend } from './spend.js';
import type { Checkpointer } from './checkpointer.js';
import { stoppedRunsText } from './stopped-writer.js';
import { RUN_DIED_TEXT, splitClaimed, type RawClaimed } from '../claim-result.js';
import { asPending, NO_MONEY, TAKEN_BACK, dropMockAnsweredWhere, mockRunWhere, takeBackWhere } from '../mock-answers.js';
import { GroupCommit } from '../group-commit.js';
import { queueFileChangeText, queueFileWatch } from './queue-file.js';
import { attemptValues, billedAnswerUsd, latencyOf, rejectionsValues } from '../rows.js';
import {
  attemptsOf,
  DROP_ATTEMPTS_SQL,
  INSERT_ATTEMPT_OF_SEQ_SQL,
  INSERT_ATTEMPT_SQL,
  insertAttemptValues,
  orphanDropper,
} from './attempts.js';
import { BULK_MIN_ROWS, beginBulkLoad, finishBulkLoad, finishDeadBulkLoad, settleBulkLoad } from './bulk-load.js';
import type { BulkLoadWriter } from './load-writer.js';
import { INSERT_REQUEST_SQL, REQUEST_KEPT_APART, requestOf } from './requests.js';
import { withSuperseding, type Superseding } from '../superseded.js';
import { cutOffReader } from '../cut-off-reader.js';
import { CountMoves, countsWriter, type CountedJob } from './count-moves.js';
import { unplannedLimit } from './unplanned-limit.js';

/** How often a bulk load's WAL is copied into the database file, from a thread of its own (checkpointer.ts). */
const LOAD_CHECKPOINT_EVERY_MS = 40;

/** Thrown to roll a dry run's transaction back. */
const DRY_RUN = Symbol('dry run');

/**
 * The items of a source (ForgetWhich, types.ts) in SQLite, `@source` the path: the file's own, the
 * files under it as a folder, its lines as a JSONL file (`file:N`, digits only: `report:v2.txt` is
 * another file).
 */
const SOURCE_ITEMS_WHERE_SQLITE = `(source = @source OR substr(source, 1, length(@source) + 1) = @source || '/'
  OR (substr(source, 1, length(@source) + 1) = @source || ':' AND length(source) > length(@source) + 1
    AND substr(source, length(@source) + 2) NOT GLOB '*[^0-9]*'))`;

/** A job this store's claim started and that is not answered, failed or given back yet. */
interface Started {
  readonly seq: number;
  readonly model: string;
  readonly attempts: number;
}

/** Made on first use: a statement, or a transaction (`this.db` is not set yet when fields are initialised). */
function lazy<T>(make: () => T): () => T {
  let made: T | undefined;
  return () => (made ??= make());
}

/** The claim's change to each job it takes: start it, or fail it when its attempts are used up (a crash loop). */
const CLAIM_SET = `UPDATE jobs SET
  state = CASE WHEN attempts >= @max THEN 'failed' ELSE 'running' END,
  attempts = CASE WHEN attempts >= @max THEN attempts ELSE attempts + 1 END,
  error = CASE WHEN attempts >= @max
    THEN 'gave up after ' || attempts || iif(attempts = 1, ' attempt', ' attempts') || iif(
      EXISTS (SELECT 1 FROM attempts WHERE job_seq = jobs.seq AND attempt = jobs.attempts AND outcome IN ('retry', 'failed', 'done')),
      '; last error: ' || coalesce(error, 'unknown'),
      ': ${RUN_DIED_TEXT}' || coalesce(' (last error: ' || error || ')', ''))
    ELSE error END,
  finished_at = CASE WHEN attempts >= @max THEN @now ELSE NULL END,
  lease_owner = CASE WHEN attempts >= @max THEN NULL ELSE @owner END,
  lease_expires_at = CASE WHEN attempts >= @max THEN NULL ELSE @leaseUntil END,
  counts_kept = CASE WHEN attempts >= @max THEN counts_kept ELSE counts_kept + 1 END,
  updated_at = @now`;
/**
 * The job as it is now, with what it weighs in the status counts (a started one's counts are moved by
 * the claim, `CountMoves`; a failed one's by the trigger). Read as arrays (`ClaimedRow`): the driver
 * builds an object per row a property at a time, which cost more than the rest of the claim's work.
 */
const CLAIM_RETURNING = `RETURNING seq, key, ${requestOf('jobs')}, model, priority, attempts, state, prompt_tokens, completion_tokens, cost_usd,
  ${failsOnItsOwnSql(attemptsOf('jobs'))}`;
type ClaimedRow = [
  seq: number,
  key: string,
  request: string,
  model: string,
  priority: number,
  attempts: number,
  state: string,
  promptTokens: number | null,
  completionTokens: number | null,
  costUsd: number | null,
  failsOnItsOwn: number,
];

/**
 * An answer's change to its job (complete); the values in order: output, response, tokens in and out, cost, latency, finished and
 * updated at. The cost adds to what the job's rejected answers cost before it (`billedAnswerUsd`).
 */
const ANSWER_SET = `state = 'done', output = ?, response = ?, prompt_tokens = ?, completion_tokens = ?, cost_usd = ? + coalesce(cost_usd, 0),
  latency_ms = ?, error = NULL, lease_owner = NULL, lease_expires_at = NULL, finished_at = ?, updated_at = ?`;

/**
 * The embedded store: one SQLite file. better-sqlite3 is synchronous, so every method here runs
 * its transaction to the end before returning; none is ever held across an `await`.
 */
export class SqliteStore implements Store {
  readonly kind = 'sqlite' as const;
  readonly location: string;
  readonly db: Db;
  readonly batches: SqliteBatches;
  readonly #read: SqliteReader;
  readonly copier: SqliteCopier;
  readonly #spend: SqliteSpend;
  readonly #s;

  /** What became of the file opened (`queueFileWatch`); null in memory. */
  readonly #fileChange: (() => 'removed' | 'replaced' | null) | null;

  constructor(path: string, options: OpenSqliteOptions = {}) {
    this.location = path;
    this.db = openSqlite(path, options);
    this.#fileChange = path === ':memory:' ? null : queueFileWatch(path);
    finishDeadLoadIfWritable(this.db);
    this.#read = new SqliteReader(this.db);
    // a copy writes as an enqueue does: its pragmas (ENQUEUE_PRAGMAS), and in bulk into an empty file (copy.ts)
    this.copier = new SqliteCopier(
      this.db,
      () => {
        settleBulkLoad(this.db, this.location);
        this.#applyEnqueuePragmas();
      },
      { bulk: path !== ':memory:' },
    );
    this.batches = new SqliteBatches(this.db);
    this.#spend = new SqliteSpend(this.db);
    const db = this.db;
    // SQLite's lower() folds ASCII only; fold like JavaScript (and PostgreSQL in a UTF-8 locale) so
    // `retry-failed --error` is case-insensitive for any text.
    db.function('llmq_lower', { deterministic: true }, (s: unknown) => (typeof s === 'string' ? s.toLowerCase() : s));
    this.#s = {
      // prepared when first used: ON CONFLICT (key) needs jobs_key, which a bulk load in progress has dropped
      insertJob: lazy(() =>
        db.prepare(`INSERT INTO jobs (key, request, model, priority, created_at, updated_at)
        VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`),
      ),
      insertRequest: db.prepare(INSERT_REQUEST_SQL),
      // enqueue --priority (EnqueueRow.setsPriority): a job waiting, or failed, takes the priority asked for, unless
      // items this call does not name (@ids) need it too and it would go later (prepared when used: jobs_key, as insertJob)
      reprioritize: lazy(() =>
        db.prepare(`UPDATE jobs SET priority = @priority, updated_at = @now WHERE key = @key AND state IN ('pending', 'failed') AND priority <> @priority
          AND (@priority < priority OR NOT EXISTS (SELECT 1 FROM items WHERE job_key = @key AND id NOT IN (SELECT value FROM json_each(@ids))))`),
      ),
      itemJob: db.prepare('SELECT job_key, source, meta FROM items WHERE id = ?').raw(),
      requestOfJob: db.prepare(`SELECT ${requestOf('jobs')} FROM jobs WHERE key = ?`).pluck(),
      insertItem: db.prepare(`INSERT INTO items (id, source, job_key, meta, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`),
      moveItem: db.prepare('UPDATE items SET job_key = ?, source = ?, meta = ?, updated_at = ? WHERE id = ?'),
      refreshItem: db.prepare('UPDATE items SET source = ?, meta = ?, updated_at = ? WHERE id = ?'),
      dropAttempts: db.prepare(DROP_ATTEMPTS_SQL),
      // an old job of moved items, answered (or being answered), that no item points at now: marked,
      // so status counts done over the jobs items need (migration 15)
      markOrphaned: db.prepare(`UPDATE jobs SET orphaned = 1 WHERE key = ? AND state IN ('done', 'running')
          AND NOT EXISTS (SELECT 1 FROM items WHERE job_key = jobs.key)`),
      // an item points at the job again (its old text enqueued again): its answer is needed once more
      adopt: db.prepare('UPDATE jobs SET orphaned = 0 WHERE key = ?'),
      // a job there already that an item now points at: adopted if orphaned, counted if failed
      existingJob: db.prepare('SELECT state, orphaned FROM jobs WHERE key = ?').raw(),
      claim: db
        .prepare(`${CLAIM_SET}
        WHERE seq IN (SELECT seq FROM jobs WHERE state = 'pending' AND run_after <= @now ORDER BY priority, seq LIMIT ${unplannedLimit('@limit')})
        ${CLAIM_RETURNING}`)
        .raw(),
      claimSeqs: db
        .prepare(`${CLAIM_SET}
        WHERE seq IN (SELECT value FROM json_each(@seqs))
        ${CLAIM_RETURNING}`)
        .raw(),
      // a loose index scan of jobs_claim_model: each model with pending work, in one probe per model
      // (named: without ANALYZE statistics SQLite prefers jobs_age and sorts every pending job)
      firstPendingModel: db
        .prepare(`SELECT model FROM jobs INDEXED BY jobs_claim_model WHERE state = 'pending' ORDER BY model LIMIT 1`)
        .pluck(),
      nextPendingModel: db
        .prepare(`SELECT model FROM jobs INDEXED BY jobs_claim_model WHERE state = 'pending' AND model > ? ORDER BY model LIMIT 1`)
        .pluck(),
      pendingOfModel: db.prepare(`SELECT seq, priority FROM jobs INDEXED BY jobs_claim_model
        WHERE state = 'pending' AND model = ? AND run_after <= ? ORDER BY priority, seq LIMIT ${unplannedLimit('?')}`),
      startRetry: db
        .prepare(`UPDATE jobs SET attempts = attempts + 1, lease_expires_at = ?, updated_at = ?
        WHERE key = ? AND state = 'running' AND lease_owner = ? RETURNING attempts`)
        .pluck(),
      // the answer's latency here, in the row this writes anyway: the attempt's insert after it then finds it
      // kept and leaves the row alone (attempts_latency, migration 11)
      complete: db.prepare(`UPDATE jobs SET ${ANSWER_SET} WHERE key = ? AND state <> 'done' RETURNING seq`).pluck(),
      // A job this store claimed, by its rowid, checked against the key (a seq could be reused once its
      // job is dropped); its counts moved by the caller (CountMoves) from what the claim saw, so only
      // while the job is as the claim left it. Any other job is answered by key (complete).
      answerClaimed: db.prepare(`UPDATE jobs SET ${ANSWER_SET}, counts_kept = counts_kept + 1
        WHERE seq = ? AND key = ? AND state = 'running' AND model = ? AND attempts = ?
          AND prompt_tokens IS NULL AND completion_tokens IS NULL AND cost_usd IS NULL`),
      insertAttempt: db.prepare(INSERT_ATTEMPT_SQL),
      insertAttemptOfSeq: db.prepare(INSERT_ATTEMPT_OF_SEQ_SQL),
      // updated_at left as the claim or the retry's start set it: a dead run's reclaim reads it (unsent.ts)
      noteError: db
        .prepare(`UPDATE jobs SET error = coalesce(?, error), attempts = attempts - ?, cost_usd = coalesce(cost_usd + ?, ?, cost_usd)
          WHERE key = ? AND state = 'running' AND lease_owner = ? RETURNING attempts`)
        .pluck(),
      // the cost of a billed answer its last try rejected (`billedAnswerUsd`) added, given twice
      fail: db.prepare(`UPDATE jobs SET state = 'failed', error = ?, cost_usd = coalesce(cost_usd + ?, ?, cost_usd),
          lease_owner = NULL, lease_expires_at = NULL, finished_at = ?, updated_at = ? WHERE key = ? AND state = 'running' AND lease_owner = ?`),
      release: db
        .prepare(`UPDATE jobs SET state = 'pending', attempts = max(attempts - ?, 0), lease_owner = NULL,
          lease_expires_at = NULL, updated_at = ? WHERE lease_owner = ? AND state = 'running' RETURNING key`)
        .pluck(),
      releaseOne: db
        .prepare(`UPDATE jobs SET state = 'pending', attempts = max(attempts - ?, 0), lease_owner = NULL,
          lease_expires_at = NULL, updated_at = ? WHERE lease_owner = ? AND state = 'running' AND key = ? RETURNING key`)
        .pluck(),
      reclaimExpired: db
        .prepare(`UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = ?,
          attempts = attempts - ${GIVE_BACK_UNSENT_SQLITE}, unsent_deaths = unsent_deaths + ${GIVE_BACK_UNSENT_SQLITE}
        WHERE state = 'running' AND lease_expires_at < ? AND ${NOT_IN_A_LIVE_BATCH}
          AND coalesce(lease_owner, '') NOT IN (SELECT value FROM json_each(?)) RETURNING key`)
        .pluck(),
      reclaimOwner: db
        .prepare(`UPDATE jobs SET state = 'pending', lease_owner = NULL, lease_expires_at = NULL, updated_at = ?,
          attempts = attempts - ${GIVE_BACK_UNSENT_SQLITE}, unsent_deaths = unsent_deaths + ${GIVE_BACK_UNSENT_SQLITE}
        WHERE lease_owner = ? AND state = 'running' RETURNING key`)
        .pluck(),
      dropOrphans: orphanDropper(db),
      anySuperseded: db.prepare('SELECT 1 FROM superseded LIMIT 1').pluck(),
      supersedingOf: db.prepare(`SELECT s.key, j.key AS by, ${requestOf('j')} AS request FROM superseded s JOIN jobs j ON j.key = s.by_key
        WHERE s.key IN (SELECT value FROM json_each(?))`),
      supersede: db.prepare('INSERT INTO superseded (key, by_key) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET by_key = excluded.by_key'),
      resupersede: db.prepare('UPDATE superseded SET by_key = ? WHERE by_key = ?'),
      endRun: db.prepare('UPDATE runs SET ended_at = ?, exit_reason = ? WHERE id = ? AND ended_at IS NULL'),
      mockRuns: db.prepare(`SELECT id FROM runs WHERE ${mockRunWhere('sqlite', { quietSince: '?' })}`).pluck(),
      takeBackMock: db.prepare(
        `UPDATE jobs SET ${asPending('sqlite')}, updated_at = @now WHERE ${takeBackWhere('sqlite', '(SELECT value FROM json_each(@runs))')}`,
      ),
      dropMockAnswered: db
        .prepare(`DELETE FROM jobs WHERE ${dropMockAnsweredWhere('sqlite', '(SELECT value FROM json_each(@runs))')} RETURNING seq, key`)
        .raw(),
      // only those that ended: one gone quiet may yet answer more
      markTakenBack: db.prepare(`UPDATE runs SET options = json_set(options, '$.${TAKEN_BACK}', @now)
        WHERE id IN (SELECT value FROM json_each(@runs)) AND ended_at IS NOT NULL`),
      mockMoneyGone: db.prepare(`UPDATE spend SET ${NO_MONEY}, updated_at = @now WHERE run_id IN (SELECT value FROM json_each(@runs))`),
      failedOrphans: db
        .prepare(`SELECT key FROM jobs WHERE state = 'failed' AND NOT EXISTS (SELECT 1 FROM items WHERE job_key = jobs.key)`)
        .pluck(),
      keepRejections: db.prepare('INSERT OR REPLACE INTO rejections (source, rejected, first, at) VALUES (?, ?, ?, ?)'),
      dropRejections: db.prepare('DELETE FROM rejections WHERE source = ?'),
      dropOldRejections: db.prepare(
        'DELETE FROM rejections WHERE source NOT IN (SELECT source FROM rejections ORDER BY at DESC, source LIMIT ?)',
      ),
      forgetItem: db.prepare('DELETE FROM items WHERE id = ? RETURNING job_key').pluck(),
      forgetSource: db.prepare(`DELETE FROM items WHERE ${SOURCE_ITEMS_WHERE_SQLITE} RETURNING id, job_key`).raw(),
      // what enqueues of the source, or of a folder in it, rejected: no longer a thing to fix
      forgetRejections: db.prepare(
        `DELETE FROM rejections WHERE source = @source OR substr(source, 1, length(@source) + 1) = @source || '/'`,
      ),
      retryFailed: db.prepare(`UPDATE jobs SET state = 'pending', attempts = 0, run_after = 0, error = NULL,
          finished_at = NULL, updated_at = @now
        WHERE state = 'failed' AND (@text IS NULL OR instr(llmq_lower(error), llmq_lower(@text)) > 0)
          AND (@exact IS NULL OR coalesce(error, 'unknown error') = @exact)
          AND (@lacks IS NULL OR instr(llmq_lower(coalesce(error, '')), llmq_lower(@lacks)) = 0)`),
      startRun: db.prepare(`INSERT INTO runs (id, host, pid, started_at, heartbeat_at, options) VALUES (?, ?, ?, ?, ?, ?)`),
      runHeartbeat: db.prepare('UPDATE runs SET heartbeat_at = ?, stats = ?, unsent = ? WHERE id = ?'),
      renewLeases: db.prepare(`UPDATE jobs SET lease_expires_at = ? WHERE lease_owner = ? AND state = 'running'`),
      // of them, those no item needs any more (jobs_orphaned: the running ones of it are few)
      unneededHeld: db.prepare(`SELECT key FROM jobs WHERE orphaned = 1 AND state = 'running' AND lease_owner = ?`).pluck(),
      finishRun: db.prepare('UPDATE runs SET heartbeat_at = ?, ended_at = ?, exit_reason = ?, stats = ? WHERE id = ?'),
      nextPending: db.prepare(`SELECT min(run_after) FROM jobs WHERE state = 'pending'`).pluck(),
      writeCounts: countsWriter(db),
      saveLane: db.prepare(`INSERT INTO lanes (base_url, model, rpm, tpm, source, learned_at) VALUES (?, ?, ?, ?, ?, ?)
        ON CONFLICT (base_url, model) DO UPDATE SET rpm = excluded.rpm, tpm = excluded.tpm, source = excluded.source,
          learned_at = excluded.learned_at`),
    };
  }

  async enqueue(rows: readonly EnqueueRow[], now: number): Promise<EnqueueResult> {
    this.#applyEnqueuePragmas();
    if (this.#load === 'starting') this.#load = this.#startLoad(rows.length, now);
    if (this.#load !== 'bulk') return this.enqueueSync(rows, now);
    if (!this.#loader) {
      // loaded here: only a bulk load needs the writer thread (and node:worker_threads)
      const [{ BulkLoadWriter }, { Checkpointer }] = await Promise.all([import('./load-writer.js'), import('./checkpointer.js')]);
      this.#loader ??= new BulkLoadWriter(this.location, SqliteStore.ENQUEUE_PRAGMAS);
      // The writer thread's own checkpoint (every 64 MB of WAL) copied a batch's worth of pages or
      // more while the next batch waited: 200-280 ms, three times in 100,000 documents. Copied
      // from a third thread as the batches commit, the writer's checkpoint finds them done.
      this.#checkpointer ??= new Checkpointer(this.db, this.location, { everyMs: LOAD_CHECKPOINT_EVERY_MS });
    }
    // counted before the wait, so the rows (now copied to the writer) are not kept alive by it
    const stored = {
      newJobs: rows.length,
      newItems: rows.length,
      movedItems: 0,
      unchanged: 0,
      droppedJobs: 0,
      orphanedAnswers: 0,
      reprioritized: 0,
    };
    await this.#loader.write(rows, now);
    return stored;
  }

  /**
   * An enqueue of many batches begins: if its first batch goes into an empty queue, the load is
   * done in bulk (src/store/sqlite/bulk-load.ts) and `endLoad` builds the key indexes.
   */
  // arrow functions, like enqueueSync: a caller's Proxy around the store still reaches its private state
  readonly beginLoad = (): void => {
    this.#load = 'starting';
  };

  /** The load ends (also when it failed half way): returns how many jobs counted as new repeated an earlier key of the load. */
  readonly endLoad = async (o: EndLoadOptions = {}): Promise<{ repeatedJobs: number }> => {
    const bulk = this.#load === 'bulk';
    this.#load = 'none';
    if (!bulk) return { repeatedJobs: 0 };
    const loader = this.#loader;
    this.#loader = null;
    try {
      await loader?.close();
      o.onIndexing?.({ resumable: true });
      return { repeatedJobs: finishBulkLoad(this.db) };
    } finally {
      this.db.pragma('foreign_keys = ON');
      // Stopped after the index builds: each commits as one transaction, and the thread copies the
      // first's pages while the second is built, so close has less left (100,000 documents: 4%
      // sooner than stopping it before them). Meanwhile this connection checkpoints past the
      // Checkpointer's 4000 pages instead of the enqueue's 16,384.
      await this.#stopCheckpointer();
    }
  };

  #load: 'none' | 'starting' | 'bulk' | 'plain' = 'none';
  /** A bulk load's writer thread, from its first batch to its end. */
  #loader: BulkLoadWriter | null = null;

  /**
   * How a connection that enqueues uses SQLite. The job key and `items.job_key` indexes take random
   * keys (SHA-256), so each row lands on a random page of each. With the default 2 MiB cache nearly
   * every such page is read from the file again; 64 MiB holds both indexes whole up to about 300,000
   * jobs and keeps the process far under 300 MB (allocated as used). Measured on the enqueue
   * statements alone, 300,000 rows: CPU -20%, bytes read -68%; 128 MiB gained nothing more. Each commit writes the pages it dirtied to the WAL and, past
   * `wal_autocheckpoint` pages, copies them into the database and syncs both: a batch dirties
   * thousands of index pages, so the default 1,000 checkpoints after every batch and copies a page
   * again each time a later batch touches it. A checkpoint every ~20,000 pages wrote 22% fewer bytes
   * and read 43% fewer in the same measure, with the same durability (the disk is the bottleneck here).
   * A bulk load into an empty queue (bulk-load.ts) has neither index while its rows go in; these
   * settings serve an enqueue into a queue that already has jobs, and the index builds at its end.
   *
   * Each insert there fires the count triggers and checks the item's foreign key, so SQLite keeps a
   * statement journal (the pages the statement changes, to undo it alone); past 64 KiB, which a
   * B-tree split reaches, it moves to a temporary file for the rest of the transaction. Resuming an
   * interrupted enqueue of 300,000 documents (113,000 stored) wrote 1.7 million pages to that file,
   * and took 20.8 s (8 s of it in the kernel); with the journal in memory, 12.3 s. The index builds
   * after a bulk load set it back to a file (finishBulkLoad): their sorts may be larger than memory.
   * These stay on the connection after the enqueue (a library caller who then exports or forgets on
   * it sorts in memory); the CLI's enqueue and copy close it.
   */
  static readonly ENQUEUE_PRAGMAS = ['cache_size = -65536', 'wal_autocheckpoint = 16384', 'temp_store = MEMORY'];
  #enqueuePragmas = false;

  /** The synchronous core of `enqueue`, one transaction for the whole batch. */
  readonly enqueueSync = (rows: readonly EnqueueRow[], now: number): EnqueueResult => {
    this.#applyEnqueuePragmas();
    if (this.#load === 'none') settleBulkLoad(this.db, this.location);
    return this.#enqueueTxn(rows, now);
  };

  #applyEnqueuePragmas(): void {
    if (this.#enqueuePragmas) return;
    for (const p of SqliteStore.ENQUEUE_PRAGMAS) this.db.pragma(p);
    this.#enqueuePragmas = true;
  }

  #startLoad(firstRows: number, now: number): 'bulk' | 'plain' {
    settleBulkLoad(this.db, this.location);
    if (firstRows < BULK_MIN_ROWS || this.location === ':memory:') return 'plain';
    // off for the whole load: items reference jobs(key), whose index is gone until the end
    this.db.pragma('foreign_keys = OFF');
    if (beginBulkLoad(this.db, now)) return 'bulk';
    this.db.pragma('foreign_keys = ON');
    return 'plain';
  }

  readonly #enqueueTxn = (given: readonly EnqueueRow[], now: number): EnqueueResult =>
    this.db
      .transaction(() => {
        const s = this.#s;
        const { rows, kept: keptRaised } = s.anySuperseded.get()
          ? withSuperseding(given, this.#supersedingOf(given))
          : { rows: given, kept: 0 };
        let newJobs = 0,
          newItems = 0,
          movedItems = 0,
          unchanged = 0,
          droppedJobs = 0,
          reprioritized = 0,
          joinedFailed = 0;
        let elsewhere = 0;
        let firstElsewhere: FromAnotherFile['first'] | null = null;
        let renamed = 0;
        let firstRenamed: FromAnotherFile['first'] | null = null;
        let firstMoved: MovedItem | null = null;
        // counted at the end: an item may move back to its job later in the batch
        const movedFrom = new Set<string>();
        const kept: string[] = [];
        // the item ids of each key this call asks a priority for: the job's own items, as against others'
        const asking = idsAskingPriority(rows);
        const takePriority = (r: EnqueueRow) => {
          const ids = asking.get(r.key);
          if (ids) reprioritized += s.reprioritize().run({ priority: r.priority, now, key: r.key, ids: JSON.stringify(ids) }).changes;
        };
        for (const r of rows) {
          const [current, was, wasMeta] = (s.itemJob.get(r.itemId) as [string, string, string | null] | undefined) ?? [];
          const meta = r.meta ? JSON.stringify(r.meta) : null;
          // The item's job exists (items.job_key references it): no need to look the key up again,
          // which is a read at a random place of the largest index (re-enqueue of an unchanged file),
          // unless a priority was asked for. Where it comes from now is kept, and its other fields: a
          // file renamed or moved left its items under the old name, which forget --source then took.
          if (current === r.key) {
            unchanged++;
            if (was !== r.source || wasMeta !== meta) s.refreshItem.run(r.source, meta, now, r.itemId);
            if (sourceFile(was!) !== sourceFile(r.source)) {
              renamed++;
              firstRenamed ??= { id: r.itemId, was: was!, now: r.source };
            }
            takePriority(r);
            continue;
          }
          if (current !== undefined && r.positional) {
            kept.push(r.itemId);
            continue;
          }
          const job = s.insertJob().run(r.key, REQUEST_KEPT_APART, r.model, r.priority, now, now);
          if (job.changes === 1) {
            s.insertRequest.run(job.lastInsertRowid, r.request);
            newJobs++;
          } else {
            const [state, orphaned] = s.existingJob.get(r.key) as [string, number];
            if (orphaned) s.adopt.run(r.key);
            if (state === 'failed') joinedFailed++;
            takePriority(r);
          }
          if (current === undefined) {
            s.insertItem.run(r.itemId, r.source, r.key, meta, now, now);
            newItems++;
          } else {
            // read before the job it left may be dropped below
            firstMoved ??= { id: r.itemId, was: (s.requestOfJob.get(current) as string | undefined) ?? '', now: r.request };
            s.moveItem.run(r.key, r.source, meta, now, r.itemId);
            movedItems++;
            if (sourceFile(was!) !== sourceFile(r.source)) {
              elsewhere++;
              firstElsewhere ??= { id: r.itemId, was: was!, now: r.source };
            }
            if (s.dropOrphans([current], r.key) === 1) droppedJobs++;
            else movedFrom.add(current);
          }
          if (r.supersedes !== undefined) {
            // what superseded the old request is superseded by this one now (a second raise)
            s.resupersede.run(r.key, r.supersedes);
            s.supersede.run(r.supersedes, r.key);
          }
        }
        const orphanedAnswers = [...movedFrom].filter((key) => s.markOrphaned.run(key).changes === 1).length;
        const counts = { newJobs, newItems, movedItems, unchanged, droppedJobs, orphanedAnswers, reprioritized };
        return {
          ...counts,
          ...(firstElsewhere ? { fromAnotherFile: { count: elsewhere, first: firstElsewhere } } : {}),
          ...(firstRenamed ? { sourceRenamed: { count: renamed, first: firstRenamed } } : {}),
          ...(kept.length ? { keptItems: kept } : {}),
          ...(firstMoved ? { firstMoved } : {}),
          ...(keptRaised ? { keptRaised } : {}),
          ...(joinedFailed ? { joinedFailed } : {}),
        };
      })
      .immediate();

  /** Of the rows' keys, those superseded by a request whose job is there, and it (src/store/superseded.ts). */
  #supersedingOf(rows: readonly EnqueueRow[]): Map<string, Superseding> {
    const found = this.#s.supersedingOf.all(JSON.stringify(rows.map((r) => r.key))) as Array<{ key: string; by: string; request: string }>;
    return new Map(found.map((f) => [f.key, { key: f.by, request: f.request }]));
  }

  async startRun(run: RunInfo): Promise<void> {
    settleBulkLoad(this.db, this.location);
    this.db
      .transaction(() => {
        this.#s.startRun.run(run.id, run.host, run.pid, run.startedAt, run.startedAt, JSON.stringify(run.options));
        this.#spend.open(run.id, run.startedAt);
      })
      .immediate();
    // a run writes for long: its WAL is copied back by a worker thread, off the event loop (the
    // thread's module is loaded here: the commands that only read never start one)
    if (this.location !== ':memory:' && !this.#checkpointer) {
      const { Checkpointer } = await import('./checkpointer.js');
      this.#checkpointer ??= new Checkpointer(this.db, this.location);
    }
  }

  #checkpointer: Checkpointer | undefined;

  queueFileChange(): 'removed' | 'replaced' | null {
    return this.#fileChange?.() ?? null;
  }

  async heartbeat(runId: string, now: number, leaseUntil: number, stats: RunStats, unsent?: readonly string[]): Promise<readonly string[]> {
    const change = this.queueFileChange();
    if (change) {
      throw new QueueGoneError(
        `${queueFileChangeText(this.location, change)} while this run wrote to it: the answers stored since went into the removed file, ` +
          'which nothing reads. The run stops here. Leave the queue in place while a run works on it; enqueue the documents again to run them.',
      );
    }
    return this.db
      .transaction(() => {
        this.#s.runHeartbeat.run(now, JSON.stringify(stats), unsent?.length ? JSON.stringify(unsent) : null, runId);
        this.#s.renewLeases.run(leaseUntil, runId);
        return this.#s.unneededHeld.all(runId) as string[];
      })
      .immediate();
  }

  async finishRun(runId: string, now: number, exitReason: string, stats: RunStats): Promise<void> {
    this.db
      .transaction(() => {
        this.#s.finishRun.run(now, now, exitReason, JSON.stringify(stats), runId);
        this.#spend.leftOut(runId, now);
      })
      .immediate();
    await this.#stopCheckpointer();
  }

  async #stopCheckpointer(): Promise<void> {
    const c = this.#checkpointer;
    this.#checkpointer = undefined;
    await c?.close();
  }

  async activeRuns(): Promise<RunRow[]> {
    return this.#read.activeRuns();
  }

  async reclaim(now: number, deadOwners: readonly string[], spared: readonly string[] = []): Promise<number> {
    const back = this.db
      .transaction(() => {
        const back = this.#s.reclaimExpired.all(now, now, JSON.stringify(spared)) as string[];
        for (const owner of deadOwners) {
          back.push(...(this.#s.reclaimOwner.all(now, owner) as string[]));
          this.#s.endRun.run(now, 'died', owner);
          this.#spend.leftOut(owner, now);
        }
        this.#s.dropOrphans(back);
        return back.length;
      })
      .immediate();
    return back + (await this.batches.abandonUnsent(deadOwners, now));
  }

  async claim(o: ClaimOptions): Promise<ClaimResult> {
    // kept once the claim has committed: a claim rolled back started nothing
    const startedNow: Array<[key: string, job: Started]> = [];
    const result = this.#claimTxn()(o, startedNow);
    for (const [key, job] of startedNow) this.#started.set(key, job);
    return result;
  }

  /** The claim's transaction, made once (`immediateTxn`); the jobs it starts are added to `startedNow`. */
  readonly #claimTxn = lazy(() =>
    immediateTxn(this.db, (o: ClaimOptions, startedNow: Array<[key: string, job: Started]>): ClaimResult => {
      const p = { max: o.maxAttempts, now: o.now, owner: o.owner, leaseUntil: o.leaseUntil, limit: o.limit };
      const rows = (
        o.skipModels?.length
          ? this.#s.claimSeqs.all({ ...p, seqs: JSON.stringify(this.#pickAround(o.skipModels, o.now, o.limit)) })
          : this.#s.claim.all(p)
      ) as ClaimedRow[];
      const moves = new CountMoves();
      const claimed = rows.map(([seq, key, request, model, priority, attempts, state, promptTokens, completionTokens, costUsd, own]) => {
        if (state === 'running') {
          startedNow.push([key, { seq, model, attempts }]);
          const was: CountedJob = { model, state: 'pending', attempts: attempts - 1, promptTokens, completionTokens, costUsd };
          moves.move(was, { ...was, state, attempts });
        }
        return { seq, key, request, model, priority, attempts, state, failsOnItsOwn: own === 1 } satisfies RawClaimed;
      });
      this.#s.writeCounts(moves);
      return splitClaimed(claimed);
    }),
  );

  /**
   * The first `limit` pending jobs, in claim order, of the models not skipped. Read per model from
   * jobs_claim_model, so the cost does not grow with the pending jobs of the skipped models (a full
   * lane of a million jobs): one probe per model with pending work, then `limit` rows of each.
   */
  #pickAround(skipModels: readonly string[], now: number, limit: number): number[] {
    const skip = new Set(skipModels);
    const picked: Array<{ seq: number; priority: number }> = [];
    for (
      let m = this.#s.firstPendingModel.get() as string | undefined;
      m !== undefined;
      m = this.#s.nextPendingModel.get(m) as string | undefined
    ) {
      if (!skip.has(m)) picked.push(...(this.#s.pendingOfModel.all(m, now, limit) as typeof picked));
    }
    picked.sort((a, b) => a.priority - b.priority || a.seq - b.seq);
    return picked.slice(0, limit).map((r) => r.seq);
  }

  /**
   * Reservations asked in the same turn of the event loop share one transaction (group commit), each
   * checked in arrival order as if alone: a run under a budget reserves before every request, and
   * each would otherwise pay for a commit of its own, which costs more than its check.
   */
  reserve(request: ReserveRequest): Promise<ReserveResult> {
    return this.#reservations.add(request);
  }

  readonly #reservations = new GroupCommit<ReserveRequest, ReserveResult>((batch) => this.#spend.reserveAll(batch));

  async unreserve(runId: string, usd: number, now: number): Promise<void> {
    this.#spend.unreserve(runId, usd, now);
  }

  async committed(runId: string): Promise<Committed> {
    return this.#spend.committed(runId);
  }

  async nextPendingAt(): Promise<number | null> {
    return (this.#s.nextPending.get() as number | null) ?? null;
  }

  async saveLaneLimits(row: LaneLimitRow): Promise<void> {
    this.#s.saveLane.run(row.baseUrl, row.model, row.rpm, row.tpm, row.source, row.at);
  }

  async laneLimits(): Promise<LaneLimitRow[]> {
    return this.#read.laneLimits();
  }

  async startRetry(key: string, owner: string, now: number, leaseUntil: number): Promise<number | null> {
    const attempts = (this.#s.startRetry.get(leaseUntil, now, key, owner) as number | undefined) ?? null;
    this.#recount(key, attempts);
    return attempts;
  }

  /** A started job's attempts changed: its answer still finds it as started (`#started`). */
  #recount(key: string, attempts: number | null): void {
    const started = this.#started.get(key);
    if (started && attempts !== null) this.#started.set(key, { ...started, attempts });
  }

  /**
   * Answers that arrive in the same turn of the event loop are committed together (group commit):
   * one transaction for many jobs costs about what one costs. Each promise resolves only once its
   * answer is committed, and each answer is still stored in the transaction that marks it done.
   */
  complete(key: string, c: Completion): Promise<boolean> {
    return this.#completions.add({ key, c });
  }

  /**
   * The jobs this store's claims started, by key. An answer finds its job by the seq: by the key,
   * each answer was a read at a random place of the largest index (every page of it, at a million
   * jobs, is seldom in the cache), where seqs of a claim are next to each other. The model and
   * attempts are what the answer moves in the status counts. Jobs claimed elsewhere (another
   * process, the batch lane) are found by key.
   */
  readonly #started = new Map<string, Started>();

  /** One transaction for a group of answers: each stored with its attempt row, the counts and money moved once. */
  readonly #answer = lazy(() =>
    immediateTxn(this.db, (batch: ReadonlyArray<{ key: string; c: Completion }>): boolean[] => {
      const s = this.#s;
      const moves = new CountMoves();
      const changed = batch.map(({ key, c }) => {
        const a = c.attempt;
        const latencyMs = latencyOf(a);
        const answer = [
          c.output,
          c.response,
          c.usage.promptTokens,
          c.usage.completionTokens,
          a.costUsd ?? null,
          latencyMs,
          a.endedAt,
          a.endedAt,
        ];
        const started = this.#started.get(key);
        let seq: number | undefined;
        if (started && s.answerClaimed.run(...answer, started.seq, key, started.model, started.attempts).changes === 1) {
          seq = started.seq;
          const { model, attempts } = started;
          const was: CountedJob = { model, state: 'running', attempts, promptTokens: null, completionTokens: null, costUsd: null };
          const { promptTokens, completionTokens } = c.usage;
          moves.move(was, { model, state: 'done', attempts, promptTokens, completionTokens, costUsd: a.costUsd ?? null });
        } else {
          // not as its claim left it: answered already (then this finds it neither), dropped and enqueued
          // again, taken back, or retried since (startRetry); or claimed elsewhere
          seq = s.complete.get(...answer, key) as number | undefined;
        }
        // the job's seq from its UPDATE, else (answered already, or gone) looked up by the key
        if (seq === undefined) s.insertAttempt.run(...insertAttemptValues(a, latencyMs));
        else s.insertAttemptOfSeq.run(...attemptValues(a, latencyMs, Number), seq);
        return seq !== undefined;
      });
      s.writeCounts(moves);
      // the money of the whole batch in one statement per run, not one per answer
      this.#spend.settleAll(batch.map((b) => b.c.attempt));
      return changed;
    }),
  );

  readonly #completions = new GroupCommit<{ key: string; c: Completion }, boolean>((batch) => {
    const changed = this.#answer()(batch);
    // forgotten once answered (a batch rolled back leaves them: its answers may come again)
    for (const { key } of batch) this.#started.delete(key);
    return changed;
  });

  async recordAttempt(a: AttemptRecord, o: { countAttempt: boolean; error: string | null }): Promise<void> {
    const billed = billedAnswerUsd(a);
    this.db
      .transaction(() => {
        this.#insertAttempt(a);
        this.#recount(
          a.key,
          (this.#s.noteError.get(o.error, o.countAttempt ? 0 : 1, billed, billed, a.key, a.runId) as number | undefined) ?? null,
        );
      })
      .immediate();
  }

  async fail(key: string, owner: string, error: string, attempt: AttemptRecord | null, now: number): Promise<void> {
    this.#started.delete(key);
    this.db
      .transaction(() => {
        if (attempt) this.#insertAttempt(attempt);
        const billed = attempt ? billedAnswerUsd(attempt) : null;
        if (this.#s.fail.run(error, billed, billed, now, now, key, owner).changes === 1) this.#s.dropOrphans([key]);
      })
      .immediate();
  }

  async release(owner: string, o: { refund: boolean; now: number; keys?: readonly string[] }): Promise<number> {
    const keys = o.keys;
    return this.db
      .transaction(() => {
        const back = keys
          ? keys.flatMap((key) => this.#s.releaseOne.all(o.refund ? 1 : 0, o.now, owner, key) as string[])
          : (this.#s.release.all(o.refund ? 1 : 0, o.now, owner) as string[]);
        for (const key of back) this.#started.delete(key);
        this.#s.dropOrphans(back);
        return back.length;
      })
      .immediate();
  }

  async retryFailed(filter: RetryFailedFilter, now: number): Promise<number> {
    settleBulkLoad(this.db, this.location);
    return this.db
      .transaction(() => {
        // failed jobs no item needs, which versions before `fail` dropped them left behind: gone, never retried
        this.#s.dropOrphans(this.#s.failedOrphans.all() as string[]);
        return this.#s.retryFailed.run({
          now,
          text: filter.errorContains ?? null,
          exact: filter.errorIs ?? null,
          lacks: filter.errorLacks ?? null,
        }).changes;
      })
      .immediate();
  }

  async forgetItems(which: ForgetWhich, o: { now: number; dryRun?: boolean }): Promise<ForgetResult> {
    settleBulkLoad(this.db, this.location);
    const s = this.#s;
    const forget = () => {
      const unknownIds: string[] = [];
      const ids: string[] = [];
      const keys: string[] = [];
      if ('ids' in which) {
        // each id once: a second delete of one named twice would find it gone, and call it unknown
        for (const id of new Set(which.ids)) {
          const key = s.forgetItem.get(id) as string | undefined;
          if (key === undefined) {
            unknownIds.push(id);
          } else {
            ids.push(id);
            keys.push(key);
          }
        }
      } else {
        for (const [id, key] of s.forgetSource.all({ source: which.source }) as Array<[string, string]>) {
          ids.push(id);
          keys.push(key);
        }
        s.forgetRejections.run({ source: which.source });
      }
      let droppedJobs = 0,
        orphanedAnswers = 0;
      for (const key of new Set(keys)) {
        if (s.dropOrphans([key]) === 1) droppedJobs++;
        else orphanedAnswers += s.markOrphaned.run(key).changes;
      }
      return { items: keys.length, ids: ids.sort(), droppedJobs, orphanedAnswers, unknownIds };
    };
    if (!o.dryRun) return this.db.transaction(forget).immediate();
    // what it would do: done, then rolled back
    let result: ForgetResult | undefined;
    try {
      this.db
        .transaction(() => {
          result = forget();
          throw DRY_RUN;
        })
        .immediate();
    } catch (error) {
      if (error !== DRY_RUN) throw error;
    }
    return result!;
  }

  async keepRejections(sources: readonly SourceRejections[]): Promise<void> {
    this.db
      .transaction(() => {
        for (const r of sources) {
          if (r.rejected > 0) this.#s.keepRejections.run(...rejectionsValues(r));
          else this.#s.dropRejections.run(r.source);
        }
        this.#s.dropOldRejections.run(KEPT_REJECTED_SOURCES);
      })
      .immediate();
  }

  /** This machine's runs stopped by a signal, which may hold the write lock, as a sentence; null for none (`stoppedRunsText`). */
  stoppedRuns(): string | null {
    return stoppedRunsText(this.db);
  }

  async takeBackMockAnswers(now: number, quietSince: number): Promise<number> {
    return this.db
      .transaction(() => {
        const runs = this.#s.mockRuns.all(quietSince) as string[];
        if (runs.length === 0) return 0;
        const p = { now, runs: JSON.stringify(runs) };
        const back = this.#s.takeBackMock.run(p).changes;
        for (const [seq, key] of this.#s.dropMockAnswered.all({ runs: p.runs }) as Array<[number, string]>)
          this.#s.dropAttempts.run(seq, key);
        this.#s.markTakenBack.run(p);
        this.#s.mockMoneyGone.run(p);
        return back;
      })
      .immediate();
  }

  async status(): Promise<StatusSnapshot> {
    return this.#read.status();
  }

  async item(id: string): Promise<ItemDetail | null> {
    return this.#read.item(id);
  }

  async stateCounts(): Promise<Record<JobState, number>> {
    return this.#read.stateCounts();
  }

  async itemStates(ids: readonly string[]): Promise<Array<JobState | null>> {
    return this.#read.itemStates(ids);
  }

  async folderItems(folder: string, limit: number, afterSeq?: number): Promise<FolderItemRow[]> {
    return this.#read.folderItems(folder, limit, afterSeq);
  }

  async lineItemIds(file: string, limit: number, afterId?: string): Promise<string[]> {
    return this.#read.lineItemIds(file, limit, afterId);
  }

  async itemsEndingIn(name: string, limit: number): Promise<ItemSourceRow[]> {
    return this.#read.itemsEndingIn(name, limit);
  }

  async itemsByKeyPrefix(prefix: string, limit: number, afterKey?: string): Promise<KeyItemRow[]> {
    return this.#read.itemsByKeyPrefix(prefix, limit, afterKey);
  }

  async failedItems(error: string, limit: number): Promise<FailedItemRow[]> {
    return this.#read.failedItems(error, limit);
  }

  async failedJobsToResend(filter: RetryFailedFilter, after: FailedJobCursor | null, limit: number): Promise<FailedJobToResend[]> {
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

  async itemSeqSpan(): Promise<ItemSeqSpan | null> {
    return this.#read.itemSeqSpan();
  }

  jobsToRun(now: number, o?: JobsToRunOptions): AsyncIterable<JobToRun> {
    return this.#read.jobsToRun(now, o);
  }

  async answered(model: string, o: { limit: number; withRequest: boolean }): Promise<AnsweredJob[]> {
    return this.#read.answered(model, o);
  }

  async close(): Promise<void> {
    await this.#reservations.drain();
    await this.#completions.drain();
    await this.#stopCheckpointer();
    // a load nobody ended (its caller failed before endLoad): the next writer finishes it
    await this.#loader?.close();
    if (this.db.open) this.db.close();
  }

  /** The attempt row, and what it moves in its run's money, in the caller's transaction. */
  #insertAttempt(a: AttemptRecord): void {
    this.#s.insertAttempt.run(...insertAttemptValues(a, latencyOf(a)));
    this.#spend.settle(a);
  }
}

/** Of rows that ask for their priority (EnqueueRow.setsPriority), the item ids per job key. */
function idsAskingPriority(rows: readonly EnqueueRow[]): Map<string, string[]> {
  const asking = new Map<string, string[]>();
  for (const r of rows) {
    if (!r.setsPriority) continue;
    const ids = asking.get(r.key);
    if (ids) ids.push(r.itemId);
    else asking.set(r.key, [r.itemId]);
  }
  return asking;
}

/**
 * A killed bulk load is finished when the queue is opened (`finishDeadBulkLoad`), unless the file
 * cannot be written here, or another command is finishing it (its index build holds the write lock
 * past the busy timeout): then this one reads the queue as it is, and a later open finishes it.
 */
function finishDeadLoadIfWritable(db: Db): void {
  try {
    finishDeadBulkLoad(db);
  } catch (error) {
    const code = (error as { code?: string }).code ?? '';
    if (!code.startsWith('SQLITE_READONLY') && !code.startsWith('SQLITE_BUSY')) {
      db.close();
      throw error;
    }
  }
}
