import { ProviderError } from '../provider/types.js';
import { sentWithAnotherKey } from './api-key-id.js';
import { batchOwner, type BatchProgress, type BatchRow } from '../store/batches.js';
import type { AttemptRecord } from '../store/types.js';
import { QUOTA_CODES, TERMINAL_STATUSES, type ProviderBatch } from './api.js';
import { callWithRetry } from './call.js';
import type { BatchContext } from './context.js';
import { applyResults, type AppliedResults } from './results.js';

export type PollOutcome =
  | { readonly kind: 'open' }
  /** Sent with another API key, which this run's cannot see: not ours to collect or hand back. */
  | { readonly kind: 'other-key' }
  | { readonly kind: 'ended'; readonly applied: AppliedResults; readonly requeued: number }
  /** The provider refused it for having too much queued; its jobs are pending again. */
  | { readonly kind: 'quota'; readonly message: string; readonly requeued: number };

const NOTHING: AppliedResults = Object.freeze({
  done: 0,
  failed: 0,
  retried: 0,
  promptTokens: 0,
  completionTokens: 0,
  cutOff: 0,
  refused: 0,
  empty: 0,
  cutOffRoom: 0,
  costUsd: 0,
  unpriced: 0,
});

/**
 * Ask the provider how a submitted batch is doing; once it has ended, store what it answered and
 * hand every job it did not answer (expired, cancelled, missing lines) back to pending.
 */
export async function pollOne(ctx: BatchContext, row: BatchRow): Promise<PollOutcome> {
  let batch: ProviderBatch;
  try {
    batch = await ctx.api.getBatch(row.providerBatchId!, ctx.stopSignal);
  } catch (error) {
    if (error instanceof ProviderError && error.status === 404) {
      // a key of another project is answered 404 for a batch that may still run and be billed
      if (sentWithAnotherKey(row.apiKey, ctx.apiKey)) return { kind: 'other-key' };
      // The provider does not know it (deleted, or the offline mock of an earlier process): nothing
      // more will come, so its jobs go back to be sent again.
      return finish(ctx, row, 'lost', NOTHING, error.message);
    }
    throw error;
  }
  const progress = batch.counts && { completed: batch.counts.completed, failed: batch.counts.failed };
  if (batch.status !== row.providerStatus || !sameProgress(progress, row.progress)) {
    await ctx.store.batches.noteStatus(row.id, batch.status, progress, ctx.now());
    // an ended batch is told of once its results are stored ('ended')
    if (!TERMINAL_STATUSES.has(batch.status)) {
      ctx.emit({ type: 'progress', id: row.id, providerBatchId: batch.id, status: batch.status, jobs: row.jobs, progress });
    }
  }
  if (!TERMINAL_STATUSES.has(batch.status)) return { kind: 'open' };

  if (batch.status === 'failed') {
    const message = batch.errors.map((e) => (e.code ? `${e.code}: ${e.message}` : e.message)).join('; ') || 'the provider gave no reason';
    if (batch.errors.some((e) => e.code !== null && QUOTA_CODES.has(e.code))) {
      const requeued = await ctx.store.batches.end(row.id, {
        state: 'abandoned',
        providerStatus: batch.status,
        done: 0,
        failed: 0,
        error: message,
        now: ctx.now(),
        refund: true,
      });
      ctx.emit({ type: 'abandoned', id: row.id, requeued, reason: message });
      return { kind: 'quota', message, requeued };
    }
    // Refused whole (its file did not validate): sending the same lines again would be refused again.
    const failed = await failHeld(ctx, row, `the provider refused the batch ${batch.id}: ${message}`);
    return finish(ctx, row, batch.status, { ...NOTHING, failed }, message);
  }

  const files: string[] = [];
  for (const fileId of [batch.outputFileId, batch.errorFileId]) {
    if (fileId) files.push(await callWithRetry(ctx, `downloading ${fileId}`, () => ctx.api.fileContent(fileId, ctx.stopSignal)));
  }
  const applied = await applyResults(ctx.store, row.id, files, row.createdAt, ctx.now(), ctx.secret, ctx.batchCost, ctx.maxAttempts);
  ctx.crashAt('collected');
  return finish(ctx, row, batch.status, applied, null);
}

async function finish(
  ctx: BatchContext,
  row: BatchRow,
  status: string,
  applied: AppliedResults,
  error: string | null,
): Promise<PollOutcome> {
  // A line the provider left unanswered (missing from a completed batch, or not reached before the
  // batch expired) was a try, counted, and its attempt row says so (llmq show): a line it never
  // answers ends at --max-attempts instead of going round forever, a day a round on OpenAI.
  const unanswered = unansweredLines(status, row);
  if (unanswered !== null) await noteUnanswered(ctx, row, unanswered);
  const requeued = await ctx.store.batches.end(row.id, {
    state: 'ended',
    providerStatus: status,
    done: applied.done,
    failed: applied.failed,
    error,
    now: ctx.now(),
    refund: unanswered === null,
    jobError: unanswered,
    requeuedBefore: applied.retried,
  });
  ctx.emit({
    type: 'ended',
    id: row.id,
    providerBatchId: row.providerBatchId,
    providerStatus: status,
    done: applied.done,
    failed: applied.failed,
    requeued,
    cutOff: applied.cutOff,
    refused: applied.refused,
    empty: applied.empty,
  });
  return { kind: 'ended', applied, requeued };
}

/** The jobs the submission still holds, each with the attempt row its try ends with (no answer came for it). */
async function heldTries(ctx: BatchContext, row: BatchRow, outcome: 'retry' | 'failed', message: string): Promise<AttemptRecord[]> {
  const runId = batchOwner(row.id);
  const now = ctx.now();
  return (await ctx.store.batches.held(row.id)).map((j) => ({
    key: j.key,
    runId,
    attempt: j.attempts,
    startedAt: row.createdAt,
    endedAt: now,
    status: null,
    outcome,
    error: message,
    usage: null,
  }));
}

/**
 * Why the lines an ended batch still holds were not answered, when that counts as their try: missing
 * from a completed batch, or not reached before it expired. Null when it does not (cancelled, or lost
 * by the provider): their attempt is given back.
 */
function unansweredLines(status: string, row: BatchRow): string | null {
  if (status === 'completed') return `no answer in the output of batch ${row.providerBatchId}`;
  if (status === 'expired') return `batch ${row.providerBatchId} expired before the provider answered this line`;
  return null;
}

async function noteUnanswered(ctx: BatchContext, row: BatchRow, message: string): Promise<void> {
  const tries = await heldTries(ctx, row, 'retry', message);
  await Promise.all(tries.map((a) => ctx.store.recordAttempt(a, { countAttempt: true, error: message })));
}

async function failHeld(ctx: BatchContext, row: BatchRow, message: string): Promise<number> {
  const tries = await heldTries(ctx, row, 'failed', message);
  await Promise.all(tries.map((a) => ctx.store.fail(a.key, a.runId, message, a, a.endedAt)));
  return tries.length;
}

function sameProgress(a: BatchProgress | null, b: BatchProgress | null): boolean {
  return a === b || (a !== null && b !== null && a.completed === b.completed && a.failed === b.failed);
}
