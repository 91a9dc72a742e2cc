import type {
  JobState,
  RunAlert,
  RunLaneStats,
  RunRow,
  RunStats,
  SourceRejections,
  StatusSnapshot,
  WrongEndpoint,
} from '../store/types.js';
import type { PriceTable } from '../pricing/price-table.js';
import { buildCost, isLive, type CostReport, type RunsGoneHere } from './status-cost.js';
import { stillRemembered } from '../remembered-pace.js';
import { percentTenths } from './format.js';

/** A live run silent this long is said to be (five heartbeats at the default 2 s), and its last figures are not of now. */
export const QUIET_NOTED_MS = 10_000;

export type { CostReport, ModelCost, RunCost } from './status-cost.js';

export { STALE_RUN_MS, deadRunsHere, runsGoneHere, type RunsGoneHere } from './status-cost.js';

export interface RunReport {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly startedAt: number;
  readonly heartbeatAt: number;
  readonly endedAt: number | null;
  readonly exitReason: string | null;
  /** The error that ended it (exit reason `fatal` or `error`); null otherwise and for runs of versions that did not store it. */
  readonly error: string | null;
  /** Which budget ended it (exit reason `budget`): its own `--budget` or the queue's `--budget-total`; null otherwise or not stored. */
  readonly budgetReached: 'run' | 'total' | null;
  /** The budget that ended it stopped it with much of it left (one request may cost more than was left): the same amount again gets little or nothing done. */
  readonly budgetTooSmall: boolean;
  /** It ended showing its endpoint wrong, and how (`RunStats.wrongEndpoint`): a run proposed after it leaves a place for another (` --base-url URL`); null otherwise. */
  readonly wrongEndpoint: WrongEndpoint | null;
  /** Where it sent: its provider's name ("mock", "openai-compatible (https://api.openai.com/v1)"); null for runs that did not store it. */
  readonly provider: string | null;
  /** The lane it ran in: `batch`, or null for online (the default, not recorded). */
  readonly via: string | null;
  /** Where a batch run sends (its endpoint as the queue records batches', `laneBaseUrl`); null for online runs and batch runs of versions that did not store it. */
  readonly baseUrl: string | null;
  /** What it spent under and priced with (`--budget`, `--budget-total`, `--price`, `--prices`): a run proposed after it carries them. */
  readonly spendFlags: {
    readonly budget: number | null;
    readonly budgetTotal: number | null;
    readonly price: readonly [number, number] | null;
    readonly prices: string | null;
  };
  /** The limits it ran under (`--concurrency`, `--rpm`, `--tpm`, `--max-attempts`): a run proposed after it carries them. Null where not stored. */
  readonly limitFlags: {
    readonly concurrency: number | null;
    readonly rpm: number | null;
    readonly tpm: number | null;
    readonly maxAttempts: number | null;
  };
  /** The --base-url an online run was given, as a command shows it (query values masked, api-version kept); null where not given or not stored. */
  readonly endpoint: string | null;
  /** The --redis its pace was shared through, its password masked; null where none was given by the flag, or not stored. */
  readonly redis: string | null;
  /** The offline mock's `--mock-latency` of a mock run: a mock run proposed after it paces as it did. Null where not stored. */
  readonly mockFlags: { readonly mockLatency: number | null };
  /** Still heartbeating (not ended, heartbeat within STALE_RUN_MS) and not known dead. */
  readonly live: boolean;
  /** Known dead: on this machine, its process gone (`deadRunsHere`); the next run takes its jobs back at once. */
  readonly gone: boolean;
  /**
   * Started on this machine, its process gone, its heartbeat still recent (`pidGoneRunsHere`): stopped
   * a moment ago, most likely; still `live` until a few seconds of quiet make it `gone`.
   */
  readonly pidGoneHere: boolean;
  /** Started on this machine, its process stopped (Ctrl-Z, SIGSTOP): it keeps its jobs, sent when it is continued. */
  readonly stoppedHere: boolean;
  /**
   * Beating now: live, its process neither gone nor stopped here, its last heartbeat within
   * QUIET_NOTED_MS. Only then are its rate and figures of now; otherwise they are its last.
   */
  readonly sending: boolean;
  readonly wallSeconds: number;
  readonly done: number;
  readonly failed: number;
  readonly retried: number;
  readonly requests: number;
  readonly rateLimited: number;
  /** Of them, strays (taken for the provider's noise: the pace kept); null for runs of versions that did not count them. */
  readonly strayRateLimited: number | null;
  readonly tokens: { readonly prompt: number; readonly completion: number };
  /** Finished jobs (done and failed, as the progress bar counts them) over wall time: what the run achieved on average. */
  readonly averageJobsPerSecond: number;
  readonly averageTokensPerSecond: number;
  /** The run's own recent rate (its last heartbeat); meaningful while live. */
  readonly recentJobsPerSecond: number;
  /** From its last heartbeat; null or empty for runs of versions that did not store them. */
  readonly inFlight: number | null;
  /** Its jobs waiting out a backoff before their next try (running in the counts); null for runs of versions that did not store it. */
  readonly backingOff: number | null;
  readonly concurrency: number | null;
  readonly paused: NonNullable<RunStats['paused']> | null;
  readonly lanes: readonly RunLaneStats[];
  /** Its --alert-* thresholds crossed now (live runs only). */
  readonly alerts: readonly RunAlert[];
}

/** Everything `llmq status` shows; `--json` prints it as is. Its first four fields are the contract in docs/architecture.md ("Outside contract"). */
export interface StatusReport {
  readonly counts: Record<JobState, number>;
  readonly total: number;
  readonly items: number;
  readonly tokens: { readonly prompt: number; readonly completion: number };
  /** Answered jobs no item needs any more (their items now have other requests): kept, not in counts or total. */
  readonly orphanedAnswers: number;
  readonly db: string;
  readonly now: number;
  /** Items that share a job with another item: calls saved by deduplication. */
  readonly sharedItems: number;
  readonly percentDone: number;
  /** Pending jobs that already had an attempt (waiting for their next try). */
  readonly retrying: number;
  /**
   * Running jobs live runs hold while they wait out a backoff before their next try (a job is pending
   * only between runs): waiting for a retry too, or "retrying" stood at 0 while they waited.
   */
  readonly backingOff: number;
  readonly oldestPending: { readonly createdAt: number; readonly ageSeconds: number } | null;
  /** Money: so far per model, per run, what may be billed, and a rough figure to finish. */
  readonly cost: CostReport;
  readonly failures: ReadonlyArray<{ readonly error: string; readonly count: number }>;
  /** What the last enqueue of each input rejected (kept in the queue; never items), oldest first. */
  readonly rejected: readonly SourceRejections[];
  readonly activeRuns: readonly RunReport[];
  readonly lastRun: RunReport | null;
  /**
   * The ended runs that worked the queue at the same time as the last run (their time spans
   * overlap), and what they did together with it; null when it ran alone. Of several runs side by
   * side, the last run's own figures are only its share.
   */
  readonly lastRunBeside: LastRunBeside | null;
  /** Sum of live runs' recent rates. */
  readonly jobsPerSecond: number | null;
  /** Seconds to finish the pending and running jobs at that rate; null without a live run. */
  readonly etaSeconds: number | null;
  /** Alerts live runs raised (llmq run --alert-*), each with the run's host. */
  readonly alerts: ReadonlyArray<RunAlert & { readonly runId: string; readonly host: string }>;
  /** Rate limits learned per (base URL, model): what the next run paces at. */
  readonly limits: ReadonlyArray<{
    readonly baseUrl: string;
    readonly model: string;
    readonly rpm: number | null;
    readonly tpm: number | null;
    readonly source: 'headers' | '429s';
    readonly learnedAt: number;
    readonly ageSeconds: number;
    /** A pace only 429s taught, too long ago for the next run to start at (`stillRemembered`). */
    readonly expired: boolean;
  }>;
}

/** The runs beside the last run, and the work of all of them together (the last run included). */
export interface LastRunBeside {
  /** The others, the one that ended last first. */
  readonly runs: readonly RunReport[];
  readonly done: number;
  readonly failed: number;
  /** Jobs finished over the time from the first one's start to the last one's end. */
  readonly averageJobsPerSecond: number;
  readonly averageTokensPerSecond: number;
  /**
   * One of them died (killed, crashed): its figures are its last heartbeat's, which leave out what it
   * finished in its last seconds, so these are lower bounds.
   */
  readonly atLeast: boolean;
}

/**
 * When the jobs left are done at the live runs' pace, as each run's progress says it: after the
 * pause every sending run is in (a rate limit's retry-after of an hour); none while they wait for a
 * provider that is down, whose end nobody knows.
 */
function eta(left: number, jobsPerSecond: number | null, sending: readonly RunReport[], live: boolean, now: number): number | null {
  if (left === 0) return live ? 0 : null;
  if (!jobsPerSecond || jobsPerSecond <= 0) return null;
  const pauses = sending.map((r) => r.paused);
  if (pauses.some((p) => p?.reason === 'outage') && pauses.every((p) => p !== null)) return null;
  const allPaused = pauses.every((p) => p !== null && p.until > now);
  const pausedFor = allPaused ? Math.min(...pauses.map((p) => p!.until - now)) / 1000 : 0;
  return pausedFor + left / jobsPerSecond;
}

export function buildStatusReport(
  s: StatusSnapshot,
  o: { now: number; prices: PriceTable; db: string; here?: RunsGoneHere },
): StatusReport {
  const cost = buildCost(s, o.prices, o.now, o.here?.dead);
  const left = s.counts.pending + s.counts.running;

  const activeRuns = s.activeRuns.map((r) => runReport(r, o.now, o.here));
  const lastRun = s.lastRun ? runReport(s.lastRun, o.now, o.here) : null;
  const live = activeRuns.filter((r) => r.live);
  // a run whose process is gone here is most likely not sending, and one stopped here (Ctrl-Z) sends
  // nothing: the last rate of either would promise an ETA (a run stopped 80 s halved the queue's);
  // nor does a run quiet for several heartbeats (killed on another machine, whose pid cannot be
  // looked at from here: its last rate was added to the others' for up to STALE_RUN_MS)
  const sending = live.filter((r) => r.sending);
  const jobsPerSecond = sending.length ? sending.reduce((a, r) => a + r.recentJobsPerSecond, 0) : null;
  const etaSeconds = eta(left, jobsPerSecond, sending, live.length > 0, o.now);

  return {
    counts: { ...s.counts },
    total: s.total,
    items: s.items,
    tokens: { prompt: s.tokens.prompt, completion: s.tokens.completion },
    orphanedAnswers: s.orphanedAnswers,
    db: o.db,
    now: o.now,
    sharedItems: Math.max(0, s.items - s.total),
    percentDone: percentTenths(s.counts.done, s.total),
    retrying: s.retrying,
    backingOff: activeRuns.reduce((n, x) => n + (x.live ? (x.backingOff ?? 0) : 0), 0),
    oldestPending:
      s.oldestPendingAt === null ? null : { createdAt: s.oldestPendingAt, ageSeconds: Math.max(0, (o.now - s.oldestPendingAt) / 1000) },
    cost,
    failures: s.failures.map((f) => ({ error: f.error, count: f.count })),
    rejected: s.rejected,
    limits: s.lanes.map((l) => ({
      baseUrl: l.baseUrl,
      model: l.model,
      rpm: l.rpm,
      tpm: l.tpm,
      source: l.source,
      learnedAt: l.at,
      ageSeconds: Math.max(0, (o.now - l.at) / 1000),
      expired: !stillRemembered(l, o.now),
    })),
    activeRuns,
    lastRun,
    lastRunBeside: lastRun ? besideLastRun(lastRun, s.spend, o.now, o.here) : null,
    jobsPerSecond,
    etaSeconds,
    alerts: live.flatMap((r) =>
      r.alerts.filter((a) => !clearedSince(a, s.oldestPendingAt, o.now)).map((a) => ({ ...a, runId: r.id, host: r.host })),
    ),
  };
}

/** Ended runs that sent something while `last` ran (`runs`: every run that kept its money), with their work and its together; null if none. */
function besideLastRun(last: RunReport, runs: readonly RunRow[], now: number, here?: RunsGoneHere): LastRunBeside | null {
  if (last.endedAt === null) return null;
  const beside = runs
    // a batch lane's run sends nothing itself, and may span hours: its work is the provider's batch
    .filter((r) => r.id !== last.id && r.endedAt !== null && (r.stats?.requests ?? 0) > 0 && r.options.via !== 'batch')
    .filter((r) => r.startedAt < workedUntil(last) && workedUntil(r) > last.startedAt)
    .map((r) => runReport(r, now, here))
    .sort((a, b) => workedUntil(b) - workedUntil(a));
  if (beside.length === 0) return null;
  const all = [last, ...beside];
  const sum = (f: (r: RunReport) => number) => all.reduce((a, r) => a + f(r), 0);
  const seconds = (Math.max(...all.map(workedUntil)) - Math.min(...all.map((r) => r.startedAt))) / 1000;
  const per = (n: number) => (seconds > 0 ? n / seconds : 0);
  return {
    runs: beside,
    done: sum((r) => r.done),
    failed: sum((r) => r.failed),
    averageJobsPerSecond: per(sum((r) => r.done + r.failed)),
    averageTokensPerSecond: per(sum((r) => r.tokens.prompt + r.tokens.completion)),
    atLeast: all.some(diedRun),
  };
}

/** Ended by another run taking its jobs back: its figures are those of its last heartbeat. */
export function diedRun(r: Pick<RunRow, 'exitReason'>): boolean {
  return r.exitReason === 'died';
}

/** When an ended run last worked: its end, or for one that died its last heartbeat (its end is when another run took its jobs back, up to a lease later). */
function workedUntil(r: Pick<RunRow, 'exitReason' | 'endedAt' | 'heartbeatAt'>): number {
  return diedRun(r) ? r.heartbeatAt : r.endedAt!;
}

/** An oldest-pending alert whose wait the queue's own oldest job, read now, is under: it cleared since the run's heartbeat. */
function clearedSince(a: RunAlert, oldestPendingAt: number | null, now: number): boolean {
  return a.kind === 'oldest' && (oldestPendingAt === null || now - oldestPendingAt < a.threshold);
}

export function runReport(r: RunRow, now: number, here?: RunsGoneHere): RunReport {
  const live = isLive(r, now, here?.dead);
  const until = diedRun(r) ? r.heartbeatAt : (r.endedAt ?? (live ? now : r.heartbeatAt));
  const wallSeconds = Math.max(0, (until - r.startedAt) / 1000);
  const st = r.stats;
  const done = st?.done ?? 0;
  const tokens = { prompt: st?.promptTokens ?? 0, completion: st?.completionTokens ?? 0 };
  const pidGoneHere = live && (here?.pidGone.has(r.id) ?? false);
  const stoppedHere = here?.stopped.has(r.id) ?? false;
  const sending = live && !pidGoneHere && !stoppedHere && now - r.heartbeatAt <= QUIET_NOTED_MS;
  return {
    id: r.id,
    host: r.host,
    pid: r.pid,
    startedAt: r.startedAt,
    heartbeatAt: r.heartbeatAt,
    provider: typeof r.options.provider === 'string' ? r.options.provider : null,
    via: typeof r.options.via === 'string' ? r.options.via : null,
    baseUrl: typeof r.options.baseUrl === 'string' ? r.options.baseUrl : null,
    spendFlags: spendFlagsOf(r.options),
    limitFlags: limitFlagsOf(r.options),
    mockFlags: mockFlagsOf(r.options),
    endpoint: typeof r.options.endpoint === 'string' ? r.options.endpoint : null,
    redis: typeof r.options.redis === 'string' ? r.options.redis : null,
    endedAt: r.endedAt,
    exitReason: r.exitReason,
    error: typeof st?.error === 'string' ? st.error : null,
    budgetReached: st?.budgetReached === 'run' || st?.budgetReached === 'total' ? st.budgetReached : null,
    budgetTooSmall: st?.budgetTooSmall === true,
    wrongEndpoint: st?.wrongEndpoint === 'nobody-listened' || st?.wrongEndpoint === 'no-completions' ? st.wrongEndpoint : null,
    live,
    gone: r.endedAt === null && (here?.dead.has(r.id) ?? false),
    pidGoneHere,
    stoppedHere,
    sending,
    wallSeconds,
    done,
    failed: st?.failed ?? 0,
    retried: st?.retried ?? 0,
    requests: st?.requests ?? 0,
    rateLimited: st?.rateLimited ?? 0,
    strayRateLimited: st?.strayRateLimited ?? null,
    tokens,
    averageJobsPerSecond: wallSeconds > 0 ? (done + (st?.failed ?? 0)) / wallSeconds : 0,
    averageTokensPerSecond: wallSeconds > 0 ? (tokens.prompt + tokens.completion) / wallSeconds : 0,
    recentJobsPerSecond: st?.jobsPerSecond ?? 0,
    inFlight: st?.inFlight ?? null,
    backingOff: st?.backingOff ?? null,
    concurrency: st?.concurrency ?? null,
    // A pause from a run that stopped heartbeating is not news.
    paused: live ? (st?.paused ?? null) : null,
    lanes: st?.lanes ?? [],
    // its last heartbeat's: of now only while it beats (a run killed a moment ago raised them for good)
    alerts: sending ? (st?.alerts ?? []) : [],
  };
}

/** A run's --budget, --budget-total, --price and --prices from its stored options (absent in runs of versions that did not store them). */
export function spendFlagsOf(o: Record<string, unknown>): RunReport['spendFlags'] {
  const usd = (x: unknown) => (typeof x === 'number' && Number.isFinite(x) ? x : null);
  const price =
    Array.isArray(o.price) && o.price.length === 2 && o.price.every((x) => typeof x === 'number') ? (o.price as [number, number]) : null;
  return { budget: usd(o.budget), budgetTotal: usd(o.budgetTotal), price, prices: typeof o.prices === 'string' ? o.prices : null };
}

/** A mock run's --mock-latency (ms, 0 or more) from its stored options, else null. */
function mockFlagsOf(o: Record<string, unknown>): RunReport['mockFlags'] {
  const ms = o.mockLatency;
  return { mockLatency: typeof ms === 'number' && Number.isFinite(ms) && ms >= 0 ? ms : null };
}

/** A run's --concurrency, --rpm, --tpm and --max-attempts from its stored options: positive whole numbers, else null (a queue may hold anything). */
export function limitFlagsOf(o: Record<string, unknown>): RunReport['limitFlags'] {
  const n = (x: unknown) => (typeof x === 'number' && Number.isSafeInteger(x) && x > 0 ? x : null);
  return { concurrency: n(o.concurrency), rpm: n(o.rpm), tpm: n(o.tpm), maxAttempts: n(o.maxAttempts) };
}
