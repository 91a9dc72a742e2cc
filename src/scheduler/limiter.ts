import Bottleneck from 'bottleneck';
import { abortable, sleep, waitUntil } from './wait.js';

/**
 * The pace of a run (or, with Redis, of every run sharing one budget). The scheduler asks it
 * before each request; nothing else in the scheduler knows how the budget is kept.
 */
export interface RateLimiter {
  /**
   * Wait until one request of `tokens` estimated tokens for `model` may start. Rejects if `signal`
   * aborts. (The local limiter is one budget for the run; the Redis one keeps one per model.)
   */
  acquire(tokens: number, signal: AbortSignal, model: string): Promise<void>;
  /** Correct the token budget once the real usage of a request is known (estimate was charged). */
  settle(estimatedTokens: number, actualTokens: number, model: string): void;
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
   * arrive with network and scheduling jitter, so aiming at 100% trips 429s.
   * @default 0.955 for requests (one late request shifts a whole request across a window edge), 0.97 for tokens
   */
  readonly headroom?: number;
}

/**
 * Pacing math shared by the local and the Redis limiter.
 *
 * Requests: evenly spaced starts (`minTime`), so 600 rpm is one request per ~105 ms, never 600 in
 * the first second. Tokens: a bucket refilled continuously (every 25 ms) at 94% of the per-second
 * budget, holding only 6% of it: any 1-second window then sees at most capacity + refill = the
 * budget, so a provider that checks per second never sees a burst over its limit. A request bigger
 * than the bucket takes it whole and waits out the rest as debt, so it goes alone at the same rate.
 */
export function pacing(options: RateLimitOptions): {
  minTime: number;
  bucket: { capacity: number; refillEveryMs: number; refillAmount: number } | null;
} {
  // not rounded up: at 1,200 rpm, 52.1 ms -> 53 ms would give away 2% of the limit
  const minTime = options.rpm ? 60_000 / (options.rpm * (options.headroom ?? 0.955)) : 0;
  if (!options.tpm) return { minTime, bucket: null };
  const headroom = options.headroom ?? 0.97;
  const refillEveryMs = 25;
  const perSecond = options.tpm / 60;
  // A bigger bucket would allow bursts; a smaller one wastes refill whenever dispatch lags a little.
  const capacity = Math.max(1, Math.floor(perSecond * 0.06 * headroom));
  const refillAmount = Math.max(1, Math.floor((perSecond * 0.94 * headroom * refillEveryMs) / 1000));
  return { minTime, bucket: { capacity, refillEveryMs, refillAmount } };
}

/** Where a 429's pause is kept: in this process, or in Redis for every run sharing a budget. */
export interface PauseBoard {
  /** ms epoch until which dispatch is paused, as last known (never blocks). */
  get(): number;
  set(until: number): void;
  /** Bring `get()` up to date (a no-op for the in-process board). */
  refresh(): Promise<void>;
}

export class LocalPauseBoard implements PauseBoard {
  #until = 0;
  get(): number {
    return this.#until;
  }
  set(until: number): void {
    if (until > this.#until) this.#until = until;
  }
  async refresh(): Promise<void> {}
}

/**
 * RPM and TPM pacing through two bottleneck limiters: one spacing request starts, one holding the
 * token bucket. In this process by default; `shared` makes them Redis-clustered.
 */
export class BottleneckRateLimiter {
  readonly tokenCapacity: number | null;
  // Each limiter is created only when its limit is set: a bottleneck hop costs milliseconds, which
  // an unlimited run at thousands of requests per second cannot afford.
  readonly #requests: Bottleneck | null;
  readonly #tokens: Bottleneck | null;
  #refill: NodeJS.Timeout | null = null;
  readonly #pause: PauseBoard;

  constructor(options: RateLimitOptions, shared?: { pause: PauseBoard; bottleneck: (name: 'requests' | 'tokens') => Bottleneck.ConstructorOptions }) {
    const p = pacing(options);
    this.#pause = shared?.pause ?? new LocalPauseBoard();
    // Redis-clustered bottleneck keeps whole milliseconds (its Lua scripts stall on fractions).
    const minTime = shared ? Math.ceil(p.minTime) : p.minTime;
    this.#requests = minTime > 0 ? new Bottleneck({ minTime, ...shared?.bottleneck('requests') }) : null;
    this.tokenCapacity = p.bucket?.capacity ?? null;
    if (p.bucket && shared) {
      // Redis: bottleneck's own refill, computed in Redis from elapsed intervals (drift-free).
      this.#tokens = new Bottleneck({
        ...shared.bottleneck('tokens'),
        reservoir: p.bucket.capacity,
        reservoirIncreaseInterval: p.bucket.refillEveryMs,
        reservoirIncreaseAmount: p.bucket.refillAmount,
        reservoirIncreaseMaximum: p.bucket.capacity,
        heartbeatInterval: p.bucket.refillEveryMs,
      });
    } else if (p.bucket) {
      // In process: our own refill by elapsed time. Bottleneck's local refill restarts its interval
      // at each heartbeat that sees it due, losing up to a heartbeat per refill (10-20% of the rate).
      this.#tokens = new Bottleneck({ reservoir: p.bucket.capacity });
      const perMs = p.bucket.refillAmount / p.bucket.refillEveryMs;
      const capacity = p.bucket.capacity;
      let last = Date.now();
      let carry = 0;
      this.#refill = setInterval(() => {
        const now = Date.now();
        const due = perMs * (now - last) + carry;
        last = now;
        const whole = Math.floor(due);
        carry = due - whole;
        if (whole <= 0) return;
        void this.#tokens!.currentReservoir().then((current) => {
          const increment = Math.min(whole, capacity - (current ?? 0));
          return increment > 0 ? this.#tokens!.incrementReservoir(increment) : undefined;
        }).catch(() => {}); // a refill lost to a hiccup only slows us down
      }, p.bucket.refillEveryMs);

    } else {
      this.#tokens = null;
    }
  }

  /** Apply these settings to limiters that already existed in Redis (the newest run's flags win). */
  async updateSettings(options: RateLimitOptions): Promise<void> {
    const p = pacing(options);
    await this.#requests?.updateSettings({ minTime: Math.ceil(p.minTime) }); // only clustered limiters are updated
    if (p.bucket) {
      await this.#tokens?.updateSettings({
        reservoirIncreaseInterval: p.bucket.refillEveryMs, reservoirIncreaseAmount: p.bucket.refillAmount,
        reservoirIncreaseMaximum: p.bucket.capacity,
      });
    }
  }

  async acquire(tokens: number, signal: AbortSignal): Promise<void> {
    await this.#pause.refresh();
    if (this.#pause.get() > Date.now()) await waitUntil(() => this.#pause.get(), signal);
    if (this.#tokens) {
      const need = Math.max(1, Math.ceil(tokens));
      const weight = Math.min(need, this.tokenCapacity!);
      await abortable(this.#tokens.schedule({ weight }, async () => undefined), signal);
      // Bigger than the bucket: it took a full bucket; the rest is taken as debt and paid off by
      // the refill before it goes, so it goes alone and the rate still holds.
      if (need > weight) {
        await this.#tokens.incrementReservoir(weight - need);
        while (((await this.#tokens.currentReservoir()) ?? 0) < 0) await sleep(25, signal);
      }
    }
    for (;;) {
      if (this.#requests) await abortable(this.#requests.schedule(async () => undefined), signal);
      await this.#pause.refresh();
      if (this.#pause.get() <= Date.now()) return;
      // A 429 arrived while we queued. Everyone who passed the spacing during the pause would go
      // at once when it ends, and trip the limit again: wait it out, then take a fresh place.
      await waitUntil(() => this.#pause.get(), signal);
      if (!this.#requests) return;
    }
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
    }).catch(() => {}); // Redis gone: the correction is lost, the run goes on
  }

  pauseUntil(until: number): void {
    this.#pause.set(until);
  }

  pausedUntil(): number {
    const until = this.#pause.get();
    return until > Date.now() ? until : 0;
  }

  async stop(): Promise<void> {
    if (this.#refill) clearInterval(this.#refill);
    await Promise.all([this.#requests?.stop({ dropWaitingJobs: true }), this.#tokens?.stop({ dropWaitingJobs: true })]);
  }
}


/** The embedded limiter: one budget for this run, kept in this process. */
export class LocalRateLimiter extends BottleneckRateLimiter implements RateLimiter {
  constructor(options: RateLimitOptions) {
    super(options);
  }
}
