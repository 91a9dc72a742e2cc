import type pg from 'pg';
import { query } from './connect.js';
/**
 * Folds the change rows the `status_counts` triggers append (src/store/postgres/migrations.ts) into
 * one row per group, so what readers sum stays small. One folder at a time (a try lock: the others
 * skip, never wait); the rows it deletes are only ever written once, by the triggers, so it takes no
 * lock a run or an enqueue could wait on. Rows committed meanwhile are left for the next fold.
 */
export const FOLD_COUNTS_SQL = `
WITH turn AS (SELECT pg_try_advisory_xact_lock(hashtext('llmq:fold-counts:' || current_schema())) AS mine),
jobs_rows AS (DELETE FROM job_counts WHERE (SELECT mine FROM turn) RETURNING *),
jobs_folded AS (
  INSERT INTO job_counts SELECT model, state, sum(jobs), sum(retried), sum(prompt_tokens), sum(completion_tokens), sum(cost_usd),
    sum(unpriced_prompt), sum(unpriced_completion)
  FROM jobs_rows GROUP BY model, state HAVING sum(jobs) <> 0
),
failure_rows AS (DELETE FROM failure_counts WHERE (SELECT mine FROM turn) RETURNING *),
failures_folded AS (INSERT INTO failure_counts SELECT error, sum(jobs) FROM failure_rows GROUP BY error HAVING sum(jobs) <> 0),
item_rows AS (DELETE FROM item_counts WHERE (SELECT mine FROM turn) RETURNING *)
INSERT INTO item_counts SELECT sum(items) FROM item_rows HAVING count(*) > 0`;

/**
 * Folds the counts, and lets a failed fold pass: readers sum every row there is, folded or not, so a
 * fold that fails (a session that may not write, a lock or statement timeout, a serialization
 * failure) costs only a longer sum until the next one succeeds. It must never fail the heartbeat
 * that calls it, which would stop a run that is otherwise fine, nor a `status`.
 */
export async function foldCounts(pool: pg.Pool): Promise<void> {
  await query(pool, FOLD_COUNTS_SQL).catch(() => {});
}
