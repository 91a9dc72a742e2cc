import { getEventListeners } from 'node:events';
import { timeoutError } from '../provider/classify.js';
import { requestedCompletionTokens } from '../provider/tokens.js';
import type { Lane } from './lane.js';
import { LatencyStats } from './pace/latency.js';

/** One request on the wire. */
export interface InFlightRequest {
  readonly signal: AbortSignal;
  readonly lane: Lane;
  readonly startedAt: number;
  /**
   * When its timeout counts from: `startedAt`, moved on by any long stall of this process while it
   * was on the wire (the time it could not have been written or read counts against no provider).
   */
  timedFrom: number;
  readonly controller: AbortController;
  readonly requestJson: string;
  /** `max_tokens` of the request, read the first time the watchdog needs it. */
  maxTokens: number | null;
  /** The lane's timeout times this: doubled for each time this job already timed out. */
  readonly patience: number;
  /**
   * This process stalled (synchronous work held its event loop) while the request was on the wire:
   * its measured latency says how long this process was busy, not how long the provider took.
   */
  stalled: boolean;
}

/**
 * The requests a run has on the wire: one abort for all of them on a hard stop (one listener, not
 * one per request), and the `--timeout auto` watchdog, which re-reads each lane's latencies a few
 * times a second so a request that hung before the lane had answers is cut as soon as it has them.
 *
 * The watchdog's tick also notices when it runs late: the event loop was held (a module loaded on
 * first use, a long synchronous hook). Every request on the wire across such a stall is marked, so
 * its latency stays out of the p99 (one 200 ms stall at -c 16 would otherwise set the timeout of the
 * next 256 requests to 6 x 250 ms), and the tick after a stall cuts nothing: answers that arrived
 * while the loop was held are read first. Only a late tick after an on-time one counts: a loop that
 * is late all the time would otherwise learn no latency and cut no hung request.
 */
export class InFlightRequests {
  readonly #requests = new Set<InFlightRequest>();
  /**
   * Controllers of requests that ended without an abort and with no listener left on their signal:
   * the next requests take them. Making an AbortController and the first listener on its signal
   * cost about 7 us per request (measured in a loop: 8.5 us fresh, 1.2 us reused), several times
   * what the run's own bookkeeping costs per job; a provider still gets a real AbortSignal, which it
   * may hand to fetch or AbortSignal.any. One a provider still listens on is never reused: its
   * listener would hear the next request's abort.
   */
  readonly #spare: AbortController[] = [];
  readonly #capMs: number;
  readonly #auto: boolean;
  readonly #now: () => number;
  #timer: NodeJS.Timeout | null = null;
  #aborted: unknown = undefined;
  /** When the watchdog last ticked, on the monotonic clock (the injected one may be a test's). */
  #tickedAt = 0;
  /** The last tick came late: the next late one is not a stall but the loop's pace. */
  #wasLate = false;
  /** A tick this much later than due means the event loop was held. */
  static readonly STALL_MS = 50;
  /** A tick this much later than due: the time is taken off every request's clock. */
  static readonly LONG_STALL_MS = 1000;

  /**
   * `auto`: cut requests by their lane's latencies, at most `capMs`; otherwise the provider's own
   * fixed timeout applies and this only aborts on a hard stop.
   */
  constructor(options: { auto: boolean; capMs: number; now: () => number; abortSignal: AbortSignal; sweepMs?: number }) {
    this.#auto = options.auto;
    this.#capMs = options.capMs;
    this.#now = options.now;
    const onAbort = (): void => {
      this.#aborted = options.abortSignal.reason;
      for (const r of this.#requests) r.controller.abort(this.#aborted);
    };
    if (options.abortSignal.aborted) onAbort();
    else options.abortSignal.addEventListener('abort', onAbort, { once: true });
    if (this.#auto) {
      const sweepMs = options.sweepMs ?? 100;
      this.#tickedAt = performance.now();
      this.#timer = setInterval(() => this.#tick(sweepMs), sweepMs);
      this.#timer.unref?.();
    }
  }

  /** A request leaves; `timeouts` is how often this job already timed out (each doubles its time). */
  start(lane: Lane, requestJson: string, startedAt: number, timeouts = 0): InFlightRequest {
    const controller = this.#spare.pop() ?? new AbortController();
    if (this.#aborted !== undefined) controller.abort(this.#aborted);
    const patience = 2 ** Math.min(timeouts, 6);
    const r: InFlightRequest = {
      signal: controller.signal,
      controller,
      lane,
      startedAt,
      timedFrom: startedAt,
      requestJson,
      maxTokens: null,
      patience,
      stalled: false,
    };
    this.#requests.add(r);
    return r;
  }

  end(r: InFlightRequest): void {
    this.#requests.delete(r);
    const signal = r.controller.signal;
    if (!signal.aborted && getEventListeners(signal, 'abort').length === 0) this.#spare.push(r.controller);
  }

  #tick(sweepMs: number): void {
    const now = performance.now();
    const lateBy = now - this.#tickedAt - sweepMs;
    const late = lateBy > InFlightRequests.STALL_MS;
    this.#tickedAt = now;
    // Held a second or more (SQLite waiting out another process's lock, in a row or not): requests
    // queued before it were not on the wire meanwhile, and were cut as timed out ("may be billed")
    // though the provider received them only after it. That time counts against none of them (a
    // loop held that long on every tick reads no answer either). Late ticks under a second, a busy
    // or throttled loop's pace, credit nothing: hung requests are still cut there.
    if (lateBy >= InFlightRequests.LONG_STALL_MS) {
      const at = this.#now();
      for (const r of this.#requests) r.timedFrom += Math.max(0, Math.min(lateBy, at - r.timedFrom));
    }
    // A late tick after an on-time one is a stall. Late ticks in a row are this process's pace (a
    // busy loop, a throttled container): its latencies are then what requests take here, and
    // hung ones must still be cut, so those ticks mark nothing and sweep as usual.
    const stall = late && !this.#wasLate;
    this.#wasLate = late;
    if (stall) {
      for (const r of this.#requests) r.stalled = true;
      return;
    }
    this.sweep();
  }

  /** Abort every request that has run longer than its lane says it should (auto mode only). */
  sweep(now: number = this.#now()): void {
    for (const r of this.#requests) {
      const elapsed = now - r.timedFrom;
      // cheap check first: nothing is cut before the floor
      if (elapsed < LatencyStats.FLOOR_MS) continue;
      if (r.maxTokens === null) r.maxTokens = maxTokensOf(r.requestJson);
      // a job that timed out before gets more time, but never past the cap (a cold lane's is the cap already)
      const limit = Math.min(this.#capMs, r.lane.latency.timeoutMs(r.maxTokens, this.#capMs) * r.patience);
      if (elapsed > limit && !r.controller.signal.aborted) {
        r.controller.abort(timeoutError(Math.round(elapsed), { auto: true, model: r.lane.model, limitMs: Math.round(limit) }));
      }
    }
  }

  /**
   * `--timeout auto` with requests out to a lane that has no latencies to go by: the oldest such
   * request, its lane's model, since when it has waited for the provider (`timedFrom`: a stop of
   * this process, Ctrl-Z or SIGSTOP, is not the provider's wait), how many are out to it, and how
   * long each may wait (the cap); null when there is none or the timeout is fixed.
   */
  oldestCold(): { model: string; waitingSince: number; count: number; capMs: number } | null {
    if (!this.#auto) return null;
    let oldest: InFlightRequest | null = null;
    for (const r of this.#requests) {
      if (r.lane.latency.p99 === null && (oldest === null || r.timedFrom < oldest.timedFrom)) oldest = r;
    }
    if (oldest === null) return null;
    let count = 0;
    for (const r of this.#requests) if (r.lane === oldest.lane) count++;
    return { model: oldest.lane.model, waitingSince: oldest.timedFrom, count, capMs: this.#capMs };
  }

  dispose(): void {
    if (this.#timer) clearInterval(this.#timer);
  }
}

function maxTokensOf(requestJson: string): number {
  try {
    return requestedCompletionTokens(JSON.parse(requestJson) as object);
  } catch {
    return 0;
  }
}
