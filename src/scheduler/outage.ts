import { SetBackWatch } from './pace/set-back.js';
export interface OutageOptions {
  /** Consecutive outage failures (refused, reset, timeout, 5xx) that open the breaker. @default 3 */
  readonly consecutive?: number;
  /** Of the last `window` results, this many failures also open it ("mostly 5xx"). @default 8 of 10 */
  readonly windowFailures?: number;
  readonly window?: number;
  /** First wait before probing, doubled after each failed probe up to `maxProbeDelayMs`. @default 1000 */
  readonly probeDelayMs?: number;
  /** @default 10000 */
  readonly maxProbeDelayMs?: number;
  readonly now?: () => number;
}

/**
 * A circuit breaker for provider outages. While it is open no request goes out except one probe
 * at a time, spaced by a growing delay; failures seen while open do not use up job attempts. The
 * first success closes it and every waiting request goes again.
 */
export class OutageBreaker {
  /**
   * How long past its time the probe waits for the request it is for (`gate`), before any takes it:
   * that request may be held by its lane's pace, or never come (its lane paused for an hour).
   */
  static readonly UNTRIED_FIRST_MS = 2000;
  readonly #o: Required<Omit<OutageOptions, 'now'>>;
  readonly #now: () => number;
  #consecutive = 0;
  /** When the first request of the failures in a row was sent: the provider has not answered since. */
  #streakSince = 0;
  #lastSuccessAt = -Infinity;
  /** When an answer last closed the breaker: the outage before it is over. */
  #closedAt = Number.NEGATIVE_INFINITY;
  /** When the provider last answered anything, a 429 or a 4xx too (ms epoch). */
  #lastHeardAt = -Infinity;

  /** When the provider last answered (ms epoch), -Infinity if never. */
  get lastSuccessAt(): number {
    return this.#lastSuccessAt;
  }
  #recent: boolean[] = []; // true = outage failure
  #open = false;
  #openedAt = 0;
  #lastDetail = '';
  #probing = false;
  #nextProbeAt = 0;
  readonly #setBack = new SetBackWatch();
  #delay: number;
  #waiters: Array<() => void> = [];
  /** The `order` of each request on its way to a send (`admitting`) whose job has not failed as an outage does. */
  readonly #untried = new Set<number>();
  #untriedTimer: NodeJS.Timeout | null = null;
  #timer: NodeJS.Timeout | null = null;
  /** Called when the breaker opens or closes, for events. */
  onChange: (open: boolean, nextProbeAt: number, detail: string) => void = () => {};

  constructor(options: OutageOptions = {}) {
    this.#o = {
      consecutive: options.consecutive ?? 3,
      windowFailures: options.windowFailures ?? 8,
      window: options.window ?? 10,
      probeDelayMs: options.probeDelayMs ?? 1000,
      maxProbeDelayMs: options.maxProbeDelayMs ?? 10_000,
    };
    this.#now = options.now ?? Date.now;
    this.#delay = this.#o.probeDelayMs;
  }

  get isOpen(): boolean {
    return this.#open;
  }

  /** Requests have failed as an outage does since the provider last answered, the breaker not open yet. */
  get failingInARow(): boolean {
    return !this.#open && this.#consecutive > 0;
  }

  /** When the breaker last opened (ms epoch), null while it is closed. */
  get openSince(): number | null {
    this.#clock();
    return this.#open ? this.#openedAt : null;
  }

  /** What the last outage failure said, for the message when the outage lasts too long. */
  get lastFailure(): string {
    return this.#lastDetail;
  }

  get nextProbeAt(): number {
    this.#clock();
    return this.#open ? this.#nextProbeAt : 0;
  }

  /** The time now; a clock set back moves the outage's times back with it (SetBackWatch). */
  #clock(): number {
    const now = this.#now();
    const by = this.#setBack.by(now);
    this.#openedAt += by;
    this.#nextProbeAt += by;
    this.#streakSince += by;
    this.#closedAt += by;
    return now;
  }

  /**
   * Since when the provider has been failing: the outage's start while the breaker is open (a 429 or
   * a 4xx meanwhile ends the row of failures, not the outage), the first failing request's send while
   * failures are in a row; never otherwise.
   */
  #failingSince(): number {
    this.#clock();
    if (this.#open) return this.#openedAt;
    return this.#consecutive > 0 ? this.#streakSince : Number.NEGATIVE_INFINITY;
  }

  /**
   * A request is on its way to a send (its lane's pace, this gate, a slot) until `admitted`.
   * `order`: which of the run's jobs it is (higher: claimed later), or null when its job failed as an
   * outage does (a 5xx, a reset, a timeout) in this run.
   */
  admitting(order: number | null): void {
    if (order !== null) this.#untried.add(order);
  }

  admitted(order: number | null): void {
    if (order !== null) this.#untried.delete(order);
  }

  /**
   * Wait until a request may go out. Returns true when the caller is the probe: it must report
   * its result with `success()` or `failure()`, or `probeAbandoned()` if it never sent.
   * The probe is for the request claimed last (the highest `order`) of those on their way whose job
   * has not failed as an outage does; any takes it once it is UNTRIED_FIRST_MS late, or when there is
   * none. Documents that always get a 500, first in the queue, were each probe (their retries come
   * due with it), and the healthy jobs behind them waited until --max-outage ended the run, every
   * run: failing documents are likelier at the head of the queue (put back by retry-failed, or
   * claimed first) than behind it, and in an outage every one fails alike.
   */
  async gate(signal: AbortSignal, order: number | null = null): Promise<boolean> {
    while (this.#open) {
      const now = this.#clock();
      const due = !this.#probing && now >= this.#nextProbeAt;
      const turn =
        this.#untried.size === 0 ||
        (order !== null && order >= Math.max(...this.#untried)) ||
        now >= this.#nextProbeAt + OutageBreaker.UNTRIED_FIRST_MS;
      if (due && turn) {
        this.#probing = true;
        return true;
      }
      // held back for the request the probe is for: woken when its time is up, should it not come
      if (due) this.#wakeWhenUntriedLate();
      await new Promise<void>((resolve, reject) => {
        const wake = (): void => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        };
        const onAbort = (): void => {
          this.#waiters = this.#waiters.filter((w) => w !== wake);
          reject(signal.reason);
        };
        if (signal.aborted) return onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
        this.#waiters.push(wake);
      });
    }
    return false;
  }

  /**
   * A request sent at `sentAt` was answered. An answer to a request that left before the failures in
   * a row began (a slow one still coming in as the provider starts failing) says it was up then, not
   * now: it neither ends the row nor closes the breaker. Each such answer closed it ("resumed after
   * the outage"), another wave went out into the outage, and their failures used up attempts: a
   * 2-second outage of instant 503s at -c 32 failed 201 of 300 jobs.
   */
  success(o: { readonly sentAt?: number; readonly probe?: boolean } = {}): void {
    // the probe's answer is the provider's word on now, whenever the failures began
    if (!o.probe && (o.sentAt ?? Number.POSITIVE_INFINITY) < this.#failingSince()) return;
    this.#lastSuccessAt = this.#lastHeardAt = this.#now();
    this.#consecutive = 0;
    this.#push(false);
    this.#probing = false;
    if (this.#open) {
      this.#open = false;
      this.#closedAt = this.#clock();
      this.#delay = this.#o.probeDelayMs;
      this.#clearTimer();
      this.onChange(false, 0, 'provider answered again');
      this.#wakeAll();
    }
  }

  /**
   * Report an outage-type failure of a request sent at `sentAt`. Returns true when the failure
   * should not use up the job's attempt: the breaker was open, or this failure opened it.
   * `unreachable` (refused, reset, DNS) opens it at once, unless the provider answered someone
   * else after this request left: then the provider is up and the failure is this job's own.
   */
  failure(detail: string, options: { sentAt: number; unreachable: boolean; probe?: boolean }): boolean {
    // Sent before the provider answered again and closed the breaker, failing only now (its failure
    // read late, on a busy event loop): the outage it met is over. It used no attempt in it, and it
    // does not count towards another: eight such in the window opened the breaker again at once,
    // a second pause after the provider had answered.
    this.#clock(); // a clock set back moves #closedAt with it
    if (options.sentAt < this.#closedAt) return true;
    this.#lastDetail = detail;
    // The provider answered someone after this request left: it was up, so this failure (a hang cut
    // by the timeout, a reset) is no sign of an outage in a row. It still counts in the window, where
    // "mostly failing" is judged.
    // (a 429 or a 4xx is the provider answering too: a request that hung while it answered those
    // says nothing of an outage, and must not date one from before them)
    const answeredSince = this.#lastHeardAt >= options.sentAt;
    if (!answeredSince) {
      this.#streakSince = this.#consecutive++ === 0 ? options.sentAt : Math.min(this.#streakSince, options.sentAt);
    }
    this.#push(true);
    if (this.#open) {
      // Only the probe's own failure schedules the next probe: requests sent before the breaker
      // opened, failing now, must not let a second probe out while the first is in flight.
      if (this.#probing && options.probe !== false) {
        this.#probing = false;
        this.#delay = Math.min(this.#delay * 2, this.#o.maxProbeDelayMs);
        this.#schedule(detail);
      }
      return true;
    }
    const failures = this.#recent.filter(Boolean).length;
    if (
      (options.unreachable && !answeredSince) ||
      this.#consecutive >= this.#o.consecutive ||
      (this.#recent.length >= this.#o.window && failures >= this.#o.windowFailures)
    ) {
      this.#open = true;
      this.#delay = this.#o.probeDelayMs;
      // Down since the first of the failures in a row left, not since the breaker saw enough of them:
      // requests that hang until a 10-minute timeout open it 10 minutes after the provider stopped
      // answering, and --max-outage counts from then.
      this.#openedAt = this.#consecutive > 0 ? Math.min(this.#streakSince, this.#clock()) : this.#clock();
      this.#schedule(detail);
      return true;
    }
    return false;
  }

  /** Any other result (a 4xx, a 429) says the provider is up, but not that it is well. */
  neutral(): void {
    this.#lastHeardAt = this.#now();
    this.#consecutive = 0;
    if (this.#probing) {
      this.#probing = false;
      this.success({ probe: true });
    }
  }

  probeAbandoned(): void {
    if (!this.#probing) return;
    this.#probing = false;
    this.#wakeAll();
  }

  dispose(): void {
    this.#clearTimer();
    this.#wakeAll();
  }

  #push(failed: boolean): void {
    this.#recent.push(failed);
    if (this.#recent.length > this.#o.window) this.#recent.shift();
  }

  #schedule(detail: string): void {
    this.#nextProbeAt = this.#clock() + this.#delay;
    this.onChange(true, this.#nextProbeAt, detail);
    this.#clearTimer();
    // Timers may fire a little before the clock reaches the deadline; waking waiters early would
    // send them back to sleep with no timer left, and the run would stall.
    const fire = (): void => {
      const left = this.#nextProbeAt - this.#clock();
      if (left > 0) {
        this.#timer = setTimeout(fire, left);
        this.#timer.unref?.();
      } else {
        this.#wakeAll();
      }
    };
    this.#timer = setTimeout(fire, this.#delay);
    this.#timer.unref?.();
  }

  #clearTimer(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    if (this.#untriedTimer) clearTimeout(this.#untriedTimer);
    this.#untriedTimer = null;
  }

  #wakeWhenUntriedLate(): void {
    if (this.#untriedTimer) return;
    // asked again when it fires: the probe's time may have moved on meanwhile
    const fire = (): void => {
      this.#untriedTimer = null;
      const left = this.#nextProbeAt + OutageBreaker.UNTRIED_FIRST_MS - this.#clock();
      if (left <= 0) return this.#wakeAll();
      this.#untriedTimer = setTimeout(fire, left);
      this.#untriedTimer.unref?.();
    };
    fire();
  }

  #wakeAll(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
  }
}
