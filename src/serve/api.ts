import type { Store } from '../store/types.js';

/** The most failed items one reason lists: enough to see the pattern, cheap with millions. */
export const FAILED_ITEMS_LIMIT = 50;

/** Put failed jobs back to pending: all of them, or those whose error is exactly `error`. */
export async function retryFailedJobs(store: Store, error: string | undefined, now: number): Promise<number> {
  // retryFailed matches a substring, case-insensitively: the dashboard names a whole reason, so a
  // reason that is part of a longer one also takes that one along; the page says how many moved.
  return store.retryFailed(error === undefined ? {} : { errorContains: error }, now);
}
