import type { JobQueue } from '../store/types.js';

/** The most failed items one reason lists: enough to see the pattern, cheap with millions. */
export const FAILED_ITEMS_LIMIT = 50;

/** Put failed jobs back to pending: all of them, or those whose error is exactly `error` (one row of the page). */
export async function retryFailedJobs(store: Pick<JobQueue, 'retryFailed'>, error: string | undefined, now: number): Promise<number> {
  return store.retryFailed(error === undefined ? {} : { errorIs: error }, now);
}
