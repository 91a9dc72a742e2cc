/**
 * Where the SQLite store keeps a job's request (migration 10, job_requests, in migrations.ts): in
 * `job_requests` by the job's seq, written once at enqueue, so the job's row, rewritten at each
 * change of state, stays narrow. Jobs enqueued before that migration keep theirs in `jobs.request`;
 * since then `jobs.request` is ''. Every read of a request goes through `requestOf`.
 */

/** The request of the job row `j` (a table name or alias), wherever it is kept. */
export function requestOf(j: string): string {
  return `coalesce(nullif(${j}.request, ''), (SELECT r.request FROM job_requests r WHERE r.seq = ${j}.seq))`;
}

/** What `jobs.request` holds for a job whose request is in job_requests. */
export const REQUEST_KEPT_APART = '';

/** A new job's request, by the seq its insert into jobs was given. */
export const INSERT_REQUEST_SQL = 'INSERT INTO job_requests (seq, request) VALUES (?, ?)';

/** Every column of `jobs` as `SELECT *` would read them, with the request from where it is kept. */
export const JOB_COLUMNS = `seq, key, ${requestOf('jobs')} AS request, model, state, priority, attempts, run_after, lease_owner,
  lease_expires_at, output, response, prompt_tokens, completion_tokens, error, created_at, updated_at, finished_at, cost_usd, latency_ms`;
