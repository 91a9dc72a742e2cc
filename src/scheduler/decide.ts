import { refusesEndpoint } from '../provider/classify.js';
import type { ErrorScope, FailureReason } from '../provider/types.js';

/**
 * The failure policy, in one place: what a failed try means for the job, its lane and the run.
 * Pure: everything it needs is in `FailureFacts`, so a table-driven test covers every row of the
 * error table of docs/commands.md ("What happens when a request fails"), and the loop in job-runner.ts
 * only applies the answer.
 */

/** What is known when a try fails. */
export interface FailureFacts {
  readonly error: {
    readonly scope: ErrorScope;
    readonly reason: FailureReason;
    readonly status: number | null;
    readonly message: string;
    /** The provider's error code (`invalid_api_key`), when its answer gave one. */
    readonly code?: string | null;
  };
  /** The job's attempt number of this try; `maxAttempts` is the most it may use. */
  readonly attempt: number;
  readonly maxAttempts: number;
  /** The provider has answered some request of this run. */
  readonly answered: boolean;
  /** 404s (or 405s, 501s: refusesEndpoint) before any answer, this one included. */
  readonly early404s: number;
  /**
   * Jobs refused for a parameter a model's jobs share (`refusesSharedParameter`: `max_tokens`, `temperature`)
   * before any answer, of this job's model and naming this one's parameter, this one included; 0 for other failures.
   */
  readonly earlyParameterRefusals: number;
  /** Of those refusals, this job's own in this run, this one included. */
  readonly ownParameterRefusals: number;
  /** 401/403 in a row (no answer between them), this one included. */
  readonly authInARow: number;
  /** 401/403 of this job in this run, this one included. */
  readonly ownAuthRefusals: number;
  /** A request sent after this job's first 401/403 was answered: the key works, for other jobs at least. */
  readonly answeredSinceRefused: boolean;
  /**
   * For outage-type failures (`isOutageType`: network, 5xx, timeout, a bad body): the breaker is open or this failure opened
   * it, so the failure is the provider's, not the job's.
   */
  readonly outage: boolean;
  /** Outage failures of this job that did not use an attempt, this one not included. */
  readonly uncountedOutages: number;
  /** The provider answered other requests since this job's first uncounted outage failure. */
  readonly providerUpSince: boolean;
  /** ms since this job's first uncounted outage failure (0 if none). */
  readonly outageAgeMs: number;
  /** How long a 429 asked to wait (retry-after, else one refill interval, else a guess). */
  readonly rateLimitWaitMs: number;
  /** The lane pauses that long with it; false: a 429 taken for the provider's noise, only this job waits (`Lane.rateLimitedBy`). */
  readonly rateLimitPausedLane: boolean;
  /**
   * How long a failure other than a 429 asked us to wait (its Retry-After: a 503 in maintenance),
   * or null: the job's next try waits at least that, up to `maxRetryDelayMs`.
   */
  readonly retryAfterMs: number | null;
  /** ms until the outage breaker lets the next probe go. */
  readonly nextProbeInMs: number;
  readonly retryDelayMs: number;
  readonly maxRetryDelayMs: number;
  /** A number in [0, 1) for jitter. */
  readonly random: number;
}

export type Decision =
  /** The job is failed with this reason. */
  | { readonly kind: 'fail'; readonly message: string }
  /**
   * Try again after `delayMs`. `counted`: the try used up an attempt. `pauseLane`: every
   * request of the lane is held that long too (a 429's pause). `shrink`: a local resource ran out; lower concurrency.
   */
  | { readonly kind: 'retry'; readonly delayMs: number; readonly counted: boolean; readonly pauseLane?: boolean; readonly shrink?: boolean }
  /** Stop the run (no attempt used): the key, the quota, or the endpoint is wrong. */
  | { readonly kind: 'stop' }
  /** Send no more to the job's model in this run (no attempt used): its quota is spent; its jobs wait. */
  | { readonly kind: 'closeLane' };

/** 401/403 in a row, or 404s or refusals of a shared parameter before any answer, that mean the key, endpoint or request is wrong. */
export const RUN_FATAL_IN_A_ROW = 3;
/**
 * A job's outage failures count again once the provider has shown it is up (it answered others
 * since) and the job failed this often: such a document breaks the connection by itself and must
 * end failed, not loop. A job that is always the probe counts again after half an hour.
 */
export const MAX_UNCOUNTED_OUTAGES = 5;
export const MAX_UNCOUNTED_OUTAGE_MS = 30 * 60_000;

/**
 * Failures that may be the provider's rather than the job's, the outage breaker's evidence: no
 * answer (network, timeout), a 5xx, or a 200 that is no completion (a gateway's maintenance page,
 * bodies cut short), which a proxy in front of the provider sends for every request while it is down.
 */
export function isOutageType(reason: FailureReason): boolean {
  return reason === 'network' || reason === 'server' || reason === 'timeout' || reason === 'bad_body';
}

export function decide(f: FailureFacts): Decision {
  const { error } = f;
  if (error.reason === 'quota') return error.scope === 'model' ? { kind: 'closeLane' } : { kind: 'stop' };
  if (error.reason === 'auth') {
    // A key that never worked is wrong for every job, and one the provider calls invalid is too;
    // three refusals in a row are the key again (revoked mid-run).
    if (!f.answered || error.code === 'invalid_api_key' || f.authInARow >= RUN_FATAL_IN_A_ROW) return { kind: 'stop' };
    // One that worked and is refused for one job may be that job's (a model the key may not use)
    // or the first sign of a revoked key: the job tries again, its attempt given back, and fails
    // when refused again after a request sent since its first refusal was answered. Failing it at
    // once left the jobs in flight as a key was revoked failed, to be sent again only by
    // retry-failed once the key was mended. With no such answer, the refusals in a row stop the run.
    if (f.ownAuthRefusals >= 2 && f.answeredSinceRefused) return { kind: 'fail', message: error.message };
    return { kind: 'retry', delayMs: backoffMs(f), counted: false };
  }
  if (refusesEndpoint(error.status) && !f.answered) {
    // Three different jobs in a row before any answer: the endpoint or the model is wrong.
    if (f.early404s >= RUN_FATAL_IN_A_ROW) return { kind: 'stop' };
    // Until that is known, the attempt is given back: a run stopped for a wrong --base-url used
    // none ("No job was used up"), where the first two 404s used theirs. Tried again once some
    // job has answered, a 404 that is the job's own fails it.
    return { kind: 'retry', delayMs: f.attempt < f.maxAttempts ? backoffMs(f) : f.retryDelayMs, counted: false };
  }
  if (f.earlyParameterRefusals > 0 && !f.answered) {
    // The request's shape, which every job of an enqueue shares, is refused: three in a row stop the
    // run before it fails the whole queue; until then the attempt is given back, as for a 404.
    if (f.earlyParameterRefusals >= RUN_FATAL_IN_A_ROW) return { kind: 'stop' };
    // The same job refused again, and no other: the parameter is its own (a Batch line's
    // `response_format`), or it is the last of its model left. It fails as any 400 does; stopping
    // the run left it pending, refused three times by every run.
    if (f.ownParameterRefusals >= 2) return { kind: 'fail', message: error.message };
    return { kind: 'retry', delayMs: f.attempt < f.maxAttempts ? backoffMs(f) : f.retryDelayMs, counted: false };
  }
  if (error.scope === 'job') return { kind: 'fail', message: error.message };
  if (error.scope === 'run') return { kind: 'stop' };
  if (error.scope === 'model') return { kind: 'closeLane' };

  if (error.reason === 'rate_limit') {
    // Not the job's fault: it waits (with its lane, unless the 429 was noise), the attempt is given back.
    return { kind: 'retry', delayMs: f.rateLimitWaitMs, counted: false, pauseLane: f.rateLimitPausedLane };
  }
  if (error.reason === 'local') {
    return { kind: 'retry', delayMs: 200 + Math.round(300 * f.random), counted: false, shrink: true };
  }
  if (isOutageType(error.reason)) {
    const ownFault = (f.providerUpSince && f.uncountedOutages >= MAX_UNCOUNTED_OUTAGES) || f.outageAgeMs > MAX_UNCOUNTED_OUTAGE_MS;
    if (f.outage && !ownFault) return { kind: 'retry', delayMs: Math.max(0, f.nextProbeInMs, askedWait(f)), counted: false };
  }
  return counted(f, error.message);
}

/**
 * A try that used an attempt: fail when none are left, else back off exponentially with jitter, and
 * for at least as long as the server asked.
 */
function counted(f: FailureFacts, message: string): Decision {
  if (f.attempt >= f.maxAttempts) {
    return { kind: 'fail', message: exhaustedMessage(f.attempt, message) };
  }
  return { kind: 'retry', delayMs: Math.max(backoffMs(f), askedWait(f)), counted: true };
}

/** The wait a failure's Retry-After asked for, at most the longest backoff (an hour's 503 is not five hours of one job). */
function askedWait(f: FailureFacts): number {
  return Math.min(f.retryAfterMs ?? 0, f.maxRetryDelayMs);
}

/** Exponential backoff with jitter from the attempt number. */
function backoffMs(f: FailureFacts): number {
  // A timeout already waited long: the try was lost, not refused, so start much lower.
  const base = f.error.reason === 'timeout' ? f.retryDelayMs / 10 : f.retryDelayMs;
  const exp = Math.min(f.maxRetryDelayMs, base * 2 ** Math.max(0, f.attempt - 1));
  return Math.round(exp * (1 + f.random));
}

/**
 * How the scheduler words "out of attempts". (The stores' crash-loop rule, which fails a job at claim
 * time in SQL, has its own wording: "gave up after N attempts; last error: ...".)
 */
export function exhaustedMessage(attempts: number, lastError: string): string {
  return `gave up after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${lastError}`;
}
