import pRetry from 'p-retry';
import { ProviderError, type CompletionResult, type Provider, type RateLimitInfo } from '../provider/types.js';
import type { AttemptOutcome, AttemptRecord, ClaimedJob, Store } from '../store/types.js';
import type { SchedulerListener } from './events.js';
import { estimatePromptTokens, requestedCompletionTokens } from '../provider/tokens.js';
import type { RateLimiter } from './limiter.js';
import type { OutageBreaker } from './outage.js';
import type { Semaphore } from './semaphore.js';
import type { RunCounters } from './stats.js';

/** Everything one job needs from its run. */
export interface JobContext {
  readonly store: Store;
  readonly provider: Provider;
  readonly limiter: RateLimiter;
  readonly breaker: OutageBreaker;
  readonly slots: Semaphore;
  readonly counters: RunCounters;
  readonly emit: SchedulerListener;
  readonly runId: string;
  readonly maxAttempts: number;
  readonly leaseMs: number;
  /** First backoff between tries; doubles each counted failure, randomized x1-2. */
  readonly retryDelayMs: number;
  readonly maxRetryDelayMs: number;
  /** Soft stop: no new request goes out, waits end. */
  readonly stopSignal: AbortSignal;
  /** Hard stop: in-flight requests are aborted. */
  readonly abortSignal: AbortSignal;
  readonly now: () => number;
  /** Called once with a run-fatal error; the run stops. */
  readonly onFatal: (error: ProviderError) => void;
}

/**
 * How a job left this run. `unsent`: stopped before its request went out; it goes back to pending
 * with its attempt given back. `interrupted`: stopped after its last try was written down; it goes
 * back to pending as it is.
 */
export type JobOutcome = 'done' | 'failed' | 'unsent' | 'interrupted';

/** A try that failed and may be retried; `counted` says whether it used up an attempt. */
class TryFailed extends Error {
  constructor(readonly error: ProviderError, readonly counted: boolean) {
    super(error.message);
  }
}

/** Ends the retry loop (shouldRetry says no); the job's fate was already decided. */
class JobSettled extends Error {
  constructor(readonly outcome: JobOutcome, message: string) {
    super(message);
  }
}

/**
 * Take one claimed job to the end of its life in this run: done, failed, or handed back. Each try
 * waits for a concurrency slot, the outage breaker and the rate limiter, then sends the request;
 * the result is written to the store before the next thing happens. Never throws.
 */
export async function runJob(job: ClaimedJob, ctx: JobContext): Promise<JobOutcome> {
  let attempt = job.attempts;
  let sentThisTry = false;
  let backingOff = false;
  const tally: JobTally = { uncountedOutages: 0, firstUncountedAt: 0 };
  const tokens = ctx.limiter.tokenCapacity === null ? null : tokenEstimate(job.request);
  try {
    await pRetry(
      async (n) => {
        if (n > 1) {
          backingOff = false;
          ctx.counters.backingOff--;
          const raised = await ctx.store.startRetry(job.key, ctx.runId, ctx.now(), ctx.now() + ctx.leaseMs);
          if (raised === null) throw new JobSettled('interrupted', 'lost the lease');
          attempt = raised;
        }
        sentThisTry = false;
        await tryOnce(job, attempt, tokens, ctx, () => (sentThisTry = true), tally);
      },
      {
        retries: 1_000_000, // bounded by maxAttempts, counted in the store
        factor: 2,
        minTimeout: ctx.retryDelayMs,
        maxTimeout: ctx.maxRetryDelayMs,
        randomize: true,
        signal: ctx.stopSignal,
        shouldConsumeRetry: ({ error }) => !(error instanceof TryFailed) || error.counted,
        shouldRetry: ({ error }) => error instanceof TryFailed,
        onFailedAttempt: ({ error }) => {
          if (error instanceof TryFailed) {
            backingOff = true;
            ctx.counters.backingOff++;
          }
        },
      },
    );
    return 'done';
  } catch (error) {
    if (error instanceof JobSettled) return error.outcome;
    if (ctx.stopSignal.aborted || ctx.abortSignal.aborted) {
      if (backingOff) ctx.counters.backingOff--;
      // Stopped before this try's request went out: its attempt is given back. Stopped while
      // backing off: the last try was already written down as it was.
      return sentThisTry ? 'interrupted' : 'unsent';
    }
    throw error;
  }
}

/** Prompt tokens (by our tokenizer) and the request's weight: prompt plus the completion budget it reserves. */
function tokenEstimate(requestJson: string): { prompt: number; weight: number } {
  const request = JSON.parse(requestJson) as Parameters<typeof estimatePromptTokens>[0];
  const prompt = estimatePromptTokens(request);
  return { prompt, weight: prompt + requestedCompletionTokens(request) };
}

/** What one job has been through in this run, across its tries. */
interface JobTally {
  /** Outage-type failures that did not use up an attempt. */
  uncountedOutages: number;
  /** When the first of them happened (ms epoch). */
  firstUncountedAt: number;
}

/**
 * A job's outage failures count again once the provider has shown it is up (it answered others
 * since this job's first uncounted failure) and the job failed this often: such a document breaks
 * the connection by itself and must end failed, not loop. A real outage never meets the first
 * condition. A document that is the last one left (so always the probe, and indistinguishable from
 * an outage) counts again after half an hour.
 */
const MAX_UNCOUNTED_OUTAGES = 5;
const MAX_UNCOUNTED_OUTAGE_MS = 30 * 60_000;

async function tryOnce(job: ClaimedJob, attempt: number, tokens: { prompt: number; weight: number } | null, ctx: JobContext,
  markSent: () => void, tally: JobTally): Promise<void> {
  const c = ctx.counters;
  c.waiting++;
  let probe = false;
  try {
    await ctx.slots.acquire(ctx.stopSignal);
    try {
      probe = await ctx.breaker.gate(ctx.stopSignal);
      await ctx.limiter.acquire(tokens?.weight ?? 0, ctx.stopSignal, job.model);
    } catch (error) {
      ctx.slots.release();
      throw error;
    }
  } catch (error) {
    if (probe) ctx.breaker.probeAbandoned();
    throw error; // stop signal: unsent
  } finally {
    c.waiting--;
  }

  if (ctx.stopSignal.aborted) {
    // The stop came while we waited for a shared (Redis) limiter: nothing has been sent.
    ctx.slots.release();
    if (probe) ctx.breaker.probeAbandoned();
    throw ctx.stopSignal.reason;
  }
  const startedAt = ctx.now();
  c.inFlight++;
  c.requests++;
  markSent();
  ctx.emit('job:start', { key: job.key, attempt, model: job.model });
  let result: CompletionResult;
  try {
    result = await ctx.provider.complete(job.request, { signal: ctx.abortSignal });
  } catch (error) {
    c.inFlight--;
    ctx.slots.release();
    if (ctx.abortSignal.aborted && !(error instanceof ProviderError)) {
      if (probe) ctx.breaker.probeAbandoned();
      await record(ctx, job.key, attempt, startedAt, null, 'released', 'stopped while the request was in flight');
      throw error;
    }
    if (!(error instanceof ProviderError)) throw error;
    await onFailure(job, attempt, startedAt, error, ctx, tally);
    return; // unreachable: onFailure always throws
  }
  c.inFlight--;
  ctx.breaker.success();
  respectRateLimitHeaders(result.rateLimit, tokens?.weight ?? 1, ctx);
  const endedAt = ctx.now();
  const usage = result.usage;
  // Providers reserve prompt + max_tokens when a request arrives, so only the prompt part is
  // corrected: our tokenizer may count the prompt differently from the provider's.
  if (tokens) ctx.limiter.settle(tokens.prompt, usage.promptTokens, job.model);
  const attemptRecord: AttemptRecord = {
    key: job.key, runId: ctx.runId, attempt, startedAt, endedAt, status: result.status, outcome: 'done', error: null, usage,
  };
  // The slot is held until the answer is committed: at any moment at most --concurrency answers are
  // paid for and not yet stored, which bounds what a crash can make us pay twice.
  let stored: boolean;
  try {
    stored = await ctx.store.complete(job.key, { owner: ctx.runId, output: result.output, response: result.body, usage, attempt: attemptRecord });
  } finally {
    ctx.slots.release();
  }
  // Another run already finished it (our lease had lapsed): its answer stands, ours is not counted.
  if (!stored) return;
  c.done++;
  c.promptTokens += usage.promptTokens;
  c.completionTokens += usage.completionTokens;
  c.finished(endedAt, usage.promptTokens + usage.completionTokens);
  ctx.emit('job:done', { key: job.key, attempt, latencyMs: endedAt - startedAt, usage });
}

/** Decide what a failed try means for the job and the run, write it down, and end the try. */
async function onFailure(job: ClaimedJob, attempt: number, startedAt: number, error: ProviderError, ctx: JobContext,
  tally: JobTally): Promise<never> {
  const c = ctx.counters;
  const now = ctx.now();
  // A 404 before anything has been answered is the endpoint or the model, not this job: stop and
  // say so rather than failing the whole queue one job at a time.
  // 404s before anything was answered: three different jobs in a row is the endpoint or the model
  // (a wrong --base-url), so stop the run; fewer may be the jobs' own, so they are retried, and fail
  // as usual once the provider has answered something.
  const early404 = error.status === 404 && c.done === 0;
  if (early404) c.early404s++;
  const scope = early404 ? (c.early404s >= 3 ? 'run' : 'retryable') : error.scope;
  if (scope === 'run') {
    ctx.breaker.neutral();
    await record(ctx, job.key, attempt, startedAt, error.status, 'not_counted', error.message, { count: false });
    ctx.onFatal(error);
    throw new JobSettled('interrupted', error.message);
  }
  if (scope === 'job') {
    ctx.breaker.neutral();
    await ctx.store.fail(job.key, ctx.runId, error.message, attemptOf(ctx, job.key, attempt, startedAt, error.status, 'failed', error.message), now);
    c.failed++;
    c.finished(now, 0);
    ctx.emit('job:failed', { key: job.key, attempt, status: error.status, error: error.message });
    throw new JobSettled('failed', error.message);
  }

  let counted = true;
  let delayMs = 0;
  if (early404) {
    ctx.breaker.neutral();
  } else if (error.reason === 'rate_limit') {
    // Waiting on a rate limit is not the job's fault: pause everyone, keep the attempt.
    ctx.breaker.neutral();
    counted = false;
    c.rateLimited++;
    const rl = error.rateLimit;
    // retry-after-ms / retry-after, else when the exhausted budget resets, else a second
    delayMs = error.retryAfterMs ?? Math.max(rl?.resetRequestsMs ?? 0, rl?.resetTokensMs ?? 0);
    if (!(delayMs > 0)) delayMs = 1000;
    ctx.limiter.pauseUntil(now + delayMs);
  } else if (error.reason === 'network' || error.reason === 'server' || error.reason === 'timeout') {
    // Refused or unresolvable: nobody is listening, the request never reached the provider.
    const unreachable = error.reason === 'network' && /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH/i.test(error.message);
    counted = !ctx.breaker.failure(error.message, { sentAt: startedAt, unreachable });
    if (!counted) {
      if (tally.uncountedOutages++ === 0) tally.firstUncountedAt = now;
      const providerUp = ctx.breaker.lastSuccessAt > tally.firstUncountedAt;
      if ((providerUp && tally.uncountedOutages > MAX_UNCOUNTED_OUTAGES) || now - tally.firstUncountedAt > MAX_UNCOUNTED_OUTAGE_MS) counted = true;
    }
    if (!counted) delayMs = Math.max(0, ctx.breaker.nextProbeAt - now);
  } else {
    ctx.breaker.neutral();
  }

  if (counted && attempt >= ctx.maxAttempts) {
    const message = `gave up after ${attempt} attempt${attempt === 1 ? '' : 's'}: ${error.message}`;
    await ctx.store.fail(job.key, ctx.runId, message, attemptOf(ctx, job.key, attempt, startedAt, error.status, 'failed', error.message), now);
    c.failed++;
    c.finished(now, 0);
    ctx.emit('job:failed', { key: job.key, attempt, status: error.status, error: message });
    throw new JobSettled('failed', message);
  }
  await record(ctx, job.key, attempt, startedAt, error.status, counted ? 'retry' : 'not_counted', error.message, { count: counted });
  if (counted) c.retried++;
  ctx.emit('job:retry', { key: job.key, attempt, status: error.status, reason: error.reason, error: error.message, delayMs, counted });
  throw new TryFailed(error, counted);
}

/**
 * `x-ratelimit-remaining-*` says the provider's budget is spent before our own pacing noticed (its
 * limit is lower than --rpm/--tpm, or other clients share the key): hold dispatch until it resets.
 */
function respectRateLimitHeaders(rl: RateLimitInfo | null, nextWeight: number, ctx: JobContext): void {
  if (!rl) return;
  const now = ctx.now();
  if (rl.remainingRequests !== null && rl.remainingRequests <= 0 && rl.resetRequestsMs) ctx.limiter.pauseUntil(now + rl.resetRequestsMs);
  if (rl.remainingTokens !== null && rl.remainingTokens < nextWeight && rl.resetTokensMs) ctx.limiter.pauseUntil(now + rl.resetTokensMs);
}

function attemptOf(ctx: JobContext, key: string, attempt: number, startedAt: number, status: number | null, outcome: AttemptOutcome, error: string | null): AttemptRecord {
  return { key, runId: ctx.runId, attempt, startedAt, endedAt: ctx.now(), status, outcome, error, usage: null };
}

async function record(ctx: JobContext, key: string, attempt: number, startedAt: number, status: number | null, outcome: AttemptOutcome,
  error: string, options: { count?: boolean } = {}): Promise<void> {
  const a = attemptOf(ctx, key, attempt, startedAt, status, outcome, error);
  await ctx.store.recordAttempt(a, { countAttempt: options.count ?? false, error });
}
