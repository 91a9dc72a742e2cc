// A rule of the lanes' memory that the run (scheduler/lane.ts) and the reports (estimate, status)
// read alike; kept apart from the scheduler so that `status` loads none of it.

/**
 * How long a pace that only 429s taught is kept for the next run. No limit was said: the 429s may
 * have been an overloaded proxy's, another client's burst, or a quota since raised, and a pace cut
 * to a fifth by them held every later run to it, climbing back to the cap over minutes. A run
 * restarted soon after (a crash, a Ctrl-C) still starts at it; a later one starts at its caps and
 * learns again if the 429s come back. Limits the provider said (headers) are kept as they are.
 */
export const LEARNED_FROM_429S_KEPT_MS = 15 * 60_000;

/** Whether a limit an earlier run remembered still holds for a run starting at `now` (`LEARNED_FROM_429S_KEPT_MS`). */
export function stillRemembered(learned: { readonly source: 'headers' | '429s'; readonly at: number }, now: number): boolean {
  return learned.source !== '429s' || now - learned.at <= LEARNED_FROM_429S_KEPT_MS;
}
