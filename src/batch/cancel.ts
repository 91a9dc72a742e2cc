import { LlmqError } from '../errors.js';
import type { BatchLedger } from '../store/types.js';
import type { BatchApi } from './api.js';

export interface CancelResult {
  /** Provider batch ids asked to cancel. */
  readonly cancelled: string[];
}

/**
 * Ask the provider to cancel our live batches: the one named (provider batch id or llmq submission
 * id), or all of them. Their jobs stay held until the next `llmq run --via batch` collects what was
 * answered before the cancel and hands the rest back to pending.
 */
export async function cancelBatches(store: BatchLedger, api: BatchApi, which: string | undefined): Promise<CancelResult> {
  const live = (await store.batches.open()).filter((b) => b.state === 'submitted' && b.providerBatchId !== null);
  const chosen = which === undefined ? live : live.filter((b) => b.providerBatchId === which || b.id === which);
  if (which !== undefined && chosen.length === 0) {
    throw new LlmqError(`No live batch of this queue is called ${which}. See the live ones with: llmq status`);
  }
  const cancelled: string[] = [];
  for (const b of chosen) {
    await api.cancelBatch(b.providerBatchId!);
    cancelled.push(b.providerBatchId!);
  }
  return { cancelled };
}
