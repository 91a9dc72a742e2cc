import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { LlmqError } from '../errors.js';
import { BATCH_TAKEOVER_MS } from '../run-owners.js';
import { MOCK_BASE_URL } from '../mock-base-url.js';
import { ProviderError } from '../provider/types.js';
import type { RunSummary } from '../scheduler/events.js';
import { sleep } from '../scheduler/wait.js';
import type { BatchLedger } from '../store/types.js';
import type { PriceTable } from '../pricing/price-table.js';
import type { BatchRow } from '../store/batches.js';
import { adoptOrphans, orphansSoon } from './adopt.js';
import { apiKeyId } from './api-key-id.js';
import type { BatchApi } from './api.js';
import { callWithRetry } from './call.js';
import { pollOne } from './collect.js';
import type { BatchContext, BatchEvent, BatchLaneStore, CrashStep } from './context.js';
import { MAX_INPUT_BYTES } from './input-file.js';
import { submitOne } from './submit.js';

export interface BatchLaneOptions {
  /** Lines per batch at most (and never over `maxBytes`). @default 50000 */
  readonly batchSize?: number;
  /** @default 200 MB, the Batch API's cap */
  readonly maxBytes?: number;
  /** Between polls of live batches. @default 30000 */
  readonly pollMs?: number;
  /** Polls after errors back off up to this. @default 300000 */
  readonly maxPollMs?: number;
  /** Submit no more than this many jobs. */
  readonly limit?: number;
  /** @default 5 */
  readonly maxAttempts?: number;
  /** Submit, collect what has already finished, and return without waiting for the rest. */
  readonly noWait?: boolean;
  /** After the provider says too much is queued, wait this long before submitting again. @default 60000 */
  readonly quotaWaitMs?: number;
  /** Give up on a Batch API call failing this long. @default 900000 */
  readonly maxRetryMs?: number;
  /**
   * ms epoch: from then on submit nothing more, ask the provider to cancel our live batches, collect
   * what they answered and return (`--via auto` then sends the rest online).
   */
  readonly until?: number;
  /** @default 2000 */
  readonly heartbeatMs?: number;
  /** @default 60000 */
  readonly leaseMs?: number;
}

export interface BatchLaneDeps {
  readonly store: BatchLaneStore;
  readonly api: BatchApi;
  /** The endpoint, without credentials. */
  readonly baseUrl: string;
  readonly secret?: string;
  /** Prices answers at the batch price; without it batch answers are stored with no cost (unknown). */
  readonly prices?: PriceTable;
  readonly emit?: (event: BatchEvent) => void;
  /** Stop waiting: live batches stay at the provider, and the next run collects them. */
  readonly stopSignal?: AbortSignal;
  /** Called at each named step; tests make it kill the process there. */
  readonly crashAt?: (step: CrashStep) => void;
  readonly now?: () => number;
  readonly runId?: string;
  readonly host?: string;
  readonly pid?: number;
  readonly isAlive?: (pid: number) => boolean;
  /** Whether a run's process here is stopped (Ctrl-Z): its online jobs stay its own. @default isRunProcessStopped */
  readonly isStopped?: (pid: number, runStartedAt: number) => boolean;
  readonly describe?: Record<string, unknown>;
}

/**
 * The batch lane: send pending jobs through the provider's Batch API, in priority order, each job in
 * at most one live batch at a time, and store each answer as an online answer is stored. Returns
 * when nothing is pending or in a batch of ours (or at once after submitting, with `noWait`).
 */
export async function runBatchLane(deps: BatchLaneDeps, options: BatchLaneOptions = {}): Promise<RunSummary> {
  const { store } = deps;
  const now = deps.now ?? Date.now;
  const runId = deps.runId ?? randomUUID();
  const host = deps.host ?? hostname();
  const pid = deps.pid ?? process.pid;
  const pollMs = options.pollMs ?? 30_000;
  const maxPollMs = options.maxPollMs ?? 300_000;
  const limit = options.limit ?? Infinity;
  const heartbeatMs = options.heartbeatMs ?? 2000;
  const leaseMs = options.leaseMs ?? BATCH_TAKEOVER_MS;
  const stop = new AbortController();
  const onStop = (): void => stop.abort(new LlmqError('run stopped'));
  if (deps.stopSignal?.aborted) onStop();
  deps.stopSignal?.addEventListener('abort', onStop, { once: true });

  const ctx: BatchContext = {
    store,
    api: deps.api,
    runId,
    baseUrl: deps.baseUrl,
    secret: deps.secret,
    apiKey: apiKeyId(deps.secret),
    now,
    emit: deps.emit ?? (() => {}),
    crashAt: deps.crashAt ?? (() => {}),
    stopSignal: stop.signal,
    maxRetryMs: options.maxRetryMs ?? 900_000,
    batchCost: (model, usage) => deps.prices?.lookup(model)?.batchCost(usage) ?? null,
    maxAttempts: options.maxAttempts ?? 5,
  };
  const startedAt = now();
  const tally = {
    done: 0,
    failed: 0,
    retried: 0,
    requests: 0,
    promptTokens: 0,
    completionTokens: 0,
    cutOff: 0,
    refused: 0,
    empty: 0,
    cutOffRoom: 0,
    costUsd: 0,
    unpriced: 0,
  };
  const stats = () => {
    const { cutOff: _cut, refused: _refused, empty: _empty, cutOffRoom: _room, ...figures } = tally;
    return { ...figures, rateLimited: 0, jobsPerSecond: 0 };
  };
  await store.startRun({ id: runId, host, pid, startedAt, options: { via: 'batch', ...deps.describe } });
  const heartbeat = setInterval(() => {
    store.heartbeat(runId, now(), now() + leaseMs, stats()).catch(() => {});
  }, heartbeatMs);
  const live = { host, pid, isAlive: deps.isAlive, isStopped: deps.isStopped, leaseMs, quietMs: Math.max(3 * heartbeatMs, 5000) };

  let claimed = 0;
  let quotaUntil = 0;
  let errorStreak = 0;
  /** Since when polling has failed without a break: past `maxRetryMs` (--max-outage) the run ends, as an online one does. */
  let failingSince: number | null = null;
  let cancelling = false;
  /** Submissions made to another endpoint, already told of. */
  const saidElsewhere = new Set<string>();
  /** Runs dying here whose batches this run waits to take over, already told of. */
  const saidDying = new Set<string>();
  /** Submissions sent with another API key that this run's key cannot see: left alone, said once. */
  const otherKey = new Set<string>();
  const leaveToItsKey = (row: BatchRow): void => {
    if (otherKey.has(row.id) || row.apiKey === null) return;
    otherKey.add(row.id);
    ctx.emit({
      type: 'other-key',
      id: row.id,
      providerBatchId: row.providerBatchId,
      baseUrl: row.baseUrl,
      sentWith: row.apiKey,
      key: ctx.apiKey,
    });
  };
  let fatal: ProviderError | null = null;
  let reason: RunSummary['reason'] = 'drained';
  try {
    for (;;) {
      if (stop.signal.aborted) {
        reason = 'signal';
        break;
      }
      let pollError: unknown = null;
      try {
        if (!cancelling && options.until !== undefined && now() >= options.until) {
          cancelling = true;
          await cancelMine(ctx, otherKey);
        }
        // Near the deadline, take on no batch that may need hours more.
        if (!cancelling) {
          const adopted = await adoptOrphans(ctx, live);
          for (const b of adopted.elsewhere) {
            if (saidElsewhere.has(b.id)) continue;
            saidElsewhere.add(b.id);
            ctx.emit({ type: 'elsewhere', id: b.id, providerBatchId: b.providerBatchId, baseUrl: b.baseUrl });
          }
          for (const b of adopted.otherKey) leaveToItsKey(b);
        }
        for (const row of await mine(store, runId, otherKey)) {
          tally.requests++;
          const outcome = await pollOne(ctx, row);
          if (outcome.kind === 'other-key') leaveToItsKey(row);
          else if (outcome.kind === 'ended') {
            for (const k of [
              'done',
              'failed',
              'retried',
              'promptTokens',
              'completionTokens',
              'cutOff',
              'refused',
              'empty',
              'costUsd',
              'unpriced',
            ] as const)
              tally[k] += outcome.applied[k];
            tally.cutOffRoom = Math.max(tally.cutOffRoom, outcome.applied.cutOffRoom);
          } else if (outcome.kind === 'quota') {
            quotaUntil = now() + (options.quotaWaitMs ?? 60_000);
            ctx.emit({ type: 'waiting', reason: 'quota', untilMs: quotaUntil, message: outcome.message });
          }
        }
        errorStreak = 0;
        failingSince = null;
      } catch (error) {
        if (!(error instanceof ProviderError) || error.scope === 'run' || error.scope === 'model') throw error;
        failingSince ??= now();
        if (now() - failingSince > ctx.maxRetryMs) throw error;
        pollError = error;
      }

      while (!stop.signal.aborted && !cancelling && claimed < limit && now() >= quotaUntil) {
        const next = await store.nextPendingAt();
        if (next === null || next > now()) break;
        const result = await submitOne(ctx, {
          limit: Math.min(options.batchSize ?? 50_000, limit - claimed),
          maxBytes: options.maxBytes ?? MAX_INPUT_BYTES,
          maxAttempts: ctx.maxAttempts,
        });
        tally.failed += result.exhausted;
        if (result.kind === 'empty') break;
        if (result.kind === 'quota') {
          quotaUntil = now() + (options.quotaWaitMs ?? 60_000);
          ctx.emit({ type: 'waiting', reason: 'quota', untilMs: quotaUntil, message: result.message });
          break;
        }
        claimed += result.jobs;
      }
      if (options.noWait) {
        reason = claimed >= limit ? 'limit' : 'drained';
        break;
      }

      const open = (await mine(store, runId, otherKey)).length;
      const next = claimed < limit && !cancelling ? await store.nextPendingAt() : null;
      ctx.emit({ type: 'polled', open });
      const orphans = open === 0 && next === null && !cancelling ? await orphansSoon(ctx, live) : null;
      const soon = orphans?.soon ?? false;
      for (const run of orphans?.dying ?? []) {
        if (saidDying.has(run.id)) continue;
        saidDying.add(run.id);
        ctx.emit({ type: 'dying-run', runId: run.id, pid: run.pid, quietMs: live.quietMs });
      }
      if (open === 0 && next === null && !soon) {
        reason = claimed >= limit ? 'limit' : 'drained';
        break;
      }

      let wait = pollMs;
      if (pollError) {
        errorStreak++;
        wait = Math.min(maxPollMs, pollMs * 2 ** errorStreak);
        ctx.emit({ type: 'waiting', reason: 'error', untilMs: now() + wait, message: (pollError as Error).message });
      }
      if (soon) wait = Math.min(wait, 1000);
      if (options.until !== undefined && !cancelling) wait = Math.min(wait, Math.max(0, options.until - now()));
      if (open === 0 && next !== null) wait = Math.min(wait, Math.max(50, Math.max(next, quotaUntil) - now()));
      await sleep(wait, stop.signal).catch(() => {});
    }
  } catch (error) {
    if (error instanceof ProviderError) fatal = error;
    else if (!(error instanceof LlmqError && stop.signal.aborted)) {
      clearInterval(heartbeat);
      await store.finishRun(runId, now(), 'error', stats()).catch(() => {});
      throw error;
    }
    reason = fatal ? 'fatal' : 'signal';
  } finally {
    clearInterval(heartbeat);
    deps.stopSignal?.removeEventListener('abort', onStop);
  }
  // recorded as what it did: a --no-wait run leaves its batches out, it drained nothing (unless there was nothing to send)
  const left = options.noWait && reason === 'drained' ? (await store.status()).counts : null;
  const recorded = left && left.pending + left.running > 0 ? 'submitted, not waiting' : reason;
  await store.finishRun(runId, now(), recorded, stats());
  // The mock's Batch API ends with this process: its batches go now, their jobs back to pending,
  // rather than show as live and running until the next run finds them gone.
  if (deps.baseUrl === MOCK_BASE_URL) await store.batches.abandonUnsent([], now());
  const after = await store.status();
  return {
    runId,
    reason,
    done: tally.done,
    failed: tally.failed,
    retried: tally.retried,
    requests: tally.requests,
    // the Batch API is polled, not probed: an outage of it holds the run, and sends no jobs
    probes: 0,
    rateLimited: 0,
    strayRateLimited: 0,
    promptTokens: tally.promptTokens,
    completionTokens: tally.completionTokens,
    cutOff: tally.cutOff,
    refused: tally.refused,
    empty: tally.empty,
    cutOffRoom: tally.cutOffRoom,
    // a batch's answers are stored by whichever run collects it, once
    answersNotStored: 0,
    unreachable: false,
    wrongEndpoint: null,
    // a batch's requests are the provider's to answer: none is left unanswered by a stop
    mayBeBilled: { tries: 0, usd: 0 },
    wallMs: now() - startedAt,
    remaining: after.counts.pending + after.counts.running,
    // its own endpoint's batches are this lane's to collect; those of others it names as it ends
    uncollected: [],
    failedInStore: after.counts.failed,
    failuresInStore: after.failures,
    fatal: fatal ? { message: fatal.message, reason: fatal.reason, code: fatal.code, status: fatal.status, refused: null } : null,
    // to the nano-dollar the store counts in: a sum of floats said 0.001765199999999998 to --on-done
    costUsd: tally.unpriced > 0 ? null : Math.round(tally.costUsd * 1e9) / 1e9,
    budget: null,
  };
}

/** This run's submitted batches, but those it leaves to the key they were sent with. */
async function mine(store: BatchLedger, runId: string, leftToTheirKey: ReadonlySet<string> = new Set()) {
  return (await store.batches.open()).filter((b) => b.runId === runId && b.state === 'submitted' && !leftToTheirKey.has(b.id));
}

/** Ask the provider to cancel this run's live batches; what they answered is still collected. */
async function cancelMine(ctx: BatchContext, leftToTheirKey: ReadonlySet<string>): Promise<void> {
  for (const row of await mine(ctx.store, ctx.runId, leftToTheirKey)) {
    await callWithRetry(ctx, `cancelling ${row.providerBatchId}`, () => ctx.api.cancelBatch(row.providerBatchId!, ctx.stopSignal));
  }
}
