import type { JobState, RunRow, StatusSnapshot } from '../store/types.js';
import type { PriceTable } from '../pricing/price-table.js';

/**
 * A run whose heartbeat is older than this is reported as not responding rather than active: it
 * probably died, and its leases will be taken back when they expire.
 */
export const STALE_RUN_MS = 90_000;

export interface ModelCost {
  readonly model: string;
  readonly jobs: number;
  readonly done: number;
  readonly prompt: number;
  readonly completion: number;
  /** USD per million [input, output], or null when unknown. */
  readonly price: readonly [number, number] | null;
  /** Where the price came from: `genai-prices 2026-09-23`, `--price`, `--prices FILE`, `LLMQ_PRICES`; null when unknown. */
  readonly priceSource: string | null;
  /** USD spent so far, null when the price is unknown. */
  readonly usd: number | null;
}

export interface RunReport {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly startedAt: number;
  readonly heartbeatAt: number;
  readonly endedAt: number | null;
  readonly exitReason: string | null;
  /** Still heartbeating (not ended, heartbeat within STALE_RUN_MS). */
  readonly live: boolean;
  readonly wallSeconds: number;
  readonly done: number;
  readonly failed: number;
  readonly retried: number;
  readonly requests: number;
  readonly rateLimited: number;
  readonly tokens: { readonly prompt: number; readonly completion: number };
  /** Done jobs over wall time: what the run achieved on average. */
  readonly averageJobsPerSecond: number;
  readonly averageTokensPerSecond: number;
  /** The run's own recent rate (its last heartbeat); meaningful while live. */
  readonly recentJobsPerSecond: number;
}

/** Everything `llmq status` shows; `--json` prints it as is. The first five fields are DESIGN.md's contract. */
export interface StatusReport {
  readonly counts: Record<JobState, number>;
  readonly total: number;
  readonly items: number;
  readonly tokens: { readonly prompt: number; readonly completion: number };
  readonly db: string;
  readonly now: number;
  /** Items that share a job with another item: calls saved by deduplication. */
  readonly sharedItems: number;
  readonly percentDone: number;
  /** Pending jobs that already had an attempt (waiting for their next try). */
  readonly retrying: number;
  readonly oldestPending: { readonly createdAt: number; readonly ageSeconds: number } | null;
  readonly cost: {
    /** USD so far; null when some model that used tokens has no known price. */
    readonly usd: number | null;
    /** USD so far counting only priced models. */
    readonly knownUsd: number;
    /** Models that used tokens but have no price (set one with --price or --prices). */
    readonly unpriced: readonly string[];
    /** Rough USD to finish the pending and running jobs at the average cost of a done job so far. */
    readonly remainingUsd: number | null;
    readonly byModel: readonly ModelCost[];
  };
  readonly failures: ReadonlyArray<{ readonly error: string; readonly count: number }>;
  readonly activeRuns: readonly RunReport[];
  readonly lastRun: RunReport | null;
  /** Sum of live runs' recent rates. */
  readonly jobsPerSecond: number | null;
  /** Seconds to finish the pending and running jobs at that rate; null without a live run. */
  readonly etaSeconds: number | null;
  /** Rate limits learned per (base URL, model): what the next run paces at. */
  readonly limits: ReadonlyArray<{
    readonly baseUrl: string; readonly model: string; readonly rpm: number | null; readonly tpm: number | null;
    readonly source: 'headers' | '429s'; readonly learnedAt: number; readonly ageSeconds: number;
  }>;
}

export function buildStatusReport(s: StatusSnapshot, o: { now: number; prices: PriceTable; db: string }): StatusReport {
  const byModel = s.byModel.map((m): ModelCost => {
    const pricing = o.prices.lookup(m.model);
    const usd = pricing ? pricing.cost({ promptTokens: m.prompt, completionTokens: m.completion }) : null;
    return {
      model: m.model, jobs: m.jobs, done: m.done, prompt: m.prompt, completion: m.completion,
      price: pricing?.perMillion ?? null, priceSource: pricing?.source ?? null, usd,
    };
  });
  const used = byModel.filter((m) => m.prompt + m.completion > 0);
  const unpriced = used.filter((m) => m.usd === null).map((m) => m.model);
  const knownUsd = used.reduce((a, m) => a + (m.usd ?? 0), 0);
  const left = s.counts.pending + s.counts.running;
  // Rough: the average cost of a done job so far, times the jobs left. Unknown before anything is done.
  const doneJobs = s.counts.done;
  const remainingUsd = left === 0 ? 0 : unpriced.length || doneJobs === 0 ? null : (knownUsd / doneJobs) * left;

  const activeRuns = s.activeRuns.map((r) => runReport(r, o.now));
  const live = activeRuns.filter((r) => r.live);
  const jobsPerSecond = live.length ? live.reduce((a, r) => a + r.recentJobsPerSecond, 0) : null;
  const etaSeconds = jobsPerSecond && jobsPerSecond > 0 ? left / jobsPerSecond : left === 0 && live.length ? 0 : null;

  return {
    counts: { ...s.counts },
    total: s.total,
    items: s.items,
    tokens: { prompt: s.tokens.prompt, completion: s.tokens.completion },
    db: o.db,
    now: o.now,
    sharedItems: Math.max(0, s.items - s.total),
    percentDone: s.total ? Math.round((1000 * s.counts.done) / s.total) / 10 : 0,
    retrying: s.retrying,
    oldestPending: s.oldestPendingAt === null ? null : { createdAt: s.oldestPendingAt, ageSeconds: Math.max(0, (o.now - s.oldestPendingAt) / 1000) },
    cost: { usd: unpriced.length ? null : knownUsd, knownUsd, unpriced, remainingUsd, byModel },
    failures: s.failures.map((f) => ({ error: f.error, count: f.count })),
    limits: s.lanes.map((l) => ({
      baseUrl: l.baseUrl, model: l.model, rpm: l.rpm, tpm: l.tpm, source: l.source, learnedAt: l.at,
      ageSeconds: Math.max(0, (o.now - l.at) / 1000),
    })),
    activeRuns,
    lastRun: s.lastRun ? runReport(s.lastRun, o.now) : null,
    jobsPerSecond,
    etaSeconds,
  };
}

export function runReport(r: RunRow, now: number): RunReport {
  const live = r.endedAt === null && now - r.heartbeatAt <= STALE_RUN_MS;
  const until = r.endedAt ?? (live ? now : r.heartbeatAt);
  const wallSeconds = Math.max(0, (until - r.startedAt) / 1000);
  const st = r.stats;
  const done = st?.done ?? 0;
  const tokens = { prompt: st?.promptTokens ?? 0, completion: st?.completionTokens ?? 0 };
  return {
    id: r.id, host: r.host, pid: r.pid, startedAt: r.startedAt, heartbeatAt: r.heartbeatAt, endedAt: r.endedAt,
    exitReason: r.exitReason, live, wallSeconds,
    done, failed: st?.failed ?? 0, retried: st?.retried ?? 0, requests: st?.requests ?? 0, rateLimited: st?.rateLimited ?? 0,
    tokens,
    averageJobsPerSecond: wallSeconds > 0 ? done / wallSeconds : 0,
    averageTokensPerSecond: wallSeconds > 0 ? (tokens.prompt + tokens.completion) / wallSeconds : 0,
    recentJobsPerSecond: st?.jobsPerSecond ?? 0,
  };
}
