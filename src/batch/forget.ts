import { LlmqError } from '../errors.js';
import type { BatchRow } from '../store/batches.js';
import type { BatchLedger } from '../store/types.js';

/** No live batch of the queue has the id given: the caller says how to list them (`llmq status` and its --db). */
export class NoLiveBatchError extends LlmqError {
  constructor(readonly which: string) {
    super(`No live batch of this queue is called ${which}.`);
  }

  /** The message with the command that lists the live batches. */
  withHint(statusCommand: string): LlmqError {
    return new LlmqError(`${this.message} See the live ones with: ${statusCommand}`);
  }
}

/** The provider status a forgotten submission ends with (shown by `status`). */
export const FORGOTTEN = 'forgotten';

/**
 * Hand the jobs of one live batch back to pending without asking the provider: the way out for a
 * batch llmq cannot reach any more (sent to an endpoint that is gone, or with an API key that was
 * revoked). If the batch still runs where it was sent it is billed there, and the next run sends
 * its jobs again: that is the user's call, which is why it is only ever one batch, named.
 */
export async function forgetBatch(
  store: BatchLedger,
  which: string,
  now: number,
  /**
   * Why the batch may not be forgotten now, or null: a live run collecting it would send its jobs
   * again in a new batch at once, while the batch runs on and is billed.
   */
  refuse: (batch: BatchRow) => Promise<string | null> = async () => null,
): Promise<{ batch: BatchRow; requeued: number }> {
  const batch = (await store.batches.open()).find((b) => b.providerBatchId === which || b.id === which);
  if (!batch) throw new NoLiveBatchError(which);
  const refused = await refuse(batch);
  if (refused !== null) throw new LlmqError(refused);
  const requeued = await store.batches.end(batch.id, {
    state: 'ended',
    providerStatus: FORGOTTEN,
    done: 0,
    failed: 0,
    error: 'forgotten (llmq batches forget): its jobs were handed back without asking the provider',
    now,
    refund: true,
  });
  return { batch, requeued };
}
