import { hostname } from 'node:os';
import { isProcessAlive } from '../../process-alive.js';

/**
 * Forward-only schema migrations for the SQLite store. Append a new entry to change the schema;
 * never edit one that has shipped. `llmq_migrations` records what has been applied.
 */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
  /**
   * Run with foreign keys off (a table rebuild: dropping the old `jobs` would otherwise check every
   * item against it), and `PRAGMA foreign_key_check` must find nothing before it commits.
   */
  readonly rebuildsTables?: boolean;
  /** Run after `sql`, in its transaction: a change that depends on what the database holds. */
  readonly apply?: (db: SchemaDb) => void;
  /**
   * Why the migration cannot be applied now, or null. Asked in its transaction, before `sql`: an
   * llmq of an earlier version still working the queue would misread what the migration changes.
   */
  readonly blockedBy?: (db: SchemaDb, now: number) => string | null;
}

/**
 * The batch lane's submissions (src/store/batches.ts).
 */
export const BATCHES_MIGRATION: Migration = Object.freeze({
  version: 3,
  name: 'batches',
  sql: `
-- one row per submission to a provider's Batch API; its jobs are those leased to 'batch:' || id
CREATE TABLE batches (
  id                TEXT    PRIMARY KEY,            -- llmq's submission id, also in the batch's metadata
  run_id            TEXT    NOT NULL,               -- the run responsible for it now
  base_url          TEXT    NOT NULL,               -- the endpoint, never with credentials
  state             TEXT    NOT NULL DEFAULT 'preparing'
                    CHECK (state IN ('preparing', 'submitted', 'ended', 'abandoned')),
  provider_batch_id TEXT    UNIQUE,                 -- NULL until the provider created it
  input_file_id     TEXT,
  provider_status   TEXT,                           -- the provider's last word (in_progress, completed, expired...)
  jobs              INTEGER NOT NULL DEFAULT 0,
  done              INTEGER NOT NULL DEFAULT 0,
  failed            INTEGER NOT NULL DEFAULT 0,
  requeued          INTEGER NOT NULL DEFAULT 0,     -- jobs given back to pending when it ended
  error             TEXT,
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  ended_at          INTEGER
);
CREATE INDEX batches_open ON batches (state, created_at);
`,
});

/**
 * Claims that skip full lanes (`ClaimOptions.skipModels`) read each other model's pending jobs from
 * this index instead of walking past every pending job of the skipped ones: with a million jobs of
 * one model queued, that walk took 300 ms per claim.
 */
export const CLAIM_BY_MODEL_MIGRATION: Migration = Object.freeze({
  version: 5,
  name: 'claim_by_model',
  sql: `
-- pending jobs per model in claim order (priority, then FIFO); also lists the models that have pending work
CREATE INDEX jobs_claim_model ON jobs (model, priority, seq) WHERE state = 'pending';
`,
});

/**
 * The count triggers that fire on every insert. A bulk load (bulk-load.ts) drops them while its rows
 * go in, adds each batch's rows to the counts itself, and creates them again from here.
 */
export const INSERT_COUNT_TRIGGERS = {
  jobs_count_insert: `CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs BEGIN
  INSERT INTO job_counts VALUES (NEW.model, NEW.state, 1, NEW.attempts > 0, coalesce(NEW.prompt_tokens, 0),
      coalesce(NEW.completion_tokens, 0), coalesce(NEW.cost_usd, 0), iif(NEW.cost_usd IS NULL, coalesce(NEW.prompt_tokens, 0), 0),
      iif(NEW.cost_usd IS NULL, coalesce(NEW.completion_tokens, 0), 0))
    ON CONFLICT (model, state) DO UPDATE SET jobs = jobs + 1, retried = retried + excluded.retried,
      prompt_tokens = prompt_tokens + excluded.prompt_tokens, completion_tokens = completion_tokens + excluded.completion_tokens,
      cost_usd = cost_usd + excluded.cost_usd, unpriced_prompt = unpriced_prompt + excluded.unpriced_prompt,
      unpriced_completion = unpriced_completion + excluded.unpriced_completion;
END;`,
  items_count_insert: 'CREATE TRIGGER items_count_insert AFTER INSERT ON items BEGIN UPDATE item_counts SET items = items + 1; END;',
} as const;

/**
 * What the count trigger on an UPDATE of jobs does: the row leaves its old (model, state) and joins its
 * new one. Shipped in migration 6 and again, behind another WHEN, in migration 12: text both have
 * run as it is, so never edit it; a change is a new migration with a body of its own.
 */
const JOB_COUNT_UPDATE_BODY = `BEGIN
  UPDATE job_counts SET jobs = jobs - 1, retried = retried - (OLD.attempts > 0), prompt_tokens = prompt_tokens - coalesce(OLD.prompt_tokens, 0),
      completion_tokens = completion_tokens - coalesce(OLD.completion_tokens, 0), cost_usd = cost_usd - coalesce(OLD.cost_usd, 0),
      unpriced_prompt = unpriced_prompt - iif(OLD.cost_usd IS NULL, coalesce(OLD.prompt_tokens, 0), 0),
      unpriced_completion = unpriced_completion - iif(OLD.cost_usd IS NULL, coalesce(OLD.completion_tokens, 0), 0)
    WHERE model = OLD.model AND state = OLD.state;
  INSERT INTO job_counts VALUES (NEW.model, NEW.state, 1, NEW.attempts > 0, coalesce(NEW.prompt_tokens, 0),
      coalesce(NEW.completion_tokens, 0), coalesce(NEW.cost_usd, 0), iif(NEW.cost_usd IS NULL, coalesce(NEW.prompt_tokens, 0), 0),
      iif(NEW.cost_usd IS NULL, coalesce(NEW.completion_tokens, 0), 0))
    ON CONFLICT (model, state) DO UPDATE SET jobs = jobs + 1, retried = retried + excluded.retried,
      prompt_tokens = prompt_tokens + excluded.prompt_tokens, completion_tokens = completion_tokens + excluded.completion_tokens,
      cost_usd = cost_usd + excluded.cost_usd, unpriced_prompt = unpriced_prompt + excluded.unpriced_prompt,
      unpriced_completion = unpriced_completion + excluded.unpriced_completion;
END;`;

/** The triggers of migration 6 on `jobs`; REBUILD_JOBS_SQL creates them again. */
const JOBS_COUNT_TRIGGERS = `
${INSERT_COUNT_TRIGGERS.jobs_count_insert}
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs BEGIN
  UPDATE job_counts SET jobs = jobs - 1, retried = retried - (OLD.attempts > 0), prompt_tokens = prompt_tokens - coalesce(OLD.prompt_tokens, 0),
      completion_tokens = completion_tokens - coalesce(OLD.completion_tokens, 0), cost_usd = cost_usd - coalesce(OLD.cost_usd, 0),
      unpriced_prompt = unpriced_prompt - iif(OLD.cost_usd IS NULL, coalesce(OLD.prompt_tokens, 0), 0),
      unpriced_completion = unpriced_completion - iif(OLD.cost_usd IS NULL, coalesce(OLD.completion_tokens, 0), 0)
    WHERE model = OLD.model AND state = OLD.state;
END;
-- a lease renewal or an error noted on a running job changes no count: the WHEN skips it
CREATE TRIGGER jobs_count_update AFTER UPDATE OF model, state, attempts, prompt_tokens, completion_tokens, cost_usd ON jobs
WHEN OLD.model IS NOT NEW.model OR OLD.state IS NOT NEW.state OR (OLD.attempts > 0) IS NOT (NEW.attempts > 0)
  OR OLD.prompt_tokens IS NOT NEW.prompt_tokens OR OLD.completion_tokens IS NOT NEW.completion_tokens OR OLD.cost_usd IS NOT NEW.cost_usd
${JOB_COUNT_UPDATE_BODY}

CREATE TRIGGER jobs_failure_insert AFTER INSERT ON jobs WHEN NEW.state = 'failed' BEGIN
  INSERT INTO failure_counts VALUES (coalesce(NEW.error, 'unknown error'), 1) ON CONFLICT (error) DO UPDATE SET jobs = jobs + 1;
END;
CREATE TRIGGER jobs_failure_delete AFTER DELETE ON jobs WHEN OLD.state = 'failed' BEGIN
  UPDATE failure_counts SET jobs = jobs - 1 WHERE error = coalesce(OLD.error, 'unknown error');
  DELETE FROM failure_counts WHERE error = coalesce(OLD.error, 'unknown error') AND jobs = 0;
END;
CREATE TRIGGER jobs_failure_update AFTER UPDATE OF state, error ON jobs
WHEN (OLD.state = 'failed' OR NEW.state = 'failed') AND (OLD.state IS NOT NEW.state OR OLD.error IS NOT NEW.error)
BEGIN
  UPDATE failure_counts SET jobs = jobs - 1 WHERE OLD.state = 'failed' AND error = coalesce(OLD.error, 'unknown error');
  DELETE FROM failure_counts WHERE OLD.state = 'failed' AND error = coalesce(OLD.error, 'unknown error') AND jobs = 0;
  INSERT INTO failure_counts SELECT coalesce(NEW.error, 'unknown error'), 1 WHERE NEW.state = 'failed'
    ON CONFLICT (error) DO UPDATE SET jobs = jobs + 1;
END;
`;

/**
 * What `status` shows, kept up to date by triggers in the transaction that changes a job or an
 * item, so reading it costs the same at any queue size. Triggers, not code in each state change:
 * they catch every path that writes jobs (enqueue, claim, answers, retries, reclaim, release,
 * retry-failed, the batch lane, copy) and any added later.
 */
export const STATUS_COUNTS_MIGRATION: Migration = Object.freeze({
  version: 6,
  name: 'status_counts',
  sql: `
-- jobs per (model, state) with their tokens and stored cost: what status used to count and sum over jobs
CREATE TABLE job_counts (
  model               TEXT    NOT NULL,
  state               TEXT    NOT NULL,
  jobs                INTEGER NOT NULL DEFAULT 0,
  retried             INTEGER NOT NULL DEFAULT 0,   -- of them, jobs with attempts > 0 (pending ones wait to be retried)
  prompt_tokens       INTEGER NOT NULL DEFAULT 0,
  completion_tokens   INTEGER NOT NULL DEFAULT 0,
  cost_usd            REAL    NOT NULL DEFAULT 0,   -- sum of the stored costs
  unpriced_prompt     INTEGER NOT NULL DEFAULT 0,   -- tokens of jobs stored without a cost
  unpriced_completion INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (model, state)
) WITHOUT ROWID;
-- failed jobs per reason, as status groups them (a job without an error is 'unknown error')
CREATE TABLE failure_counts (
  error TEXT    PRIMARY KEY,
  jobs  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX failure_counts_top ON failure_counts (jobs DESC, error);
CREATE TABLE item_counts (
  items INTEGER NOT NULL
);

INSERT INTO job_counts SELECT model, state, count(*), count(*) FILTER (WHERE attempts > 0),
    coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0), coalesce(sum(cost_usd), 0),
    coalesce(sum(prompt_tokens) FILTER (WHERE cost_usd IS NULL), 0), coalesce(sum(completion_tokens) FILTER (WHERE cost_usd IS NULL), 0)
  FROM jobs GROUP BY model, state;
INSERT INTO failure_counts SELECT coalesce(error, 'unknown error'), count(*) FROM jobs WHERE state = 'failed' GROUP BY 1;
INSERT INTO item_counts SELECT count(*) FROM items;

${JOBS_COUNT_TRIGGERS}
${INSERT_COUNT_TRIGGERS.items_count_insert}
CREATE TRIGGER items_count_delete AFTER DELETE ON items BEGIN UPDATE item_counts SET items = items - 1; END;

-- they only served counting, which the tables above now answer
DROP INDEX jobs_usage;
DROP INDEX jobs_retrying;
`,
});

/**
 * The latency export writes for a job (its last attempt's) kept on the job, so the export reads it
 * with the row instead of looking it up in attempts for every item: that lookup was 40% of the
 * export's reading at a million jobs. A trigger, not code in each path that records an attempt
 * (answers, failures, retries, releases, the batch lane, copy): a new attempt always has the highest
 * id, so the last one inserted for a job is its latest. Attempts are only deleted with their job.
 * No backfill (it would rewrite every job, the whole table through the WAL: 17 CPU-seconds and
 * 1.6 GB a million): jobs last tried before this migration keep NULL and the export looks theirs up
 * as before (exportColumns), so the migration costs the same at any size.
 */
/**
 * Keeps \`jobs.latency_ms\` as migration 7 made it (by key); migration 9 finds the job by seq instead.
 * REBUILD_JOBS_SQL drops the trigger with the old table, and rebuildJobs creates it again as it was.
 */
const ATTEMPTS_LATENCY_TRIGGER = `CREATE TRIGGER attempts_latency AFTER INSERT ON attempts BEGIN
  UPDATE jobs SET latency_ms = NEW.latency_ms WHERE key = NEW.job_key;
END;`;

/** Keeps \`jobs.latency_ms\` since migration 9: the job by its seq (its rowid), not a lookup of its key. */
const ATTEMPTS_LATENCY_BY_SEQ_TRIGGER = `CREATE TRIGGER attempts_latency AFTER INSERT ON attempts BEGIN
  UPDATE jobs SET latency_ms = NEW.latency_ms WHERE seq = NEW.job_seq;
END;`;

export const EXPORT_LATENCY_MIGRATION: Migration = Object.freeze({
  version: 7,
  name: 'export_latency',
  sql: `
ALTER TABLE jobs ADD COLUMN latency_ms INTEGER;           -- latency of the job's last attempt since this migration, else NULL
${ATTEMPTS_LATENCY_TRIGGER}
`,
});

/**
 * `jobs` as migration 1 made it declares `key` `UNIQUE` inline, so its index cannot be dropped. A
 * bulk load into an empty queue (src/store/sqlite/bulk-load.ts) drops the named index this creates
 * instead and builds it after the rows are in, once, rather than updating it at a random page for
 * every row. SQLite cannot change a column constraint in place, so the table is rebuilt: rows copied
 * in `seq` order, the index built after the copy, then every index and trigger `jobs` had. The copy
 * fires no trigger, so the counts of migration 6 stay as they were. The foreign key of
 * `items.job_key` names the table, and a unique index on `key` serves it as the constraint did.
 * Run with foreign keys off (dropping the old table would check every item against it). It makes
 * \`jobs\` as the latest migration has it: a migration that changes \`jobs\` changes this too (the
 * schema test rebuilds a blank queue and compares).
 */
export const REBUILD_JOBS_SQL = `
CREATE TABLE jobs_rebuilt (
  seq               INTEGER PRIMARY KEY,            -- insertion order: FIFO within a priority
  key               TEXT    NOT NULL,               -- SHA-256 of the canonical request; unique by jobs_key
  request           TEXT    NOT NULL,               -- the exact request body (canonical JSON)
  model             TEXT    NOT NULL,
  state             TEXT    NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'running', 'done', 'failed')),
  priority          INTEGER NOT NULL DEFAULT 0,     -- lower runs first
  attempts          INTEGER NOT NULL DEFAULT 0,     -- raised when a try starts
  run_after         INTEGER NOT NULL DEFAULT 0,     -- ms epoch; not claimed before
  lease_owner       TEXT,                           -- runs.id holding the job while running
  lease_expires_at  INTEGER,
  output            TEXT,                           -- the answer text
  response          TEXT,                           -- the provider's full response body
  prompt_tokens     INTEGER,
  completion_tokens INTEGER,
  error             TEXT,                           -- last error, or why it failed
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  finished_at       INTEGER,
  cost_usd          REAL,                           -- USD of the answer; NULL until done, or when no price was known
  latency_ms        INTEGER                         -- latency of the job's last attempt since migration 7, else NULL
);
INSERT INTO jobs_rebuilt (seq, key, request, model, state, priority, attempts, run_after, lease_owner, lease_expires_at,
    output, response, prompt_tokens, completion_tokens, error, created_at, updated_at, finished_at, cost_usd, latency_ms)
  SELECT seq, key, request, model, state, priority, attempts, run_after, lease_owner, lease_expires_at,
    output, response, prompt_tokens, completion_tokens, error, created_at, updated_at, finished_at, cost_usd, latency_ms
  FROM jobs ORDER BY seq;
-- a trigger on another table that names jobs would make the rename fail while jobs is gone: rebuildJobs creates it again
DROP TRIGGER attempts_latency;
DROP TABLE jobs;
ALTER TABLE jobs_rebuilt RENAME TO jobs;
CREATE UNIQUE INDEX jobs_key ON jobs (key);
CREATE INDEX jobs_claim ON jobs (state, priority, seq);
CREATE INDEX jobs_lease ON jobs (lease_owner) WHERE lease_owner IS NOT NULL;
CREATE INDEX jobs_age ON jobs (state, created_at);
CREATE INDEX jobs_claim_model ON jobs (model, priority, seq) WHERE state = 'pending';
${JOBS_COUNT_TRIGGERS}
`;

/** What a migration's own code needs of a connection. */
interface SchemaDb {
  prepare(sql: string): { get(): unknown; all(): unknown[] };
  exec(sql: string): unknown;
}

/**
 * REBUILD_JOBS_SQL, then the triggers of later migrations it drops with the old table, as they were:
 * the one on attempts (migration 8 runs this on an old queue before migration 9 gives attempts the
 * column today's trigger reads, and a queue left at version 8 between the two, by a crash or a full
 * disk, must keep the trigger of version 8), and migration 10's on jobs, when the queue has it;
 * then migration 12's column and count trigger, migration 15's column and index, and migration 19's
 * column, when the queue has them (a bulk load's rebuild).
 */
export function rebuildJobs(db: SchemaDb): void {
  const kept = ['attempts_latency', 'jobs_request_delete'].map(
    (name) => db.prepare(`SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = '${name}'`).get() as { sql: string } | undefined,
  );
  const column = (name: string) => db.prepare(`SELECT 1 FROM pragma_table_info('jobs') WHERE name = '${name}'`).get();
  const countsKept = column('counts_kept');
  const orphaned = column('orphaned');
  const unsentDeaths = column('unsent_deaths');
  db.exec(REBUILD_JOBS_SQL);
  for (const trigger of kept) if (trigger) db.exec(trigger.sql);
  if (countsKept) db.exec(COUNTS_KEPT_MIGRATION.sql);
  if (orphaned) db.exec(ORPHANED_ANSWERS_MIGRATION.sql);
  if (unsentDeaths) db.exec(UNSENT_DEATHS_COLUMN_SQL);
}

/**
 * Only an empty `jobs` is rebuilt, where it costs nothing: a bulk load only ever starts on an empty
 * queue (and rebuilds it then if it still has the constraint), while copying a queue of ten million
 * jobs on the first open after an upgrade would take minutes and a WAL the size of the database
 * (measured: 4 s of CPU per 200,000 jobs).
 */
export function nameJobsKeyIndexIfEmpty(db: SchemaDb): void {
  if (db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'jobs_key'").get()) return;
  if (db.prepare('SELECT 1 FROM jobs LIMIT 1').get()) return;
  rebuildJobs(db);
}

export const BULK_LOAD_MIGRATION: Migration = Object.freeze({
  version: 8,
  name: 'bulk_load',
  rebuildsTables: true,
  sql: `
-- a bulk load in progress (at most one): its indexes are rebuilt by whoever finds its loader gone
CREATE TABLE bulk_load (
  id         INTEGER PRIMARY KEY CHECK (id = 1),
  host       TEXT    NOT NULL,
  pid        INTEGER NOT NULL,
  started_at INTEGER NOT NULL
);
`,
  apply: nameJobsKeyIndexIfEmpty,
});

/**
 * A job's attempts are found by the job's \`seq\`, not its key. \`attempts_job\` was keyed by the
 * job's SHA-256 key, so each answer's attempt row went to a random page of that index: in a run
 * against a zero-latency fake that was two thirds of the pages each group commit wrote to the WAL
 * (and the checkpointer copied back), and at millions of attempts a page read from disk per answer.
 * Claims take jobs in seq order within a priority, so a run's attempts now land at the end of
 * \`attempts_by_job\`. The insert finds the seq by the key the job's own UPDATE looks up anyway.
 *
 * Attempts stored before this migration keep a NULL \`job_seq\` and stay found by key, in
 * \`attempts_by_key\` (the old index, now over them alone): giving every old row its job's seq would
 * rewrite the whole table through the WAL, while building the partial index reads it once (when a
 * writer first opens the queue after the upgrade, in the migration's transaction: its WAL then holds
 * that index, as big as the old one). A read of a job's attempts asks for both: ATTEMPTS_OF_JOB in
 * attempts.ts, beside the insert and the delete.
 */
export const ATTEMPTS_BY_JOB_SEQ_MIGRATION: Migration = Object.freeze({
  version: 9,
  name: 'attempts_by_job_seq',
  sql: `
ALTER TABLE attempts ADD COLUMN job_seq INTEGER;   -- jobs.seq of the attempt's job; NULL for attempts stored before this migration
DROP INDEX attempts_job;
CREATE INDEX attempts_by_key ON attempts (job_key, id) WHERE job_seq IS NULL;
CREATE INDEX attempts_by_job ON attempts (job_seq, id) WHERE job_seq IS NOT NULL;
DROP TRIGGER attempts_latency;
${ATTEMPTS_LATENCY_BY_SEQ_TRIGGER}
`,
});

/** A run with no heartbeat for this long is dead or has lost its leases: it claims no more jobs. */
const RUN_QUIET_MS = 60_000;

/**
 * A run still working the queue, which an llmq of the schema before migration 10 started (any run
 * open before the migration is): it claims jobs with the request from `jobs.request` and would send
 * '' for every job enqueued after the migration. Dead runs (quiet for a minute, or their process
 * gone on this host) are no obstacle: their jobs go back to pending and the next run reads them right.
 */
function liveEarlierRun(db: SchemaDb, now: number): string | null {
  const open = db.prepare('SELECT id, host, pid, heartbeat_at FROM runs WHERE ended_at IS NULL ORDER BY heartbeat_at DESC').all() as Array<{
    id: string;
    host: string;
    pid: number;
    heartbeat_at: number;
  }>;
  const here = hostname();
  const live = open.find((r) => now - r.heartbeat_at < RUN_QUIET_MS && (r.host !== here || isProcessAlive(r.pid)));
  if (!live) return null;
  const ago = Math.max(0, Math.round((now - live.heartbeat_at) / 1000));
  return (
    `a run of an earlier llmq is working this queue (run ${live.id}, pid ${live.pid} on ${live.host}, last heartbeat ${ago} s ago). ` +
    'This llmq keeps the requests of new jobs in a new place (schema version 10), where that run would find none and send ' +
    'empty requests. Let the run finish, or stop it (Ctrl-C; it resumes where it stopped), then run this again; until then ' +
    'the llmq that started it still works with this queue.'
  );
}

/** Drops a job's request with the job, whichever way it goes (enqueue, a run's hand-back, a bulk load's repeats). */
const JOB_REQUEST_DELETE_TRIGGER = `CREATE TRIGGER jobs_request_delete AFTER DELETE ON jobs BEGIN
  DELETE FROM job_requests WHERE seq = OLD.seq;
END;`;

/**
 * A job's request is stored apart from its row in `jobs`, once, when it is enqueued. SQLite writes
 * a row whole each time any column of it changes, and a job's row changes at least twice after the
 * enqueue (the claim, the answer) and usually three times (the answer's latency): every time with the
 * document in it. With 8 KB requests that was 39 KiB written per job (WAL and checkpoint) and about
 * 100 us of CPU per job in claim and answer; with the request apart, 5.3 KiB and 57 us (150-byte
 * requests: 6.9 to 5.9 KiB, 54 to 48 us). The state row stays narrow, whatever the documents.
 *
 * Jobs enqueued before this migration keep their request in `jobs.request`: moving it would rewrite
 * the whole queue on the first open after the upgrade (minutes and a WAL as big as the database at
 * ten million jobs). Jobs enqueued since have `jobs.request = ''` (no request is empty: it is a JSON
 * object), and every read takes the request from where it is (requestOf in requests.ts).
 */
export const JOB_REQUESTS_MIGRATION: Migration = Object.freeze({
  version: 10,
  name: 'job_requests',
  blockedBy: liveEarlierRun,
  sql: `
CREATE TABLE job_requests (
  seq     INTEGER PRIMARY KEY,                      -- jobs.seq
  request TEXT    NOT NULL                          -- the exact request body (canonical JSON)
);
${JOB_REQUEST_DELETE_TRIGGER}
`,
});

/**
 * Keeps \`jobs.latency_ms\` since migration 11 as before (the latency of the job's last attempt),
 * without writing the job's row again when it already holds that latency: the store's complete sets
 * an answer's latency in the row it writes anyway, before the attempt's insert. SQLite writes a row
 * whole on every UPDATE, even of a column to its own value; the second write of the job's row for
 * every answer cost about 3 us of CPU per job, a tenth of the store's work for it at a zero-latency
 * fake. The WHEN reads the row by its rowid, which writes nothing.
 */
const ATTEMPTS_LATENCY_IF_CHANGED_TRIGGER = `CREATE TRIGGER attempts_latency AFTER INSERT ON attempts
  WHEN NEW.latency_ms IS NOT (SELECT latency_ms FROM jobs WHERE seq = NEW.job_seq) BEGIN
  UPDATE jobs SET latency_ms = NEW.latency_ms WHERE seq = NEW.job_seq;
END;`;

/**
 * An answer's latency is written with the answer. Every other writer of attempts (failures, the
 * batch lane, copy, a run of an earlier llmq still working the queue) is kept right by the trigger as
 * before, so nothing waits for such a run.
 */
export const ANSWER_LATENCY_MIGRATION: Migration = Object.freeze({
  version: 11,
  name: 'answer_latency',
  sql: `
DROP TRIGGER attempts_latency;
${ATTEMPTS_LATENCY_IF_CHANGED_TRIGGER}
`,
});

/**
 * The two changes every job goes through in a run, its claim and its answer, move the status counts
 * from the store's code, once per transaction for all its jobs, instead of from the count trigger
 * once per job. The trigger ran two statements on `job_counts` for each row, four per job: in the
 * store's claim-and-answer loop (callgrind, 32 jobs a claim) SQLite's instructions per job went from
 * about 178,000 to 149,000 without them (with the claim's rows read as arrays). Such a statement raises `counts_kept` in the rows it changes, and the trigger skips a change that
 * raised it. Every other writer (failures, releases, retries, the batch lane, copy, a hand-written
 * UPDATE, an llmq of an earlier version still working the queue) leaves `counts_kept` alone and is
 * counted by the trigger as before. The moves themselves are in count-moves.ts.
 */
export const COUNTS_KEPT_MIGRATION: Migration = Object.freeze({
  version: 12,
  name: 'counts_kept',
  sql: `
ALTER TABLE jobs ADD COLUMN counts_kept INTEGER NOT NULL DEFAULT 0;   -- raised by a change whose counts the store moved itself
DROP TRIGGER jobs_count_update;
CREATE TRIGGER jobs_count_update AFTER UPDATE OF model, state, attempts, prompt_tokens, completion_tokens, cost_usd ON jobs
WHEN NEW.counts_kept IS OLD.counts_kept AND (OLD.model IS NOT NEW.model OR OLD.state IS NOT NEW.state
  OR (OLD.attempts > 0) IS NOT (NEW.attempts > 0) OR OLD.prompt_tokens IS NOT NEW.prompt_tokens
  OR OLD.completion_tokens IS NOT NEW.completion_tokens OR OLD.cost_usd IS NOT NEW.cost_usd)
${JOB_COUNT_UPDATE_BODY}
`,
});

/**
 * The API key each batch was sent with, as a fingerprint (the first 16 hex digits of a SHA-256 of
 * it) and its last four characters, never the key. A provider answers 404 for a batch made with a
 * key of another project; a run with another key must not take that 404 for a lost batch and send
 * its jobs again while it still runs and bills (src/batch/api-key-id.ts).
 */
export const BATCH_API_KEY_MIGRATION: Migration = Object.freeze({
  version: 13,
  name: 'batch_api_key',
  sql: `
ALTER TABLE batches ADD COLUMN api_key_fingerprint TEXT;   -- NULL: sent with no key, or before llmq kept it
ALTER TABLE batches ADD COLUMN api_key_hint TEXT;          -- the key's last four characters, for messages
`,
});

/**
 * How far each live batch has got, as the provider said at the last poll (its `request_counts`), so
 * `status` shows a batch's progress while it runs, not only once it has ended.
 */
export const BATCH_PROGRESS_MIGRATION: Migration = Object.freeze({
  version: 14,
  name: 'batch_progress',
  sql: `
ALTER TABLE batches ADD COLUMN provider_completed INTEGER;   -- requests the provider has answered so far; NULL: not said yet
ALTER TABLE batches ADD COLUMN provider_failed INTEGER;      -- requests that failed so far
`,
});

/**
 * Answered jobs no item needs any more are marked, so `status` counts done over the jobs items
 * need. Enqueueing an item with a changed request moves it to a new job; its old job, answered or
 * being answered, stays (the answer was paid for, and enqueueing the old text again reuses it) and
 * was counted as done: "done 313 52%" with 13 of 300 items answered. `orphaned` is set by the
 * enqueue that takes a job's last item away and cleared by one that gives it an item again
 * (src/store/sqlite/store.ts); the partial index holds only such jobs, so status counts them
 * without reading the table, and the hot path's updates of other jobs skip it. Jobs orphaned
 * before this migration are found once here: the keys of jobs_key less those of items_job, two
 * index walks in order (1,000,000 jobs: 0.4 s in all; a probe of items_job per job took 4 s).
 */
export const ORPHANED_ANSWERS_MIGRATION: Migration = Object.freeze({
  version: 15,
  name: 'orphaned_answers',
  sql: `
ALTER TABLE jobs ADD COLUMN orphaned INTEGER NOT NULL DEFAULT 0;   -- 1: no item points at this job (enqueue drops such jobs unless answered or being answered)
CREATE INDEX jobs_orphaned ON jobs (state) WHERE orphaned = 1;
UPDATE jobs SET orphaned = 1 WHERE key IN (SELECT key FROM jobs EXCEPT SELECT job_key FROM items);
`,
});

/**
 * A row while `llmq copy` writes into this queue, deleted when it finishes: a copy stopped halfway
 * (Ctrl-C, a crash) left a queue that looked whole, jobs without their items, which a run sent and
 * paid for. Commands refuse a queue that has one (`openExistingStore`).
 */
export const COPY_IN_PROGRESS_MIGRATION: Migration = Object.freeze({
  version: 16,
  name: 'copy_in_progress',
  sql: `
CREATE TABLE copying (
  source      TEXT    NOT NULL,   -- the queue copied from, never with credentials
  started_at  INTEGER NOT NULL
);
`,
});

/**
 * What the last enqueue of each input rejected: printed once among the enqueue's lines, and else
 * found only by reading the input again (`status` shows these).
 */
export const REJECTIONS_MIGRATION: Migration = Object.freeze({
  version: 17,
  name: 'rejections',
  sql: `
CREATE TABLE rejections (
  source    TEXT    PRIMARY KEY,   -- an input as enqueue spelled it (a folder, a file), - for stdin
  rejected  INTEGER NOT NULL,      -- documents the last enqueue of it rejected
  first     TEXT    NOT NULL,      -- JSON: the first of them, [{path, line?, reason}]
  at        INTEGER NOT NULL       -- when that enqueue read it
);
`,
});

/**
 * Requests `retry-failed --max-tokens` superseded, and the request with more room their items went
 * to: a later enqueue computing the old request again keeps the items there (src/store/superseded.ts).
 */
export const SUPERSEDED_MIGRATION: Migration = Object.freeze({
  version: 18,
  name: 'superseded',
  sql: `
CREATE TABLE superseded (
  key     TEXT NOT NULL PRIMARY KEY,   -- a request's key (jobs.key), its job dropped
  by_key  TEXT NOT NULL                -- the key of the request that superseded it
) WITHOUT ROWID;
CREATE INDEX superseded_by ON superseded (by_key);
`,
});

/** Migration 19's column on jobs, also added again by a bulk load's rebuild of `jobs` (rebuildJobs). */
const UNSENT_DEATHS_COLUMN_SQL =
  "ALTER TABLE jobs ADD COLUMN unsent_deaths INTEGER NOT NULL DEFAULT 0;   -- times a dead run's attempt was given back to this job";

/**
 * Jobs a dead run held without sending them: each run stores, on every heartbeat, the keys of the
 * jobs it holds whose counted try has not gone out (`runs.unsent`). When the run is found dead,
 * those jobs get that try's attempt back, up to `UNSENT_DEATHS_FORGIVEN` times each
 * (`jobs.unsent_deaths`): a run killed again and again (a cron job under `timeout -s KILL`, OOM
 * kills) failed documents that were never sent, while a document that crashes the process when it
 * goes out still uses up its attempts (src/store/unsent.ts).
 */
export const UNSENT_AT_DEATH_MIGRATION: Migration = Object.freeze({
  version: 19,
  name: 'unsent_at_death',
  sql: `
ALTER TABLE runs ADD COLUMN unsent TEXT;                                -- JSON array: keys of the jobs held and not sent at the last heartbeat
${UNSENT_DEATHS_COLUMN_SQL}
`,
});

/**
 * No table changes: `job_counts` may hold the state `dropped` from here on (tally.ts's DROPPED), which
 * an llmq of before read as jobs of an unknown state. The version makes it refuse the queue instead.
 */
export const DROPPED_COST_MIGRATION: Migration = Object.freeze({
  version: 20,
  name: 'dropped_cost',
  sql: `-- job_counts.state 'dropped': what the billed tries of jobs dropped unanswered cost`,
});

export const MIGRATIONS: readonly Migration[] = Object.freeze([
  {
    version: 1,
    name: 'initial',
    sql: `
CREATE TABLE jobs (
  seq               INTEGER PRIMARY KEY,            -- insertion order: FIFO within a priority
  key               TEXT    NOT NULL UNIQUE,        -- SHA-256 of the canonical request
  request           TEXT    NOT NULL,               -- the exact request body (canonical JSON)
  model             TEXT    NOT NULL,
  state             TEXT    NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'running', 'done', 'failed')),
  priority          INTEGER NOT NULL DEFAULT 0,     -- lower runs first
  attempts          INTEGER NOT NULL DEFAULT 0,     -- raised when a try starts
  run_after         INTEGER NOT NULL DEFAULT 0,     -- ms epoch; not claimed before
  lease_owner       TEXT,                           -- runs.id holding the job while running
  lease_expires_at  INTEGER,
  output            TEXT,                           -- the answer text
  response          TEXT,                           -- the provider's full response body
  prompt_tokens     INTEGER,
  completion_tokens INTEGER,
  error             TEXT,                           -- last error, or why it failed
  created_at        INTEGER NOT NULL,
  updated_at        INTEGER NOT NULL,
  finished_at       INTEGER
);
CREATE INDEX jobs_claim ON jobs (state, priority, seq);
CREATE INDEX jobs_lease ON jobs (lease_owner) WHERE lease_owner IS NOT NULL;
-- covers status: counts and tokens per model and state without reading the request text
CREATE INDEX jobs_usage ON jobs (model, state, prompt_tokens, completion_tokens);
CREATE INDEX jobs_age ON jobs (state, created_at);
CREATE INDEX jobs_retrying ON jobs (state) WHERE attempts > 0;

CREATE TABLE items (
  seq        INTEGER PRIMARY KEY,                   -- input order
  id         TEXT    NOT NULL UNIQUE,               -- relative path, JSONL id, file:line or custom_id
  source     TEXT    NOT NULL,
  job_key    TEXT    NOT NULL REFERENCES jobs (key),
  meta       TEXT,                                  -- JSON object of extra input fields
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE INDEX items_job ON items (job_key);

CREATE TABLE attempts (
  id                INTEGER PRIMARY KEY,
  job_key           TEXT    NOT NULL,
  run_id            TEXT    NOT NULL,
  attempt           INTEGER NOT NULL,
  started_at        INTEGER NOT NULL,
  ended_at          INTEGER NOT NULL,
  latency_ms        INTEGER NOT NULL,
  status            INTEGER,                        -- HTTP status; NULL for network errors
  outcome           TEXT    NOT NULL
                    CHECK (outcome IN ('done', 'retry', 'failed', 'not_counted', 'released')),
  error             TEXT,
  prompt_tokens     INTEGER,
  completion_tokens INTEGER
);
CREATE INDEX attempts_job ON attempts (job_key, id);

CREATE TABLE runs (
  id           TEXT    PRIMARY KEY,
  host         TEXT    NOT NULL,
  pid          INTEGER NOT NULL,
  started_at   INTEGER NOT NULL,
  heartbeat_at INTEGER NOT NULL,
  ended_at     INTEGER,
  exit_reason  TEXT,
  options      TEXT    NOT NULL,                    -- JSON, never holds the API key
  stats        TEXT                                 -- JSON RunStats, updated on each heartbeat
);
CREATE INDEX runs_open ON runs (ended_at, started_at);
`,
  },
  {
    version: 2,
    name: 'lanes',
    sql: `
-- rate limits learned per (base URL, model), so the next run starts at the right pace
CREATE TABLE lanes (
  base_url   TEXT    NOT NULL,                      -- the endpoint, never with credentials
  model      TEXT    NOT NULL,
  rpm        REAL,                                  -- per minute; NULL when unknown
  tpm        REAL,
  source     TEXT    NOT NULL CHECK (source IN ('headers', '429s')),
  learned_at INTEGER NOT NULL,
  PRIMARY KEY (base_url, model)
);
`,
  },
  BATCHES_MIGRATION,
  {
    version: 4,
    name: 'spend',
    sql: `
-- what each try and each answer cost, at the price known when it happened
ALTER TABLE jobs ADD COLUMN cost_usd REAL;                -- USD of the answer; NULL until done, or when no price was known
ALTER TABLE attempts ADD COLUMN cost_usd REAL;            -- USD of this try: its answer, 0 for an error answer, the worst case
                                                          -- when may_be_billed; NULL when no price was known
ALTER TABLE attempts ADD COLUMN may_be_billed INTEGER NOT NULL DEFAULT 0
                    CHECK (may_be_billed IN (0, 1));      -- 1: the request left and no answer came (timeout, reset, stopped)
-- status sums cost per model and state from the index, as it does tokens
DROP INDEX jobs_usage;
CREATE INDEX jobs_usage ON jobs (model, state, prompt_tokens, completion_tokens, cost_usd);

-- money per run, what --budget and --budget-total count: integer nano-USD (1e-9 USD), so that
-- millions of reservations and settlements add up exactly
CREATE TABLE spend (
  run_id            TEXT    PRIMARY KEY,                  -- runs.id
  reserved_nanousd  INTEGER NOT NULL DEFAULT 0,           -- worst cases of requests out now (of a dead run: out when it died)
  in_flight         INTEGER NOT NULL DEFAULT 0,           -- how many requests those are
  spent_nanousd     INTEGER NOT NULL DEFAULT 0,           -- what answered tries cost
  unknown_nanousd   INTEGER NOT NULL DEFAULT 0,           -- worst cases of tries that may be billed
  unknown_tries     INTEGER NOT NULL DEFAULT 0,
  unpriced_tries    INTEGER NOT NULL DEFAULT 0,           -- answered tries of models without a price (not in spent)
  updated_at        INTEGER NOT NULL
);
`,
  },
  CLAIM_BY_MODEL_MIGRATION,
  STATUS_COUNTS_MIGRATION,
  EXPORT_LATENCY_MIGRATION,
  BULK_LOAD_MIGRATION,
  ATTEMPTS_BY_JOB_SEQ_MIGRATION,
  JOB_REQUESTS_MIGRATION,
  ANSWER_LATENCY_MIGRATION,
  COUNTS_KEPT_MIGRATION,
  BATCH_API_KEY_MIGRATION,
  BATCH_PROGRESS_MIGRATION,
  ORPHANED_ANSWERS_MIGRATION,
  COPY_IN_PROGRESS_MIGRATION,
  REJECTIONS_MIGRATION,
  SUPERSEDED_MIGRATION,
  UNSENT_AT_DEATH_MIGRATION,
  DROPPED_COST_MIGRATION,
]);

export const LATEST_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;
