import type { Deliver } from './deliver.js';

export interface HookCounts {
  readonly sent: number;
  /** Deliveries that failed after their retries. */
  readonly failed: number;
  /** Not delivered: the queue was full, or the run ended before their turn or while they were tried. */
  readonly dropped: number;
  /** Of those, refused as they came because the queue was full (the hook slower than the jobs). */
  readonly queueFull: number;
  /** Why the last delivery that failed failed, or, of one dropped while it retried, its last try; for the report. */
  readonly lastError: string | null;
}

/**
 * Hook bodies waiting to go out, at most `capacity`, sent by a few workers in the background. The
 * run only ever pushes (never waits): when a hook is slower than the jobs, the newest bodies are
 * dropped and counted instead of holding memory or the run.
 */
export class HookQueue {
  readonly #deliver: Deliver;
  readonly #capacity: number;
  readonly #workers: number;
  /** A body may be made when its turn comes (a job hook's items, read from the store then): by the worker that sends it. */
  readonly #waiting: Array<string | (() => Promise<string>)> = [];
  #busy = 0;
  /** Deliveries being tried now, each with its last failed try: reported if the drain drops it. */
  readonly #underWay = new Set<{ lastTry: string | null }>();
  #idle: Array<() => void> = [];
  /**
   * Drained: nothing more is taken, and a delivery that ends after this was under way at the
   * deadline and is already counted as dropped, whatever it ends as.
   */
  #closed = false;
  /** Aborted at the deadline: deliveries under way give up then (deliver.ts). */
  readonly #stop = new AbortController();
  sent = 0;
  failed = 0;
  dropped = 0;
  queueFull = 0;
  lastError: string | null = null;

  /** Told once, the first time a try fails: a dead hook is said while the run goes on, not only at its end. */
  #onFirstTrouble: ((why: string) => void) | undefined;

  constructor(deliver: Deliver, o: { capacity?: number; workers?: number; onFirstTrouble?: (why: string) => void } = {}) {
    this.#deliver = deliver;
    this.#capacity = o.capacity ?? 1000;
    this.#workers = o.workers ?? 2;
    this.#onFirstTrouble = o.onFirstTrouble;
  }

  #trouble(why: string): void {
    const tell = this.#onFirstTrouble;
    this.#onFirstTrouble = undefined;
    tell?.(why);
  }

  /** Queue a body; false (and counted) when the queue is full or closed. */
  push(body: string | (() => Promise<string>)): boolean {
    if (this.#closed || this.#waiting.length >= this.#capacity) {
      this.dropped++;
      if (!this.#closed) this.queueFull++;
      return false;
    }
    this.#waiting.push(body);
    if (this.#busy < this.#workers) void this.#work();
    return true;
  }

  /** Wait for the queue to empty, at most `deadlineMs`; what is still waiting then is dropped. */
  async drain(deadlineMs: number): Promise<HookCounts> {
    if (this.#busy > 0 || this.#waiting.length > 0) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => this.#idle.push(resolve)),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, deadlineMs);
        }),
      ]);
      clearTimeout(timer);
    }
    this.#closed = true;
    this.#stop.abort();
    this.dropped += this.#waiting.splice(0).length + this.#busy;
    // a delivery dropped while it retried says why its tries failed
    for (const d of this.#underWay) if (d.lastTry !== null) this.lastError = d.lastTry;
    return this.counts();
  }

  counts(): HookCounts {
    return { sent: this.sent, failed: this.failed, dropped: this.dropped, queueFull: this.queueFull, lastError: this.lastError };
  }

  async #work(): Promise<void> {
    this.#busy++;
    try {
      for (let body = this.#waiting.shift(); body !== undefined; body = this.#closed ? undefined : this.#waiting.shift()) {
        const delivery: { lastTry: string | null } = { lastTry: null };
        this.#underWay.add(delivery);
        try {
          await this.#deliver(typeof body === 'string' ? body : await body(), this.#stop.signal, (why) => {
            delivery.lastTry = why;
            this.#trouble(why);
          });
          if (!this.#closed) this.sent++;
        } catch (error) {
          if (this.#closed) continue;
          this.failed++;
          this.lastError = error instanceof Error ? error.message : String(error);
          this.#trouble(this.lastError);
        } finally {
          this.#underWay.delete(delivery);
        }
      }
    } finally {
      this.#busy--;
      if (this.#busy === 0) for (const resolve of this.#idle.splice(0)) resolve();
    }
  }
}
