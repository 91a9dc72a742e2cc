/**
 * When a run last worked, in SQL both stores speak: its end, or for a run that died its last
 * heartbeat. A died run's `ended_at` is when another run took its jobs back, up to a lease after its
 * last work: by that, a run killed early read as the last one though another worked after it.
 */
export const LAST_WORKED_SQL = "CASE WHEN exit_reason = 'died' THEN heartbeat_at ELSE coalesce(ended_at, heartbeat_at) END";
