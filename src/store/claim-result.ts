import type { ClaimedJob, ClaimResult } from './types.js';

/**
 * What the error of a job the claim failed (its attempts used up by runs that died with it, a crash
 * loop) says after "gave up after N attempts": `show` tells such a failure by it.
 */
export const RUN_DIED_TEXT = 'the run working on it died';

/** A row the claim statement returns: the job as it is now, started (`running`) or given up on (`failed`). */
export interface RawClaimed extends ClaimedJob {
  readonly seq: number;
  readonly state: string;
}

/**
 * The claim's answer from the rows its statement changed: the started jobs in claim order, and a
 * count of those failed instead because their attempts were used up. RETURNING comes back in no
 * promised order, so the rows are put in priority, then FIFO, order first.
 */
export function splitClaimed(rows: RawClaimed[]): ClaimResult {
  rows.sort((a, b) => a.priority - b.priority || a.seq - b.seq);
  const jobs: ClaimedJob[] = [];
  let exhausted = 0;
  for (const r of rows) {
    if (r.state === 'failed') exhausted++;
    else
      jobs.push({
        key: r.key,
        request: r.request,
        model: r.model,
        priority: r.priority,
        attempts: r.attempts,
        failsOnItsOwn: r.failsOnItsOwn === true,
      });
  }
  return { jobs, exhausted };
}
