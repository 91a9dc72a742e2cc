import { CUT_OFF_TEXT } from '../provider/finish.js';
import type { JobQueue, QueueReader } from '../store/types.js';

/** The most failed items one reason lists: enough to see the pattern, cheap with millions. */
export const FAILED_ITEMS_LIMIT = 50;

/**
 * Put failed jobs back to pending: those whose error is exactly `error` (one row of the page), or all
 * of them but those cut off at max_tokens, as a plain `llmq retry-failed` leaves them: sent as they
 * were, they would most likely be cut off, and paid for, again. `leftCutOff`: how many it left.
 */
export async function retryFailedJobs(
  store: Pick<JobQueue, 'retryFailed'> & Pick<QueueReader, 'stateCounts'>,
  error: string | undefined,
  now: number,
): Promise<{ requeued: number; leftCutOff: number }> {
  if (error !== undefined) return { requeued: await store.retryFailed({ errorIs: error }, now), leftCutOff: 0 };
  const requeued = await store.retryFailed({ errorLacks: CUT_OFF_TEXT }, now);
  return { requeued, leftCutOff: (await store.stateCounts()).failed };
}
