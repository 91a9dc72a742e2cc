/**
 * Documents that always fail as an outage would (a 500 for that document alone, a reset, a timeout)
 * look like a provider that is down when they are all a run has left: it paused and probed with them
 * until --max-outage ended it, with them pending, every run. Their earlier tries tell them apart: a
 * try is counted only while no outage is open, so a job with such tries counted again and again, or
 * failed on one, failed while the provider answered others (`ClaimedJob.failsOnItsOwn`).
 */

/** Counted tries of a job, on errors an outage also gives, that make its next such failure its own. */
export const OWN_FAILURES_SEEN = 3;

/**
 * The attempt row `a` is a try that counted, on an error an outage also gives: no status (a reset, a
 * timeout), 408, 409, 5xx, or a 200 whose body was no completion (no usage recorded). Not a 200
 * answer that was not kept (cut off at max_tokens, declined, not the JSON asked for: its usage is
 * recorded): that is the request's own, and `retry-failed --max-tokens` sends such jobs again.
 */
const COUNTED_OUTAGE_LIKE = `a.outcome IN ('retry', 'failed')
  AND (a.status IS NULL OR a.status IN (408, 409) OR (a.status >= 500 AND a.status <> 501) OR (a.status = 200 AND a.prompt_tokens IS NULL))`;

/**
 * `ClaimedJob.failsOnItsOwn` of the row `jobs` a claim returns, from its attempts (`attemptsOfJob`, a
 * condition on `a`). A job never tried (`latency_ms` unset, as every attempt row sets it) reads none.
 */
export function failsOnItsOwnSql(attemptsOfJob: string): string {
  const tries = `FROM attempts a WHERE ${attemptsOfJob} AND ${COUNTED_OUTAGE_LIKE}`;
  return `CASE WHEN jobs.latency_ms IS NULL THEN 1 = 0
    ELSE (SELECT count(*) ${tries}) >= ${OWN_FAILURES_SEEN} OR EXISTS (SELECT 1 ${tries} AND a.outcome = 'failed') END`;
}
