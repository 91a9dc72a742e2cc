import { randomUUID } from 'node:crypto';
import { ProviderError } from '../provider/types.js';
import { batchOwner } from '../store/batches.js';
import type { ClaimedJob } from '../store/types.js';
import { QUOTA_CODES, type BatchPage, type ProviderBatch } from './api.js';
import { callWithRetry } from './call.js';
import { BATCH_LEASE_MS, type BatchContext } from './context.js';
import { buildInputFile } from './input-file.js';

/** The metadata every llmq batch carries: how a later run recognises its own after a crash. */
export function batchMetadata(submissionId: string): Record<string, string> {
  return { llmq: 'llmq', llmq_submission: submissionId };
}

/**
 * The provider's batch made for this submission, if any: searched newest first, down to batches
 * created a minute before the submission was recorded.
 */
export async function findBySubmission(ctx: BatchContext, submissionId: string, recordedAt: number): Promise<ProviderBatch | null> {
  let after: string | null = null;
  for (;;) {
    const cursor: string | null = after;
    const page: BatchPage = await callWithRetry(ctx, 'listing batches', () => ctx.api.listBatches(cursor, ctx.stopSignal));
    for (const b of page.batches) {
      if (b.metadata?.llmq_submission === submissionId) return b;
    }
    const last = page.batches.at(-1);
    if (!page.hasMore || !last || (last.createdAt > 0 && last.createdAt < recordedAt - 60_000)) return null;
    after = last.id;
  }
}

/**
 * Up to `limit` jobs of one model: the Batch API takes the requests of one model per input file (a
 * file naming two is refused, and every job in it was failed). The first job in claim order says
 * which; the rest are claimed with the other models left pending, so a queue of several models
 * fills each batch rather than claiming and handing back the others'. A job of a model enqueued
 * since the look at the queue is handed back.
 */
async function claimOneModel(
  ctx: BatchContext,
  owner: string,
  o: { limit: number; maxAttempts: number },
): Promise<{ jobs: ClaimedJob[]; exhausted: number }> {
  const { store } = ctx;
  const claim = (limit: number, skipModels?: string[]) =>
    store.claim({ owner, limit, now: ctx.now(), leaseUntil: ctx.now() + BATCH_LEASE_MS, maxAttempts: o.maxAttempts, skipModels });
  // a job whose attempts are used up is failed by the claim, not taken: look past such jobs
  let exhausted = 0;
  let first = await claim(1);
  while (first.jobs.length === 0 && first.exhausted > 0) {
    exhausted += first.exhausted;
    first = await claim(1);
  }
  first = { jobs: first.jobs, exhausted: exhausted + first.exhausted };
  const model = first.jobs[0]?.model;
  if (model === undefined || o.limit <= 1) return first;
  const others = (await store.status()).byModel.filter((m) => m.model !== model && m.pending > 0).map((m) => m.model);
  const rest = await claim(o.limit - 1, others);
  const stray = rest.jobs.filter((j) => j.model !== model).map((j) => j.key);
  if (stray.length > 0) await store.release(owner, { refund: true, now: ctx.now(), keys: stray });
  return { jobs: [...first.jobs, ...rest.jobs.filter((j) => j.model === model)], exhausted: first.exhausted + rest.exhausted };
}

export type SubmitOutcome =
  | { readonly kind: 'submitted'; readonly jobs: number }
  | { readonly kind: 'empty' }
  /** The provider has too much of ours queued: the jobs went back to pending; submit again later. */
  | { readonly kind: 'quota'; readonly message: string };

/**
 * One submission, each step recorded before the next so a crash anywhere is recoverable: the
 * submission row first, then its jobs (leased to `batch:<id>`, so nothing else sends them), the
 * uploaded file, the batch (carrying the submission id in its metadata), and its id.
 */
export async function submitOne(
  ctx: BatchContext,
  o: { limit: number; maxBytes: number; maxAttempts: number },
): Promise<SubmitOutcome & { exhausted: number }> {
  const { store } = ctx;
  const id = randomUUID();
  const owner = batchOwner(id);
  const recordedAt = ctx.now();
  await store.batches.begin({ id, runId: ctx.runId, baseUrl: ctx.baseUrl, apiKey: ctx.apiKey, now: recordedAt });
  ctx.crashAt('begun');
  const got = await claimOneModel(ctx, owner, o);
  const file = buildInputFile(got.jobs, o.maxBytes);
  if (file.left.length > 0) await store.release(owner, { refund: true, now: ctx.now(), keys: file.left });
  if (file.keys.length === 0) {
    await store.batches.end(id, {
      state: 'abandoned',
      providerStatus: null,
      done: 0,
      failed: 0,
      error: 'nothing to submit',
      now: ctx.now(),
      refund: true,
    });
    return { kind: 'empty', exhausted: got.exhausted };
  }
  await store.batches.noteJobs(id, file.keys.length, ctx.now());
  ctx.crashAt('claimed');
  let creating = false;
  // A create whose answer was lost (network, 5xx) may have made the batch: a refusal after it, of a
  // retry or of the look for it, does not say there is none.
  let mayExist = false;
  try {
    const fileId = await callWithRetry(ctx, 'uploading the batch input', () =>
      ctx.api.uploadFile(`llmq-${id}.jsonl`, file.content, ctx.stopSignal),
    );
    if (!(await store.batches.noteInputFile(id, fileId, ctx.now()))) return takenFromUs(ctx, id, got.exhausted);
    ctx.crashAt('uploaded');
    creating = true;
    const batch = await callWithRetry(
      ctx,
      'creating the batch',
      async () => {
        try {
          return await ctx.api.createBatch(fileId, batchMetadata(id), ctx.stopSignal);
        } catch (error) {
          if (!isRefusal(error)) mayExist = true;
          throw error;
        }
      },
      // The answer to a create may be lost after the batch was made: look before making another.
      () => findBySubmission(ctx, id, recordedAt),
    );
    ctx.crashAt('created');
    if (!(await store.batches.submitted(id, batch.id, batch.status, ctx.now()))) {
      // abandoned while it was being created, its jobs handed back: this batch must not answer them too
      await ctx.api.cancelBatch(batch.id).catch(() => undefined);
      return takenFromUs(ctx, id, got.exhausted);
    }
    ctx.crashAt('submitted');
    // a batch holds one model's jobs (claimOneModel)
    ctx.emit({ type: 'submitted', id, providerBatchId: batch.id, jobs: file.keys.length, model: got.jobs[0]!.model });
    return { kind: 'submitted', jobs: file.keys.length, exhausted: got.exhausted };
  } catch (error) {
    // A create that was not plainly refused may have happened: the submission stays `preparing`
    // with its jobs held, and the next run looks for its batch before handing them back.
    if (creating && (mayExist || !isRefusal(error))) throw error;
    // Never created: hand the jobs back, their attempt unused.
    const message = error instanceof Error ? error.message : String(error);
    const requeued = await store.batches.end(id, {
      state: 'abandoned',
      providerStatus: null,
      done: 0,
      failed: 0,
      error: message,
      now: ctx.now(),
      refund: true,
    });
    ctx.emit({ type: 'abandoned', id, requeued, reason: message });
    if (error instanceof ProviderError && error.code !== null && QUOTA_CODES.has(error.code)) {
      return { kind: 'quota', message, exhausted: got.exhausted };
    }
    throw error;
  }
}

/** The provider plainly refused the call (a 4xx): it did nothing. */
function isRefusal(error: unknown): boolean {
  return error instanceof ProviderError && error.status !== null && error.status >= 400 && error.status < 500;
}

/**
 * The submission was abandoned by another run, which took this one for dead (a stall past the
 * lease, a same-named host) and handed its jobs back: nothing of it is sent from here.
 */
function takenFromUs(ctx: BatchContext, id: string, exhausted: number): { kind: 'empty'; exhausted: number } {
  ctx.emit({ type: 'abandoned', id, requeued: 0, reason: 'another run took this one for dead and handed its jobs back' });
  return { kind: 'empty', exhausted };
}
