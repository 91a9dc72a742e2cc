import { buildBatchesReport, readBatchRows, type BatchesReport } from '../report/batches-text.js';
import { buildStatusReport, runsGoneHere, type StatusReport } from '../report/status.js';
import type { PriceTable } from '../pricing/price-table.js';
import type { BatchLedger, QueueReader } from '../store/types.js';

/** What the dashboard shows: `llmq status --json`, batches included. */
export type DashboardReport = StatusReport & { readonly batches: BatchesReport };

/** One throughput sample: jobs finished per second between two polls, and tokens per second. */
export interface ThroughputPoint {
  /** Seconds since the epoch (uPlot's x unit). */
  readonly t: number;
  /** Null at a break: no page was open, so the queue was not read (the chart draws a gap). */
  readonly jobsPerSecond: number | null;
  readonly tokensPerSecond: number | null;
}

/** What a dashboard is sent: the whole picture on connect, then only the parts that changed. */
export type FeedMessage =
  | { readonly type: 'snapshot'; readonly report: DashboardReport; readonly history: readonly ThroughputPoint[]; readonly readMs: number }
  | {
      readonly type: 'patch';
      readonly changes: Partial<DashboardReport>;
      readonly points: readonly ThroughputPoint[];
      readonly readMs: number;
    }
  // Not `error`: EventSource fires that name for a lost connection.
  | { readonly type: 'unreadable'; readonly message: string };

export interface FeedOptions {
  readonly store: Pick<QueueReader, 'status'> & { readonly batches: Pick<BatchLedger['batches'], 'open' | 'recent'> };
  readonly prices: PriceTable;
  /** The database as shown (no password). */
  readonly db: string;
  readonly everyMs: number;
  readonly now?: () => number;
  /** Throws when the queue opened is not the one at its place any more (`queueFileWatch`): read as unreadable. */
  readonly stillThere?: () => void;
}

/** An hour of samples at the default 2 s poll. */
const HISTORY_POINTS = 1800;

/**
 * Polls the store's status once per interval for every connected dashboard together, so N open
 * tabs cost one query, and only while at least one is open. Throughput comes from the change in
 * done jobs and tokens between polls, so runs on other machines count too.
 */
export class StatusFeed {
  readonly #o: FeedOptions;
  readonly #now: () => number;
  readonly #subscribers = new Set<(m: FeedMessage) => void>();
  readonly #history: ThroughputPoint[] = [];
  #last: DashboardReport | null = null;
  #timer: NodeJS.Timeout | null = null;
  #polling: Promise<boolean> | null = null;
  /** The timer stopped (no page open) since the last report: the next point comes after a break in the chart. */
  #pollingStopped = false;
  /** How long the last poll took: the cost of live updates, shown in the page's footer. */
  lastPollMs = 0;
  /** Why the last poll could not read the queue; null when it could. */
  lastError: string | null = null;

  constructor(options: FeedOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  /** Start receiving messages: a snapshot first, then patches. Returns the unsubscribe function. */
  async subscribe(send: (m: FeedMessage) => void): Promise<() => void> {
    if (!this.#last || !this.#timer) await this.#poll();
    // Subscribed only once the snapshot is out, so no patch can arrive before it.
    if (this.#last) send({ type: 'snapshot', report: this.#last, history: [...this.#history], readMs: this.lastPollMs });
    this.#subscribers.add(send);
    this.#timer ??= setInterval(() => void this.#poll(), this.#o.everyMs);
    return () => {
      this.#subscribers.delete(send);
      if (this.#subscribers.size === 0 && this.#timer) {
        clearInterval(this.#timer);
        this.#timer = null;
        this.#pollingStopped = true;
      }
    };
  }

  /**
   * The latest report, polling now if there is none or `fresh` is asked; null while the queue cannot
   * be read (asked fresh, not the last report read before it became unreadable).
   */
  async report(fresh = false): Promise<DashboardReport | null> {
    if ((fresh || !this.#last) && !(await this.#poll())) return null;
    return this.#last ?? null;
  }

  close(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#subscribers.clear();
  }

  /** Whether the queue was read. */
  #poll(): Promise<boolean> {
    // One poll at a time: a slow database must not pile queries up behind each other.
    this.#polling ??= this.#pollOnce().finally(() => {
      this.#polling = null;
    });
    return this.#polling;
  }

  async #pollOnce(): Promise<boolean> {
    const started = performance.now();
    let report: DashboardReport;
    try {
      this.#o.stillThere?.();
      const now = this.#now();
      const snapshot = await this.#o.store.status();
      const here = runsGoneHere(snapshot.activeRuns, now);
      const status = buildStatusReport(snapshot, { now, prices: this.#o.prices, db: this.#o.db, here });
      // as `llmq status --json` has them: the live batches and the last few that ended
      report = {
        ...status,
        batches: buildBatchesReport(await readBatchRows(this.#o.store.batches), now, { active: snapshot.activeRuns, dead: here.dead }),
      };
    } catch (error) {
      this.lastError = error instanceof Error ? error.message : String(error);
      this.#broadcast({ type: 'unreadable', message: this.lastError });
      return false;
    }
    this.lastError = null;
    this.lastPollMs = performance.now() - started;
    const before = this.#last;
    this.#last = report;
    if (!before) return true;
    const points = historyPoints(before, report, this.#pollingStopped);
    this.#pollingStopped = false;
    this.#history.push(...points);
    if (this.#history.length > HISTORY_POINTS) this.#history.splice(0, this.#history.length - HISTORY_POINTS);
    const changes = changedFields(before, report);
    if (Object.keys(changes).length > 0 || points.length > 0) this.#broadcast({ type: 'patch', changes, points, readMs: this.lastPollMs });
    return true;
  }

  #broadcast(m: FeedMessage): void {
    for (const send of this.#subscribers) send(m);
  }
}

/**
 * Jobs and tokens per second between two reports (done and failed both finish a job, and so does an
 * answer no item needs now: counted in `orphanedAnswers`, not done). Items moving off answered jobs
 * and back move jobs between done and orphanedAnswers: no job finished then.
 */
export function throughput(a: StatusReport, b: StatusReport): ThroughputPoint | null {
  const seconds = (b.now - a.now) / 1000;
  if (seconds <= 0) return null;
  const ended = (r: StatusReport) => r.counts.done + r.counts.failed + r.orphanedAnswers;
  const finished = ended(b) - ended(a);
  const tokens = b.tokens.prompt + b.tokens.completion - (a.tokens.prompt + a.tokens.completion);
  // A retry-failed or a re-enqueue lowers the counts; that is not negative throughput.
  return { t: b.now / 1000, jobsPerSecond: Math.max(0, finished / seconds), tokensPerSecond: Math.max(0, tokens / seconds) };
}

/**
 * The chart's points from one poll to the next: the throughput between them, after a break when no
 * page was open since the one before (the feed stopped polling). Joined, the point before such a gap
 * and the minutes' average after it were drawn as a ramp (7 minutes at 44 jobs/s rose from 0).
 */
export function historyPoints(a: StatusReport, b: StatusReport, afterBreak: boolean): ThroughputPoint[] {
  const point = throughput(a, b);
  if (!point) return [];
  if (!afterBreak) return [point];
  return [{ t: (a.now + 1) / 1000, jobsPerSecond: null, tokensPerSecond: null }, point];
}

/** The top-level fields whose value differs (compared as JSON: reports are plain data). */
export function changedFields<R extends object>(a: R, b: R): Partial<R> {
  const changes: Record<string, unknown> = {};
  for (const k of Object.keys(b) as Array<keyof R & string>) {
    if (JSON.stringify(a[k]) !== JSON.stringify(b[k])) changes[k] = b[k];
  }
  return changes as Partial<R>;
}
