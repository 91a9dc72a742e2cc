import { NoLiveBatchError } from './forget.js';
import { ProviderError } from '../provider/types.js';
import type { BatchRow } from '../store/batches.js';
import type { ApiKeyId } from './api-key-id.js';
import type { BatchLedger } from '../store/types.js';
import type { BatchApi } from './api.js';

export interface CancelResult {
  /** Provider batch ids asked to cancel. */
  readonly cancelled: string[];
  /**
   * Provider batch ids the provider does not know (404): gone, or the mock's, which lives only in
   * the process that made it. Nothing to cancel there; the next batch run hands their jobs back.
   */
  readonly unknown: string[];
  /** The endpoint each of those batches was sent to, as recorded, by provider batch id. */
  readonly sentTo: ReadonlyMap<string, string>;
  /** The API key each was sent with, as recorded, by provider batch id (null: none recorded). */
  readonly sentWith: ReadonlyMap<string, ApiKeyId | null>;
  /** The run that submitted each, by provider batch id. */
  readonly madeBy: ReadonlyMap<string, string>;
}

/**
 * Ask the provider to cancel our live batches: the one named (provider batch id or llmq submission
 * id), or all of them. Their jobs stay held until the next `llmq run --via batch` collects what was
 * answered before the cancel and hands the rest back to pending. `apiFor` gives the Batch API to
 * ask for each batch (batches of one queue may have gone to different endpoints).
 */
export async function cancelBatches(
  store: BatchLedger,
  apiFor: (batch: BatchRow) => BatchApi,
  which: string | undefined,
): Promise<CancelResult> {
  const live = (await store.batches.open()).filter((b) => b.state === 'submitted' && b.providerBatchId !== null);
  const chosen = which === undefined ? live : live.filter((b) => b.providerBatchId === which || b.id === which);
  if (which !== undefined && chosen.length === 0) {
    throw new NoLiveBatchError(which);
  }
  // every client made before the first cancel: one that cannot be (no key) stops it before anything is cancelled
  const apis = chosen.map(apiFor);
  const cancelled: string[] = [];
  const unknown: string[] = [];
  for (const [i, b] of chosen.entries()) {
    try {
      const answer = await apis[i]!.cancelBatch(b.providerBatchId!);
      cancelled.push(b.providerBatchId!);
      // kept, so status says `cancelling` at once, not the status of the last poll
      const progress = answer.counts ? { completed: answer.counts.completed, failed: answer.counts.failed } : b.progress;
      await store.batches.noteStatus(b.id, answer.status, progress, Date.now());
    } catch (error) {
      if (!(error instanceof ProviderError && error.status === 404)) throw error;
      unknown.push(b.providerBatchId!);
    }
  }
  return {
    cancelled,
    unknown,
    sentTo: new Map(chosen.map((b) => [b.providerBatchId!, b.baseUrl])),
    sentWith: new Map(chosen.map((b) => [b.providerBatchId!, b.apiKey])),
    madeBy: new Map(chosen.map((b) => [b.providerBatchId!, b.runId])),
  };
}
