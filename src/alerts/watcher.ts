import { duration } from '../report/format.js';
import { isOutageType } from '../scheduler/decide.js';
import type { SchedulerEventMap, SchedulerListener } from '../scheduler/events.js';
import type { RunAlert } from '../store/types.js';
import type { AlertThresholds } from './thresholds.js';

export type AlertKind = RunAlert['kind'];

/** What an alert hook receives when a threshold is crossed. */
export interface AlertHookBody extends RunAlert {
  readonly event: 'alert';
  readonly runId: string;
}

export interface AlertWatcherOptions {
  readonly thresholds: AlertThresholds;
  /** Reads the oldest pending job's enqueue time (ms epoch) or null; only called with an `oldestMs` threshold. */
  readonly oldestPendingAt?: () => Promise<number | null>;
  /** Called once per crossing. */
  readonly fire: (alert: AlertHookBody) => void;
  readonly now?: () => number;
  /** How often the oldest pending job is looked up. @default oldestCheckEveryMs(threshold) */
  readonly oldestEveryMs?: number;
}

/**
 * How often `--alert-oldest` looks at the queue: a quarter of the threshold, between 1 and 15 s, so
 * an alert fires within about a quarter of its own duration late. A fixed 15 s made `--alert-oldest
 * 1s` fire only when the run started more than a second after the enqueue. Status reads maintained
 * counts, so a look a second costs next to nothing.
 */
export function oldestCheckEveryMs(thresholdMs: number): number {
  return Math.min(15_000, Math.max(1_000, Math.round(thresholdMs / 4)));
}

/** Tries needed in the window before an error rate means anything. */
const MIN_TRIES = 20;

/**
 * Watches a run's events for the alert thresholds. Each alert fires once when its condition becomes
 * true and is re-armed when it becomes false again; those active now are stored with the run's
 * heartbeat, for `status` and the dashboard.
 */
export class AlertWatcher {
  readonly #o: AlertWatcherOptions;
  readonly #now: () => number;
  readonly #active = new Map<AlertKind, RunAlert>();
  /** Tries in the window: [ms epoch, errored]. */
  readonly #tries: Array<[number, boolean]> = [];
  #runId = '';
  #failed = 0;
  #timer: NodeJS.Timeout | null = null;

  constructor(options: AlertWatcherOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  readonly listener: SchedulerListener = (event, payload) => {
    if (event === 'run:start') {
      this.#runId = (payload as SchedulerEventMap['run:start']).runId;
      this.#startOldestWatch();
    } else if (event === 'job:done') this.#try(false);
    else if (event === 'job:failed') {
      this.#failed++;
      this.#try(true);
    } else if (event === 'job:retry') {
      // An outage's failures use no attempt (counted false), and are just what this alert is for: the
      // run sat paused on 60 of them in a row for ten minutes, its alerts silent. A 429's wait is no try.
      const r = payload as SchedulerEventMap['job:retry'];
      if (r.counted || isOutageType(r.reason)) this.#try(true);
    } else if (event === 'run:end') this.stop();
    const t = this.#o.thresholds;
    if (t.failed !== undefined && (event === 'job:failed' || event === 'run:start')) {
      this.#set(
        'failed',
        this.#failed >= t.failed,
        `${this.#failed} ${this.#failed === 1 ? 'job' : 'jobs'} failed (alert at ${t.failed})`,
        this.#failed,
        t.failed,
      );
    }
  };

  /** The alerts whose condition holds now. */
  active(): RunAlert[] {
    return [...this.#active.values()];
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  #try(errored: boolean): void {
    const t = this.#o.thresholds;
    if (t.errorRate === undefined) return;
    const now = this.#now();
    this.#tries.push([now, errored]);
    const since = now - (t.windowMs ?? 300_000);
    while (this.#tries.length && this.#tries[0]![0] < since) this.#tries.shift();
    const errors = this.#tries.reduce((n, [, e]) => n + (e ? 1 : 0), 0);
    const rate = errors / this.#tries.length;
    // "5 min" for whole minutes, else as durations read elsewhere ("20s", "1m 30s"): not "0 min" for 20 s
    const windowMs = t.windowMs ?? 300_000;
    const window = windowMs % 60_000 === 0 ? `${windowMs / 60_000} min` : duration(windowMs / 1000);
    // Below MIN_TRIES the rate is noise: leave the alert as it is rather than flap.
    if (this.#tries.length >= MIN_TRIES) {
      this.#set(
        'error-rate',
        rate >= t.errorRate,
        `${Math.round(rate * 100)}% of tries failed in the last ${window} (alert at ${Math.round(t.errorRate * 100)}%)`,
        rate,
        t.errorRate,
      );
    }
  }

  #startOldestWatch(): void {
    const { oldestMs } = this.#o.thresholds;
    const read = this.#o.oldestPendingAt;
    if (oldestMs === undefined || !read || this.#timer) return;
    const check = async () => {
      const at = await read().catch(() => undefined);
      if (at === undefined) return;
      // nothing pending waits at all: an empty queue never trips the alert, even at --alert-oldest 0s
      const age = at === null ? 0 : this.#now() - at;
      this.#set(
        'oldest',
        at !== null && age >= oldestMs,
        `the oldest pending job has waited ${duration(age / 1000)} (alert at ${duration(oldestMs / 1000)})`,
        age,
        oldestMs,
      );
    };
    void check();
    this.#timer = setInterval(() => void check(), this.#o.oldestEveryMs ?? oldestCheckEveryMs(oldestMs));
    this.#timer.unref();
  }

  #set(kind: AlertKind, on: boolean, message: string, value: number, threshold: number): void {
    if (!on) {
      this.#active.delete(kind);
      return;
    }
    if (this.#active.has(kind)) {
      this.#active.set(kind, { ...this.#active.get(kind)!, message, value });
      return;
    }
    const alert: RunAlert = { kind, message, value, threshold, since: this.#now() };
    this.#active.set(kind, alert);
    this.#o.fire({ event: 'alert', runId: this.#runId, ...alert });
  }
}
