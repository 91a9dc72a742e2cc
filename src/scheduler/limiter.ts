import Bottleneck from 'bottleneck';

/**
 * The pace of a run (or, with Redis, of every run sharing one budget). The scheduler asks it
 * before each request; nothing else in the scheduler knows how the budget is kept.
 */
export interface RateLimiter {
  /** Wait until one request of `tokens` estimated tokens may start. Rejects if `signal` aborts. */
  acquire(tokens: number, signal: AbortSignal): Promise<void>;
  /** Correct the token budget once the real usage of a request is known (estimate was charged). */
  settle(estimatedTokens: number, actualTokens: number): void;
  /** Hold every request (of every run sharing this limiter) until `until` (ms epoch). */
  pauseUntil(until: number): void;
  /** ms epoch until which dispatch is paused (0 when not paused). */
  pausedUntil(): number;
  /** The most tokens one request can take (bigger requests are clamped to it and go alone). */
  readonly tokenCapacity: number | null;
  stop(): Promise<void>;
}

export interface RateLimitOptions {
  /** Requests per minute; undefined for no limit. */
  readonly rpm?: number;
  /** Tokens per minute; undefined for no limit. */
  readonly tpm?: number;
  /**
   * Fraction of the limit to aim for. Providers enforce limits over short windows and requests
   * arrive with network jitter, so aiming at 100% trips 429s.
   * @default 0.97
   */
  readonly headroom?: number;
}

/**
 * Pacing math shared by the local and the Redis limiter.
 *
 * Requests: evenly spaced starts (`minTime`), so 600 rpm is one request per ~103 ms, never 600 in
 * the first second. Tokens: a bucket refilled continuously (every 50 ms) whose capacity is 1/10
 * of a second's worth: any 1-second window then sees at most capacity + refill = 1.0x the
 * per-second budget, so a provider that checks per second never sees a burst over its limit.
 */
export function pacing(options: RateLimitOptions): {
  minTime: number;
  bucket: { capacity: number; refillEveryMs: number; refillAmount: number } | null;
} {
  const headroom = options.headroom ?? 0.97;
  const minTime = options.rpm ? Math.ceil(60_000 / (options.rpm * headroom)) : 0;
  if (!options.tpm) return { minTime, bucket: null };
  const refillEveryMs = 50;
  const perSecond = options.tpm / 60;
  // capacity + one second of refill must fit in one second's budget: r = 0.9 * B * headroom, C = 0.1 * B * headroom.
  const capacity = Math.max(1, Math.floor(perSecond * 0.1 * headroom));
  const refillAmount = Math.max(1, Math.floor((perSecond * 0.9 * headroom * refillEveryMs) / 1000));
  return { minTime, bucket: { capacity, refillEveryMs, refillAmount } };
}

/** The embedded limiter: bottleneck in this process. */
export class LocalRateLimiter implements RateLimiter {
  readonly tokenCapacity: number | null;
  // Each limiter is created only when its limit is set: a bottleneck hop costs milliseconds, which
  // an unlimited run at thousands of requests per second cannot afford.
  readonly #requests: Bottleneck | null;
  readonly #tokens: Bottleneck | null;
  #pausedUntil = 0;

  constructor(options: RateLimitOptions) {
    const p = pacing(options);
    this.#requests = p.minTime > 0 ? new Bottleneck({ minTime: p.minTime }) : null;
    this.tokenCapacity = p.bucket?.capacity ?? null;
    this.#tokens = p.bucket
      ? new Bottleneck({
          reservoir: p.bucket.capacity,
          reservoirIncreaseInterval: p.bucket.refillEveryMs,
          reservoirIncreaseAmount: p.bucket.refillAmount,
          reservoirIncreaseMaximum: p.bucket.capacity,
          heartbeatInterval: p.bucket.refillEveryMs,
        })
      : null;
  }

  async acquire(tokens: number, signal: AbortSignal): Promise<void> {
    if (this.#pausedUntil > Date.now()) await waitUntil(() => this.#pausedUntil, signal);
    if (this.#tokens) {
      const weight = Math.min(Math.max(1, Math.ceil(tokens)), this.tokenCapacity!);
      await abortable(this.#tokens.schedule({ weight }, async () => undefined), signal);
    }
    if (this.#requests) await abortable(this.#requests.schedule(async () => undefined), signal);
    // A 429 may have arrived while we queued: honor it before sending.
    if (this.#pausedUntil > Date.now()) await waitUntil(() => this.#pausedUntil, signal);
  }

  settle(estimatedTokens: number, actualTokens: number): void {
    if (!this.#tokens) return;
    const delta = Math.round(estimatedTokens - actualTokens); // > 0: we charged too much, give it back
    if (delta === 0) return;
    void this.#tokens.currentReservoir().then((current) => {
      const room = this.tokenCapacity! - (current ?? 0);
      const increment = delta > 0 ? Math.min(delta, room) : delta;
      if (increment !== 0) return this.#tokens!.incrementReservoir(increment);
      return undefined;
    });
  }

  pauseUntil(until: number): void {
    if (until > this.#pausedUntil) this.#pausedUntil = until;
  }

  pausedUntil(): number {
    return this.#pausedUntil > Date.now() ? this.#pausedUntil : 0;
  }

  async stop(): Promise<void> {
    await Promise.all([this.#requests?.stop({ dropWaitingJobs: true }), this.#tokens?.stop({ dropWaitingJobs: true })]);
  }
}

/** Sleep until the deadline `deadline()` returns has passed (re-read after each sleep: it may move). */
export async function waitUntil(deadline: () => number, signal: AbortSignal): Promise<void> {
  for (let until = deadline(); until > Date.now(); until = deadline()) {
    await sleep(until - Date.now(), signal);
  }
}

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, Math.max(0, ms));
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Race a promise against an abort signal. The promise keeps running; its result is ignored. */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  promise.catch(() => {}); // once abandoned, its rejection (e.g. "limiter stopped") is nobody's business
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => { signal.removeEventListener('abort', onAbort); resolve(v); },
      (e) => { signal.removeEventListener('abort', onAbort); reject(e); },
    );
  });
}
