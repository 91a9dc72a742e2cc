/**
 * Jobs a dead run held without sending them. A claim counts an attempt before the request leaves
 * (docs/architecture.md, invariant 2): a document that crashes the process when it goes out must use
 * up its attempts rather than crash every run for ever. But a run holds more jobs than it has in
 * flight (up to twice `--concurrency`, or those waiting on a rate limit's pace), and a run killed
 * again and again (a cron job under `timeout -s KILL`, OOM kills) used up the attempts of documents
 * it never sent: they failed "gave up after 5 attempts: the run working on it died" with 0 requests.
 *
 * So each heartbeat stores the keys of the jobs the run holds whose counted try has not gone out
 * (`runs.unsent`), and when the run is found dead (or its leases ran out) those jobs get that
 * attempt back. So do the jobs its claims (or a retry's start) took at or after its last heartbeat,
 * once it has beaten at all, which no list has said yet (`updated_at`, which a running job's
 * recorded tries leave alone: a try that went out before the heartbeat and failed after it is no
 * unsent one). Not before its first heartbeat (half a second in): a document that kills the process
 * as it goes out is most often sent by the run's first claim, and uses its attempts as invariant 2
 * says. A run claims every few hundred milliseconds, and a run
 * killed 2 s after its last heartbeat held, unlisted, what it claimed meanwhile; twelve such kills
 * failed jobs at `--max-attempts 2` that had gone out once. A job given back this way may still
 * have gone out between the heartbeat and the death (the list is up to a heartbeat, 2 s, old), and
 * crashed it; or gone out, failed, and died in its backoff, when the attempt given back is that
 * counted try's (the next try then has its number). So a job gets an attempt back at most
 * `UNSENT_DEATHS_FORGIVEN` times (`jobs.unsent_deaths`), and such a document still ends failed,
 * after at most that many more runs.
 */
export const UNSENT_DEATHS_FORGIVEN = 10;

/** 1 when a job taken back from its dead owner gets its attempt back, else 0 (SQLite; the row is `jobs`). */
export const GIVE_BACK_UNSENT_SQLITE = `(unsent_deaths < ${UNSENT_DEATHS_FORGIVEN} AND attempts > 0
  AND (key IN (SELECT value FROM json_each((SELECT unsent FROM runs WHERE id = jobs.lease_owner)))
    OR coalesce((SELECT jobs.updated_at >= r.heartbeat_at AND r.heartbeat_at > r.started_at FROM runs r WHERE r.id = jobs.lease_owner), 0)))`;

/** The same for PostgreSQL, as an integer. */
export const GIVE_BACK_UNSENT_POSTGRES = `(jobs.unsent_deaths < ${UNSENT_DEATHS_FORGIVEN} AND jobs.attempts > 0
  AND EXISTS (SELECT 1 FROM runs r WHERE r.id = jobs.lease_owner AND (jobs.key = ANY(r.unsent) OR (jobs.updated_at >= r.heartbeat_at AND r.heartbeat_at > r.started_at))))::int`;
