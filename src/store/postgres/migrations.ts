import type pg from 'pg';
import { StoreError } from '../../errors.js';
import { shellWord } from '../../shell-word.js';
import { quoteIdent } from './connect.js';

/**
 * Forward-only schema migrations for the PostgreSQL store, numbered on their own (the SQLite ones
 * differ in types). Append a new entry to change the schema; never edit one that has shipped.
 * Tables mirror the SQLite store: times are BIGINT milliseconds since the epoch.
 */
export interface Migration {
  readonly version: number;
  readonly name: string;
  readonly sql: string;
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
  created_at        BIGINT  NOT NULL,
  updated_at        BIGINT  NOT NULL,
  ended_at          BIGINT 
);
CREATE INDEX batches_open ON batches (state, created_at);
`,
});

/** A (model, state) group's contribution of a set of job rows `t`, times `sign` (1: rows that came, -1: rows that left). */
const jobCounts = (
  sign: string,
  t: string,
) => `SELECT ${t}.model, ${t}.state, ${sign} * count(*), ${sign} * count(*) FILTER (WHERE ${t}.attempts > 0),
    ${sign} * coalesce(sum(${t}.prompt_tokens), 0), ${sign} * coalesce(sum(${t}.completion_tokens), 0), ${sign} * coalesce(sum(${t}.cost_usd), 0),
    ${sign} * coalesce(sum(${t}.prompt_tokens) FILTER (WHERE ${t}.cost_usd IS NULL), 0),
    ${sign} * coalesce(sum(${t}.completion_tokens) FILTER (WHERE ${t}.cost_usd IS NULL), 0)`;
const failureCounts = (sign: string, t: string) => `SELECT coalesce(${t}.error, 'unknown error'), ${sign} * count(*)`;

/**
 * What `status` shows, kept up to date by triggers in the statement that changes a job or an item,
 * so reading it costs the same at any queue size. Triggers, not code in each state change: they
 * catch every path that writes jobs (enqueue, claim, answers, retries, reclaim, release,
 * retry-failed, the batch lane, copy) and any added later.
 *
 * Each statement's trigger appends its change as new rows (one per group it changed) instead of
 * updating one row per group: runs committing at once would otherwise queue on the lock of the
 * ('gpt-4o', 'running') row, and an enqueue transaction would hold the ('gpt-4o', 'pending') row
 * against every claim until it commits. Readers sum the rows; `FOLD_COUNTS_SQL` (store.ts) folds
 * them back to one per group now and then. Statement-level triggers see the statement's rows as
 * transition tables, so a claim or an answer batch of 500 jobs writes one row per group, not 500.
 */
export const STATUS_COUNTS_MIGRATION: Migration = Object.freeze({
  version: 6,
  name: 'status_counts',
  sql: `
-- an older llmq still working this queue waits here until the counts and their triggers exist:
-- a change it committed between the counting below and CREATE TRIGGER would never be counted
LOCK TABLE jobs, items IN SHARE ROW EXCLUSIVE MODE;
-- jobs per (model, state) with their tokens and stored cost, as changes to sum (GROUP BY model, state)
CREATE TABLE job_counts (
  model               TEXT             NOT NULL,
  state               TEXT             NOT NULL,
  jobs                BIGINT           NOT NULL,
  retried             BIGINT           NOT NULL,      -- of them, jobs with attempts > 0 (pending ones wait to be retried)
  prompt_tokens       BIGINT           NOT NULL,
  completion_tokens   BIGINT           NOT NULL,
  cost_usd            DOUBLE PRECISION NOT NULL,      -- sum of the stored costs
  unpriced_prompt     BIGINT           NOT NULL,      -- tokens of jobs stored without a cost
  unpriced_completion BIGINT           NOT NULL
);
-- failed jobs per reason as status groups them (a job without an error is 'unknown error'), as changes to sum
CREATE TABLE failure_counts (
  error TEXT   NOT NULL,
  jobs  BIGINT NOT NULL
);
CREATE TABLE item_counts (
  items BIGINT NOT NULL
);

INSERT INTO job_counts ${jobCounts('1', 'jobs')} FROM jobs GROUP BY model, state;
INSERT INTO failure_counts ${failureCounts('1', 'jobs')} FROM jobs WHERE state = 'failed' GROUP BY 1;
INSERT INTO item_counts SELECT count(*) FROM items;

-- search_path FROM CURRENT: the tables are those of the schema the function was made in, whoever calls it
CREATE FUNCTION llmq_count_jobs() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO job_counts ${jobCounts('1', 'n')} FROM new_rows n GROUP BY 1, 2;
    INSERT INTO failure_counts ${failureCounts('1', 'n')} FROM new_rows n WHERE n.state = 'failed' GROUP BY 1;
  ELSIF TG_OP = 'DELETE' THEN
    INSERT INTO job_counts ${jobCounts('-1', 'o')} FROM old_rows o GROUP BY 1, 2;
    INSERT INTO failure_counts ${failureCounts('-1', 'o')} FROM old_rows o WHERE o.state = 'failed' GROUP BY 1;
  ELSE
    -- only the rows whose counted columns changed: a lease renewal or a noted error adds nothing
    INSERT INTO job_counts
      SELECT model, state, sum(jobs), sum(retried), sum(prompt_tokens), sum(completion_tokens), sum(cost_usd), sum(unpriced_prompt),
        sum(unpriced_completion)
      FROM (${jobCounts('1', 'n')} FROM old_rows o JOIN new_rows n USING (seq)
              WHERE (o.model, o.state, o.attempts > 0, o.prompt_tokens, o.completion_tokens, o.cost_usd)
                IS DISTINCT FROM (n.model, n.state, n.attempts > 0, n.prompt_tokens, n.completion_tokens, n.cost_usd) GROUP BY 1, 2
            UNION ALL
            ${jobCounts('-1', 'o')} FROM old_rows o JOIN new_rows n USING (seq)
              WHERE (o.model, o.state, o.attempts > 0, o.prompt_tokens, o.completion_tokens, o.cost_usd)
                IS DISTINCT FROM (n.model, n.state, n.attempts > 0, n.prompt_tokens, n.completion_tokens, n.cost_usd) GROUP BY 1, 2
      ) AS change (model, state, jobs, retried, prompt_tokens, completion_tokens, cost_usd, unpriced_prompt, unpriced_completion)
      GROUP BY model, state;
    INSERT INTO failure_counts SELECT error, sum(jobs) FROM (
        ${failureCounts('1', 'n')} FROM old_rows o JOIN new_rows n USING (seq)
          WHERE n.state = 'failed' AND (o.state, o.error) IS DISTINCT FROM (n.state, n.error) GROUP BY 1
        UNION ALL
        ${failureCounts('-1', 'o')} FROM old_rows o JOIN new_rows n USING (seq)
          WHERE o.state = 'failed' AND (o.state, o.error) IS DISTINCT FROM (n.state, n.error) GROUP BY 1
      ) AS change (error, jobs) GROUP BY error HAVING sum(jobs) <> 0;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER jobs_count_insert AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION llmq_count_jobs();
CREATE TRIGGER jobs_count_update AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION llmq_count_jobs();
CREATE TRIGGER jobs_count_delete AFTER DELETE ON jobs REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION llmq_count_jobs();

CREATE FUNCTION llmq_count_items() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF TG_OP = 'INSERT' THEN
    INSERT INTO item_counts SELECT count(*) FROM new_rows HAVING count(*) > 0;
  ELSE
    INSERT INTO item_counts SELECT -count(*) FROM old_rows HAVING count(*) > 0;
  END IF;
  RETURN NULL;
END $$;
-- an upsert's updated items fire the UPDATE triggers only: its NEW TABLE here holds the inserted ones
CREATE TRIGGER items_count_insert AFTER INSERT ON items REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION llmq_count_items();
CREATE TRIGGER items_count_delete AFTER DELETE ON items REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION llmq_count_items();

-- jobs_usage only served counting, which the tables above now answer; jobs_age serves what jobs_state
-- did (a state's rows) and also finds the oldest pending job at its first entry
DROP INDEX jobs_usage;
DROP INDEX jobs_state;
CREATE INDEX jobs_age ON jobs (state, created_at);
`,
});

/**
 * The latency export writes for a job (its last attempt's) kept on the job, so the export reads it
 * with the row instead of looking it up in attempts for every item. A statement trigger with the
 * inserted rows as a transition table, as the counts do: it catches every path that records an
 * attempt, and a batch lane's statement of 500 answers updates 500 jobs in one go. A new attempt
 * always has the highest id, so a job's last inserted is its latest; attempts are only deleted with
 * their job. No backfill (it would write a new version of every job row): jobs last tried before
 * this migration keep NULL and the export looks theirs up as before (exportColumns), so the
 * migration takes the same time at any size.
 */
export const EXPORT_LATENCY_MIGRATION: Migration = Object.freeze({
  version: 7,
  name: 'export_latency',
  sql: `
ALTER TABLE jobs ADD COLUMN latency_ms BIGINT;             -- latency of the job's last attempt since this migration, else NULL
CREATE FUNCTION llmq_attempt_latency() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  UPDATE jobs SET latency_ms = last.latency_ms
    FROM (SELECT DISTINCT ON (job_key) job_key, latency_ms FROM new_rows ORDER BY job_key, id DESC) AS last
    WHERE jobs.key = last.job_key;
  RETURN NULL;
END $$;
CREATE TRIGGER attempts_latency AFTER INSERT ON attempts REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION llmq_attempt_latency();
`,
});

/**
 * Job keys (SHA-256 hex) compared byte by byte. Under the database's collation every comparison of
 * two keys (each index insert and lookup, every sort) went through strcoll on copies of both
 * strings: building the key index of 1M jobs took 5.8-6.9 s under C.UTF-8 and 1.3 s under "C", and
 * a bulk load builds it and `items_job` once more per load. Lowercase hex sorts and compares the
 * same under any collation, so nothing else changes. The tables are not rewritten (the type stays
 * text); the indexes on the three columns are rebuilt, and the foreign key is checked once more.
 */
export const KEY_COLLATION_MIGRATION: Migration = Object.freeze({
  version: 8,
  name: 'key_collation',
  sql: `
ALTER TABLE items DROP CONSTRAINT items_job_key_fkey;
ALTER TABLE jobs ALTER COLUMN key TYPE TEXT COLLATE "C";
ALTER TABLE items ALTER COLUMN job_key TYPE TEXT COLLATE "C";
ALTER TABLE attempts ALTER COLUMN job_key TYPE TEXT COLLATE "C";
ALTER TABLE items ADD CONSTRAINT items_job_key_fkey FOREIGN KEY (job_key) REFERENCES jobs (key);
`,
});

/**
 * The API key each batch was sent with, as a fingerprint (the first 16 hex digits of a SHA-256 of
 * it) and its last four characters, never the key. A provider answers 404 for a batch made with a
 * key of another project; a run with another key must not take that 404 for a lost batch and send
 * its jobs again while it still runs and bills (src/batch/api-key-id.ts).
 */
export const BATCH_API_KEY_MIGRATION: Migration = Object.freeze({
  version: 9,
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
  version: 10,
  name: 'batch_progress',
  sql: `
ALTER TABLE batches ADD COLUMN provider_completed INTEGER;   -- requests the provider has answered so far; NULL: not said yet
ALTER TABLE batches ADD COLUMN provider_failed INTEGER;      -- requests that failed so far
`,
});

/**
 * Answered jobs no item needs any more are marked, so `status` counts done over the jobs items
 * need (the SQLite store's migration 15 says why). Set by the enqueue that takes a job's last item
 * away, cleared by one that gives it an item again (enqueue.ts); jobs orphaned before this are
 * found once here. It holds `jobs` for the index build and that search: 1.3 s for 1,000,000 jobs
 * on the bench machine, so about 13 s at ten million, well within a run's 60 s lease.
 */
export const ORPHANED_ANSWERS_MIGRATION: Migration = Object.freeze({
  version: 11,
  name: 'orphaned_answers',
  sql: `
ALTER TABLE jobs ADD COLUMN orphaned BOOLEAN NOT NULL DEFAULT false;   -- true: no item points at this job (enqueue drops such jobs unless answered or being answered)
CREATE INDEX jobs_orphaned ON jobs (state) WHERE orphaned;
UPDATE jobs j SET orphaned = true WHERE NOT EXISTS (SELECT 1 FROM items i WHERE i.job_key = j.key);
`,
});

/**
 * Each run's clock against the server's, measured when it starts (src/store/postgres/clock.ts): a
 * run refuses to start on a machine whose clock is far from a live run's on another, as their
 * leases would then look over to each other while they still hold them.
 */
export const RUN_CLOCK_MIGRATION: Migration = Object.freeze({
  version: 12,
  name: 'run_clock',
  sql: `
ALTER TABLE runs ADD COLUMN clock_offset_ms BIGINT;   -- how far the run's clock was ahead of the server's (ms, negative: behind); NULL before llmq kept it
`,
});

/**
 * The trigger that keeps `jobs.latency_ms` at the last attempt's (migration 7) rewrote every job an
 * insert of attempts named, even when the job had that latency already: a second row version per
 * answer of a run (the answer's own statement now sets it: COMPLETE_SQL), and per job of a copy,
 * whose jobs come with their latency (300,000 jobs: 99 s, half the table dead rows; enqueue 8 s).
 * It now leaves such a job alone, as the SQLite trigger does.
 */
export const LATENCY_UNCHANGED_MIGRATION: Migration = Object.freeze({
  version: 13,
  name: 'latency_unchanged',
  sql: `
CREATE OR REPLACE FUNCTION llmq_attempt_latency() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  UPDATE jobs SET latency_ms = last.latency_ms
    FROM (SELECT DISTINCT ON (job_key) job_key, latency_ms FROM new_rows ORDER BY job_key, id DESC) AS last
    WHERE jobs.key = last.job_key AND jobs.latency_ms IS DISTINCT FROM last.latency_ms;
  RETURN NULL;
END $$;
`,
});

/** A row while `llmq copy` writes into this queue (the SQLite store's migration 16 says why). */
export const COPY_IN_PROGRESS_MIGRATION: Migration = Object.freeze({
  version: 14,
  name: 'copy_in_progress',
  sql: `
CREATE TABLE copying (
  source      TEXT    NOT NULL,   -- the queue copied from, never with credentials
  started_at  BIGINT  NOT NULL
);
`,
});

/**
 * The items whose id is their source (a JSONL line's without an id, `file:N`; a file of the current
 * folder), by id in byte order: an enqueue of a JSONL file reads its `file:N` items as a range of it
 * (`lineItemIds`). The unique index on id sorts in the database's collation, which bounds no prefix:
 * without this, each page of them was a scan of every item.
 */
export const LINE_IDS_MIGRATION: Migration = Object.freeze({
  version: 16,
  name: 'line_ids',
  sql: `
CREATE INDEX items_line_id ON items ((id COLLATE "C")) WHERE source = id;
`,
});

/** What the last enqueue of each input rejected (the SQLite store's migration 17 says why). */
export const REJECTIONS_MIGRATION: Migration = Object.freeze({
  version: 15,
  name: 'rejections',
  sql: `
CREATE TABLE rejections (
  source    TEXT    PRIMARY KEY,   -- an input as enqueue spelled it (a folder, a file), - for stdin
  rejected  BIGINT  NOT NULL,      -- documents the last enqueue of it rejected
  first     TEXT    NOT NULL,      -- JSON: the first of them, [{path, line?, reason}]
  at        BIGINT  NOT NULL       -- when that enqueue read it
);
`,
});

/** Requests `retry-failed --max-tokens` superseded (the SQLite store's migration 18 says why). */
export const SUPERSEDED_MIGRATION: Migration = Object.freeze({
  version: 17,
  name: 'superseded',
  sql: `
CREATE TABLE superseded (
  key     TEXT COLLATE "C" NOT NULL PRIMARY KEY,   -- a request's key (jobs.key), its job dropped
  by_key  TEXT COLLATE "C" NOT NULL                -- the key of the request that superseded it
);
CREATE INDEX superseded_by ON superseded (by_key);
`,
});

/** As SQLite's migration 20: no table changes; `job_counts` may hold the state `dropped`, which an older llmq misreads. */
export const DROPPED_COST_MIGRATION: Migration = Object.freeze({
  version: 19,
  name: 'dropped_cost',
  sql: `-- job_counts.state 'dropped': what the billed tries of jobs dropped unanswered cost`,
});

/** As SQLite's migration 19 (src/store/sqlite/migrations.ts): what a dead run held without sending it. */
export const UNSENT_AT_DEATH_MIGRATION: Migration = Object.freeze({
  version: 18,
  name: 'unsent_at_death',
  sql: `
ALTER TABLE runs ADD COLUMN unsent TEXT[] COLLATE "C";                  -- keys of the jobs held and not sent at the last heartbeat
ALTER TABLE jobs ADD COLUMN unsent_deaths INTEGER NOT NULL DEFAULT 0;   -- times a dead run's attempt was given back to this job
`,
});

export const MIGRATIONS: readonly Migration[] = Object.freeze([
  {
    version: 1,
    name: 'initial',
    sql: `
CREATE TABLE jobs (
  seq               BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- insertion order: FIFO within a priority
  key               TEXT    NOT NULL UNIQUE,        -- SHA-256 of the canonical request
  request           TEXT    NOT NULL,               -- the exact request body (canonical JSON)
  model             TEXT    NOT NULL,
  state             TEXT    NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'running', 'done', 'failed')),
  priority          INTEGER NOT NULL DEFAULT 0,     -- lower runs first
  attempts          INTEGER NOT NULL DEFAULT 0,     -- raised when a try starts
  run_after         BIGINT  NOT NULL DEFAULT 0,     -- ms epoch; not claimed before
  lease_owner       TEXT,                           -- runs.id holding the job while running
  lease_expires_at  BIGINT,
  output            TEXT,                           -- the answer text
  response          TEXT,                           -- the provider's full response body
  prompt_tokens     INTEGER,
  completion_tokens INTEGER,
  error             TEXT,                           -- last error, or why it failed
  created_at        BIGINT  NOT NULL,
  updated_at        BIGINT  NOT NULL,
  finished_at       BIGINT
);
-- claims read only pending rows in (priority, seq) order; SKIP LOCKED walks this index
CREATE INDEX jobs_claim ON jobs (priority, seq) WHERE state = 'pending';
CREATE INDEX jobs_state ON jobs (state);
CREATE INDEX jobs_lease ON jobs (lease_owner) WHERE lease_owner IS NOT NULL;
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE state = 'running';
-- covers status: counts and tokens per model and state without reading the request text
CREATE INDEX jobs_usage ON jobs (model, state) INCLUDE (prompt_tokens, completion_tokens);

CREATE TABLE items (
  seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- input order
  id         TEXT   NOT NULL UNIQUE,               -- relative path, JSONL id, file:line or custom_id
  source     TEXT   NOT NULL,
  job_key    TEXT   NOT NULL REFERENCES jobs (key),
  meta       TEXT,                                 -- JSON object of extra input fields, as written
  created_at BIGINT NOT NULL,
  updated_at BIGINT NOT NULL
);
CREATE INDEX items_job ON items (job_key);

CREATE TABLE attempts (
  id                BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  job_key           TEXT    NOT NULL,
  run_id            TEXT    NOT NULL,
  attempt           INTEGER NOT NULL,
  started_at        BIGINT  NOT NULL,
  ended_at          BIGINT  NOT NULL,
  latency_ms        BIGINT  NOT NULL,
  status            INTEGER,                        -- HTTP status; NULL for network errors
  outcome           TEXT    NOT NULL
                    CHECK (outcome IN ('done', 'retry', 'failed', 'not_counted', 'released')),
  error             TEXT,
  prompt_tokens     INTEGER,
  completion_tokens INTEGER
);
CREATE INDEX attempts_job ON attempts (job_key, id);

CREATE TABLE runs (
  seq          BIGINT  GENERATED ALWAYS AS IDENTITY UNIQUE,  -- insertion order, for copying
  id           TEXT    PRIMARY KEY,
  host         TEXT    NOT NULL,
  pid          INTEGER NOT NULL,
  started_at   BIGINT  NOT NULL,
  heartbeat_at BIGINT  NOT NULL,
  ended_at     BIGINT,
  exit_reason  TEXT,
  options      TEXT    NOT NULL,                    -- JSON, never holds the API key
  stats        TEXT                                 -- JSON RunStats, updated on each heartbeat
);
CREATE INDEX runs_open ON runs (started_at) WHERE ended_at IS NULL;
CREATE INDEX runs_started ON runs (started_at);
`,
  },
  {
    version: 2,
    name: 'lanes',
    sql: `
-- rate limits learned per (base URL, model), so the next run starts at the right pace
CREATE TABLE lanes (
  base_url   TEXT             NOT NULL,             -- the endpoint, never with credentials
  model      TEXT             NOT NULL,
  rpm        DOUBLE PRECISION,                      -- per minute; NULL when unknown
  tpm        DOUBLE PRECISION,
  source     TEXT             NOT NULL CHECK (source IN ('headers', '429s')),
  learned_at BIGINT           NOT NULL,
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
ALTER TABLE jobs ADD COLUMN cost_usd DOUBLE PRECISION;     -- USD of the answer; NULL until done, or when no price was known
ALTER TABLE attempts ADD COLUMN cost_usd DOUBLE PRECISION; -- USD of this try: its answer, 0 for an error answer, the worst case
                                                           -- when may_be_billed; NULL when no price was known
ALTER TABLE attempts ADD COLUMN may_be_billed BOOLEAN NOT NULL DEFAULT false;  -- the request left and no answer came
-- status sums cost per model and state from the index, as it does tokens
DROP INDEX jobs_usage;
CREATE INDEX jobs_usage ON jobs (model, state) INCLUDE (prompt_tokens, completion_tokens, cost_usd);

-- money per run, what --budget and --budget-total count: integer nano-USD (1e-9 USD), so that
-- millions of reservations and settlements add up exactly
CREATE TABLE spend (
  run_id            TEXT    PRIMARY KEY,                   -- runs.id
  reserved_nanousd  BIGINT  NOT NULL DEFAULT 0,            -- worst cases of requests out now (of a dead run: out when it died)
  in_flight         INTEGER NOT NULL DEFAULT 0,            -- how many requests those are
  spent_nanousd     BIGINT  NOT NULL DEFAULT 0,            -- what answered tries cost
  unknown_nanousd   BIGINT  NOT NULL DEFAULT 0,            -- worst cases of tries that may be billed
  unknown_tries     INTEGER NOT NULL DEFAULT 0,
  unpriced_tries    INTEGER NOT NULL DEFAULT 0,            -- answered tries of models without a price (not in spent)
  updated_at        BIGINT  NOT NULL
);
`,
  },
  {
    // Claims that skip full lanes read each other model's pending jobs from this index instead of
    // walking past every pending job of the skipped ones (see CLAIM_AROUND_SQL).
    version: 5,
    name: 'claim_by_model',
    sql: `
-- pending jobs per model in claim order (priority, then FIFO); also lists the models that have pending work
CREATE INDEX jobs_claim_model ON jobs (model, priority, seq) WHERE state = 'pending';
`,
  },
  STATUS_COUNTS_MIGRATION,
  EXPORT_LATENCY_MIGRATION,
  KEY_COLLATION_MIGRATION,
  BATCH_API_KEY_MIGRATION,
  BATCH_PROGRESS_MIGRATION,
  ORPHANED_ANSWERS_MIGRATION,
  RUN_CLOCK_MIGRATION,
  LATENCY_UNCHANGED_MIGRATION,
  COPY_IN_PROGRESS_MIGRATION,
  REJECTIONS_MIGRATION,
  LINE_IDS_MIGRATION,
  SUPERSEDED_MIGRATION,
  UNSENT_AT_DEATH_MIGRATION,
  DROPPED_COST_MIGRATION,
]);

export const LATEST_VERSION = MIGRATIONS[MIGRATIONS.length - 1]!.version;

const OUR_TABLES = [
  'jobs',
  'items',
  'attempts',
  'runs',
  'lanes',
  'batches',
  'spend',
  'job_counts',
  'failure_counts',
  'item_counts',
  'copying',
  'rejections',
  'superseded',
];

/**
 * Bring the schema up to date in one transaction under an advisory lock keyed by the schema, so two
 * processes starting together neither race to create tables nor apply a migration twice.
 */
export async function migrate(pool: pg.Pool, schema: string, location: string, existing = false): Promise<void> {
  const client = await pool.connect();
  try {
    // Up to date (every open but the first): one round trip instead of the locked transaction below.
    const applied = await client.query<{ v: number | null }>('SELECT max(version) AS v FROM llmq_migrations').catch(() => null);
    if (applied?.rows[0]?.v === LATEST_VERSION) return;
    // A reading command at a mistyped schema (or a database with none) would create an empty queue
    // there and report on it: refuse, as for an SQLite file that is not there.
    const hasQueue = async () =>
      (await client.query("SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'llmq_migrations'", [schema]))
        .rows.length > 0;
    if (existing && !applied && !(await hasQueue())) {
      throw new StoreError(
        `There is no llmq queue in schema "${schema}" of ${location}. Create one with: llmq enqueue <folder|file.jsonl> --db ${shellWord(location)}` +
          ' (or check the ?schema= of the URL).',
      );
    }
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`llmq:migrate:${schema}`]);
    // Only create a missing schema: CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege on the
    // database even when the schema exists, which a user of a shared `public` may not have.
    const exists = (await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema])).rows.length > 0;
    if (!exists) await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`);
    await client.query(`CREATE TABLE IF NOT EXISTS llmq_migrations (
      version    INTEGER PRIMARY KEY,
      name       TEXT    NOT NULL,
      applied_at BIGINT  NOT NULL
    )`);
    const current = (await client.query<{ v: number | null }>('SELECT max(version) AS v FROM llmq_migrations')).rows[0]!.v ?? 0;
    if (current > LATEST_VERSION) {
      throw new StoreError(
        `${location} was written by a newer llmq (schema version ${current}; this llmq knows up to ${LATEST_VERSION}). Upgrade llmq to use it.`,
      );
    }
    if (current === 0) {
      const clash = await client.query<{ table_name: string }>(
        `SELECT table_name FROM information_schema.tables WHERE table_schema = $1 AND table_name = ANY($2) ORDER BY 1 LIMIT 1`,
        [schema, OUR_TABLES],
      );
      if (clash.rows.length) {
        throw new StoreError(
          `Schema "${schema}" in ${location} already has a table "${clash.rows[0]!.table_name}" that llmq did not create. ` +
            `Give llmq its own schema, e.g. add ?schema=llmq to the URL.`,
        );
      }
    }
    for (const m of MIGRATIONS) {
      if (m.version <= current) continue;
      await client.query(m.sql);
      await client.query('INSERT INTO llmq_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [m.version, m.name, Date.now()]);
    }
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {});
    throw error;
  } finally {
    client.release();
  }
}
