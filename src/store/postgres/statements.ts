import { failsOnItsOwnSql } from '../own-failures.js';
import { RUN_DIED_TEXT } from '../claim-result.js';
import { pgText } from './pg-text.js';
import type pg from 'pg';
import type { AttemptRecord, Completion } from '../types.js';
import { AFTER_ENQUEUE_IN_PROGRESS_SQL } from './enqueue.js';
import { spendRunOf } from '../spend-amounts.js';
import { settlementParams, settleSql } from './spend.js';
import { ATTEMPT_COLUMNS, attemptValues, latencyOf } from '../rows.js';
import { DROPPED } from '../tally.js';

/** The PostgreSQL store's longer statements, and the parameters they take. */

/**
 * In a statement whose `dropped` gives the jobs it deleted (`model`, `cost_usd`): what their billed
 * tries cost, kept in the queue's cost as its dropped cost (tally.ts's DROPPED).
 */
const KEEP_DROPPED_COST_SQL = `
  INSERT INTO job_counts SELECT d.model, '${DROPPED}', count(*), 0, 0, 0, sum(d.cost_usd), 0, 0
  FROM dropped d WHERE d.cost_usd > 0 GROUP BY d.model`;

/**
 * Drop the jobs of the keys `$1` that no item needs any more (their document changed while they
 * were out) and are pending or failed, with their attempts: never to be sent. The rule enqueue
 * applies to the old job of a changed document, applied to jobs handed back or failed.
 */
const DROP_ORPHANS_SQL = `WITH dropped AS (
  DELETE FROM jobs j WHERE j.key = ANY($1::text[]) AND j.state IN ('pending', 'failed')
    AND NOT EXISTS (SELECT 1 FROM items i WHERE i.job_key = j.key) RETURNING j.key, j.model, j.cost_usd
), kept AS (${KEEP_DROPPED_COST_SQL}
) DELETE FROM attempts a WHERE a.job_key IN (SELECT key FROM dropped)`;

/**
 * DROP_ORPHANS_SQL for `keys`, in the transaction of `client`, once no enqueue is in progress: one
 * that had moved their items away but not committed would leave them unseen, and them kept.
 * `turnTaken`: the transaction waited for that already, before it locked the jobs' rows.
 */
export async function dropOrphans(client: pg.ClientBase, keys: readonly string[], o: { turnTaken?: boolean } = {}): Promise<void> {
  if (keys.length === 0) return;
  if (!o.turnTaken) await client.query(AFTER_ENQUEUE_IN_PROGRESS_SQL);
  await client.query(DROP_ORPHANS_SQL, [[...keys]]);
}

/**
 * Insert one attempt row and settle its run's money: two data-modifying CTEs whose values are the
 * first 19 parameters of the statement they are part of (ATTEMPT_PARAMS). They run to completion
 * whether or not the main query reads them, so a state change, its attempt row and its money go
 * in one statement, which is one transaction and one round trip.
 */
export const INSERT_ATTEMPT = `attempt AS (INSERT INTO attempts (${ATTEMPT_COLUMNS})
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)), ${settleSql(14)}`;
export const ATTEMPT_PARAMS = 19;

export function attemptParams(a: AttemptRecord): unknown[] {
  return [...attemptValues({ ...a, error: pgText(a.error) }, latencyOf(a), (billed) => billed), ...settlementParams(a)];
}

/** Fail a held job; its four parameters (error, now, key, owner) start at `$first`. */
export function failSql(first: number): string {
  const [error, now, key, owner, billed] = [0, 1, 2, 3, 4].map((i) => `$${first + i}`);
  return `UPDATE jobs SET state = 'failed', error = ${error}, cost_usd = ${addedCost(billed)}, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = ${now}, updated_at = ${now} WHERE key = ${key} AND state = 'running' AND lease_owner = ${owner}`;
}

/** A job's cost with a billed answer it did not keep added (`billedAnswerUsd`); `param` null adds nothing. */
export function addedCost(param: string): string {
  return `coalesce(cost_usd + ${param}::float8, ${param}::float8, cost_usd)`;
}

/**
 * The claim: lock up to `limit` pending jobs in priority-then-FIFO order, skipping rows another run
 * has locked (so concurrent claims never wait on each other nor take the same job), and in the same
 * statement either start them (attempts + 1, leased) or, when their attempts are used up (a crash
 * loop), fail them. MATERIALIZED makes the locked set be chosen exactly once.
 */
export const CLAIM_SQL = `
WITH picked AS MATERIALIZED (
  SELECT seq FROM jobs WHERE state = 'pending' AND run_after <= $2::bigint
  ORDER BY priority, seq LIMIT $5::int FOR UPDATE SKIP LOCKED
)
${claimUpdate('picked')}`;

/**
 * The claim when some lanes are full ($6: their models). Walking jobs_claim past every pending
 * job of a skipped model costs as much as its queue is long (a million jobs: every claim reads
 * them all), so the models with pending work are listed by a loose scan of jobs_claim_model (one
 * probe each), and each other model gives its first `limit` jobs from that index; the first
 * `limit` of those, in claim order, are taken.
 */
export const CLAIM_AROUND_SQL = `
WITH RECURSIVE models(model) AS (
  (SELECT model FROM jobs WHERE state = 'pending' ORDER BY model LIMIT 1)
  UNION ALL
  SELECT (SELECT j.model FROM jobs j WHERE j.state = 'pending' AND j.model > m.model ORDER BY j.model LIMIT 1)
  FROM models m WHERE m.model IS NOT NULL
), picked AS MATERIALIZED (
  SELECT c.seq FROM models m CROSS JOIN LATERAL (
    SELECT seq, priority FROM jobs WHERE state = 'pending' AND model = m.model AND run_after <= $2::bigint
    ORDER BY priority, seq LIMIT $5::int FOR UPDATE SKIP LOCKED
  ) c
  WHERE m.model IS NOT NULL AND NOT (m.model = ANY($6::text[]))
  ORDER BY c.priority, c.seq LIMIT $5::int
)
${claimUpdate('picked')}`;

/** Start each picked job (attempts + 1, leased), or fail it when its attempts are used up (a crash loop). */
function claimUpdate(picked: string): string {
  return `UPDATE jobs SET
  state = CASE WHEN attempts >= $1::int THEN 'failed' ELSE 'running' END,
  attempts = CASE WHEN attempts >= $1::int THEN attempts ELSE attempts + 1 END,
  error = CASE WHEN attempts >= $1::int
    THEN 'gave up after ' || attempts || CASE WHEN attempts = 1 THEN ' attempt' ELSE ' attempts' END || CASE
      WHEN EXISTS (SELECT 1 FROM attempts a WHERE a.job_key = jobs.key AND a.attempt = jobs.attempts AND a.outcome IN ('retry', 'failed', 'done'))
      THEN '; last error: ' || coalesce(error, 'unknown')
      ELSE ': ${RUN_DIED_TEXT}' || coalesce(' (last error: ' || error || ')', '') END
    ELSE error END,
  finished_at = CASE WHEN attempts >= $1::int THEN $2::bigint ELSE NULL END,
  lease_owner = CASE WHEN attempts >= $1::int THEN NULL ELSE $3::text END,
  lease_expires_at = CASE WHEN attempts >= $1::int THEN NULL ELSE $4::bigint END,
  updated_at = $2::bigint
WHERE seq IN (SELECT seq FROM ${picked})
RETURNING seq, key, request, model, priority, attempts, state, ${failsOnItsOwnSql('a.job_key = jobs.key')} AS "failsOnItsOwn"`;
}

/** One answer waiting for the group commit (see GroupCommit). */
export interface PendingCompletion {
  readonly key: string;
  readonly c: Completion;
}

/** Answers per statement; more wait for the next one (the parameters are arrays, so this bounds its size, not a count). */
export const COMPLETE_BATCH = 500;

/**
 * Group commit of answers: the batch arrives as one array per column (22 parameters whatever its
 * size). Every row inserts its attempt and settles its money; the first row for each key stores
 * the answer and marks the job done, unless it already is. Not tied to the lease: an answer that
 * arrives after the lease moved on is paid for, so keep it (and count it). Returns the 1-based
 * positions of the rows that marked a job done.
 */
export const COMPLETE_SQL = `
WITH input AS MATERIALIZED (
  SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::bigint[], $5::bigint[], $6::bigint[], $7::int[], $8::text[],
    $9::text[], $10::int[], $11::int[], $12::text[], $13::text[], $14::text[], $15::int[], $16::int[], $17::bool[], $18::float8[],
    $19::bigint[], $20::int[], $21::bigint[], $22::int[])
    WITH ORDINALITY AS t(a_key, run_id, attempt, started_at, ended_at, latency_ms, status, outcome, error, a_prompt, a_completion,
      key, output, response, prompt_tokens, completion_tokens, first, cost_usd, reserved, held, spent, unpriced, i)
), attempt AS (
  INSERT INTO attempts (job_key, run_id, attempt, started_at, ended_at, latency_ms, status, outcome, error, prompt_tokens, completion_tokens,
    cost_usd)
  SELECT a_key, run_id, attempt, started_at, ended_at, latency_ms, status, outcome, error, a_prompt, a_completion, cost_usd FROM input ORDER BY i
), settled AS (
  UPDATE spend SET reserved_nanousd = greatest(spend.reserved_nanousd - m.reserved, 0), in_flight = greatest(spend.in_flight - m.held, 0),
    spent_nanousd = spend.spent_nanousd + m.spent, unpriced_tries = spend.unpriced_tries + m.unpriced, updated_at = m.at
  FROM (SELECT ${spendRunOf('input.run_id')} AS run_id, sum(reserved) AS reserved, sum(held) AS held, sum(spent) AS spent,
          sum(unpriced) AS unpriced, max(ended_at) AS at
        FROM input GROUP BY 1) m
  WHERE spend.run_id = m.run_id AND m.held + m.spent + m.unpriced > 0
), done AS (
  UPDATE jobs SET state = 'done', output = input.output, response = input.response, prompt_tokens = input.prompt_tokens,
    completion_tokens = input.completion_tokens, cost_usd = input.cost_usd + coalesce(jobs.cost_usd, 0), latency_ms = input.latency_ms, error = NULL, lease_owner = NULL, lease_expires_at = NULL,
    finished_at = input.ended_at, updated_at = input.ended_at
  FROM input WHERE input.first AND jobs.key = input.key AND jobs.state <> 'done'
  RETURNING input.i
) SELECT i FROM done`;
