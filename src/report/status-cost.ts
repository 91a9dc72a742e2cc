import { hostname } from 'node:os';
import type { PriceTable } from '../pricing/price-table.js';
import type { RunRow, RunSpend, StatusSnapshot } from '../store/types.js';
import { goneOwners, isProcessAlive, isRunProcessStopped } from '../run-owners.js';
import { mockAnswersStandAmong } from '../store/mock-answers.js';

/**
 * A run whose heartbeat is older than this is reported as not responding rather than active: it
 * probably died, and its leases will be taken back when they expire.
 */
export const STALE_RUN_MS = 90_000;

/**
 * A run on this machine whose process is gone and that has been quiet this long is dead, as `llmq
 * run` judges it before taking its jobs back (three heartbeats at the default 2 s, at least 5 s).
 */
const QUIET_MS = 6_000;

/** Not ended, heartbeating within STALE_RUN_MS, and not known dead (`deadRunsHere`). */
/**
 * Whether a run goes on now: on this machine its pid says so at once (a run killed a moment ago
 * still heartbeated then; a stopped one goes on when continued), elsewhere its heartbeat.
 */
export function runGoesOn(r: RunRow, now: number): boolean {
  return r.host === hostname() ? isProcessAlive(r.pid) : isLive(r, now);
}

export function isLive(r: { id: string; endedAt: number | null; heartbeatAt: number }, now: number, dead?: ReadonlySet<string>): boolean {
  return r.endedAt === null && now - r.heartbeatAt <= STALE_RUN_MS && !dead?.has(r.id);
}

/** The runs among `runs` working the queue now: not ended, heartbeating, and not known dead here. */
export function workingRuns(runs: readonly RunRow[], now: number): RunRow[] {
  const dead = deadRunsHere(runs, now);
  return runs.filter((r) => isLive(r, now, dead));
}

/**
 * The runs among `runs` known dead: started on this machine, their process gone, quiet for a few
 * heartbeats. Without this a run killed with SIGKILL read as running for STALE_RUN_MS, its last
 * rate and ETA frozen, though the next `llmq run` would take its jobs back at once.
 */
export function deadRunsHere(runs: readonly RunRow[], now: number): ReadonlySet<string> {
  return runsGoneHere(runs, now).dead;
}

/**
 * The runs among `runs` started on this machine whose process is gone: `dead` as `deadRunsHere`
 * says, and `pidGone`, those that beat within the last few seconds: stopped a moment ago, most
 * likely (killed, or the machine's twin of the same name runs them: only the quiet that follows
 * tells). Each process is looked at once.
 */
export function runsGoneHere(runs: readonly RunRow[], now: number): RunsGoneHere {
  // this process runs none of the runs
  const self = {
    host: hostname(),
    pid: process.pid,
    runId: '',
    isAlive: isProcessAlive,
    isStopped: isRunProcessStopped,
    now,
    quietMs: QUIET_MS,
  };
  const { dead, dying, suspended } = goneOwners(runs, self);
  return { dead: new Set(dead), pidGone: new Set(dying), stopped: new Set(suspended.map((r) => r.id)) };
}

export interface RunsGoneHere {
  readonly dead: ReadonlySet<string>;
  readonly pidGone: ReadonlySet<string>;
  /** Runs here whose process is stopped (Ctrl-Z, `goneOwners`' suspended): they keep their jobs. */
  readonly stopped: ReadonlySet<string>;
}

export interface ModelCost {
  readonly model: string;
  readonly jobs: number;
  readonly done: number;
  readonly prompt: number;
  readonly completion: number;
  /** Its jobs dropped unanswered whose tries were billed (`forget`): not in `jobs`, their cost in `usd`. */
  readonly dropped: number;
  /** USD per million [input, output] as priced now, or null when unknown. */
  readonly price: readonly [number, number] | null;
  /** Where that price came from: `genai-prices 2026-09-23`, `--price`, `--prices FILE`, `LLMQ_PRICES`; null when unknown. */
  readonly priceSource: string | null;
  /**
   * USD of its answers: each at the price known when it came (stored with it), and answers stored
   * without one priced now. Null when some answer has no price then or now.
   */
  readonly usd: number | null;
}

/** One run's money, from the `spend` ledger. */
export interface RunCost extends RunSpend {
  readonly host: string;
  readonly startedAt: number;
  readonly endedAt: number | null;
  /** Still heartbeating: its reservations are requests out now, not "may be billed". */
  readonly live: boolean;
  /** The --budget and --budget-total it ran with, USD. */
  readonly budgetUsd: number | null;
  readonly budgetTotalUsd: number | null;
  /**
   * Requests a run without a budget had out when it died (its last heartbeat's count): nothing
   * reserved their worst case, so they may be billed at a cost not known. 0 for a live or ended run.
   */
  readonly unpricedInFlight: number;
  /** It ended without finishing (killed, crashed): gone silent, or its jobs taken back as a dead run's. */
  readonly died: boolean;
  /** It ran on the offline mock, which bills nothing: its $0 is not a price. */
  readonly mock: boolean;
}

export interface CostReport {
  /** USD so far; null when some model that answered has no known price. */
  readonly usd: number | null;
  /** USD so far counting only priced answers. */
  readonly knownUsd: number;
  /** Models that answered without a price (set one with --price or --prices). */
  readonly unpriced: readonly string[];
  /** Rough USD to finish the pending and running jobs at the average cost of a done job so far. */
  readonly remainingUsd: number | null;
  readonly byModel: readonly ModelCost[];
  /** Every run that kept its money, newest first. */
  readonly byRun: readonly RunCost[];
  /**
   * Tries whose request left and whose outcome is unknown (timed out, cut off, stopped in flight,
   * or out when their run died), at their worst case: providers may bill them. Not in `usd`.
   */
  readonly mayBeBilled: {
    readonly tries: number;
    /** The worst cases of the tries that had one counted. */
    readonly usd: number;
    /** Of `tries`, those out when a run without a budget died: nothing counted their worst case, so `usd` leaves them out. */
    readonly unpricedTries: number;
  };
}

/**
 * Rough USD to finish: each model's jobs left, each at the tokens of that model's average answer so
 * far, at its price now, so that `--price` prices the rest too, and answers that cost nothing (the
 * mock provider) do not make the rest look free. Null when a model with jobs left has no answer yet
 * or no price (`llmq estimate` does better: it counts each prompt).
 */
function remainingCost(s: StatusSnapshot, prices: PriceTable): number | null {
  // the offline mock's answers are stand-ins, short and free: no measure of what the rest will cost
  // (estimate leaves them out of its averages; status has only the totals, so says nothing)
  // (a mock run that answered nothing, as its last figures say, is none of those)
  if (mockAnswersStandAmong(s.spend)) return null;
  let usd = 0;
  for (const m of s.byModel) {
    const left = m.pending + m.running;
    if (left === 0) continue;
    const pricing = prices.lookup(m.model);
    if (!pricing || m.done === 0) return null;
    usd += left * pricing.cost({ promptTokens: m.donePrompt / m.done, completionTokens: m.doneCompletion / m.done });
  }
  return usd;
}

export function buildCost(s: StatusSnapshot, prices: PriceTable, now: number, dead?: ReadonlySet<string>): CostReport {
  const byModel = s.byModel.map((m): ModelCost => {
    const pricing = prices.lookup(m.model);
    const unstored = m.unpricedPrompt + m.unpricedCompletion > 0;
    const usd = !unstored
      ? m.storedUsd
      : pricing
        ? m.storedUsd + pricing.cost({ promptTokens: m.unpricedPrompt, completionTokens: m.unpricedCompletion })
        : null;
    return {
      model: m.model,
      jobs: m.jobs,
      done: m.done,
      prompt: m.prompt,
      completion: m.completion,
      dropped: m.dropped,
      price: pricing?.perMillion ?? null,
      priceSource: pricing?.source ?? null,
      usd,
    };
  });
  const unpriced = byModel.filter((m) => m.usd === null).map((m) => m.model);
  const knownUsd = byModel.reduce((a, m) => a + (m.usd ?? 0), 0);
  const remainingUsd = remainingCost(s, prices);

  const byRun = s.spend.filter(sentOrSpent).map((r): RunCost => {
    const budget = (key: string) => (typeof r.options[key] === 'number' ? (r.options[key] as number) : null);
    const live = isLive(r, now, dead);
    const budgetUsd = budget('budget');
    const budgetTotalUsd = budget('budgetTotal');
    // Under a budget every request out is reserved (reservedUsd and inFlight say them); without one
    // only the heartbeat counted them, and they stay counted once the next run has taken the run's
    // jobs back (ended as 'died'), when they are sent again. A batch lane's requests are its polls,
    // and the offline mock bills nothing.
    const died = (r.endedAt === null && !live) || r.exitReason === 'died';
    const unreserved = died && budgetUsd === null && budgetTotalUsd === null && r.options.via !== 'batch' && r.options.provider !== 'mock';
    return {
      ...r.spend,
      host: r.host,
      startedAt: r.startedAt,
      endedAt: r.endedAt,
      live,
      budgetUsd,
      budgetTotalUsd,
      unpricedInFlight: unreserved ? (r.stats?.inFlight ?? 0) : 0,
      died,
      mock: r.options.provider === 'mock',
    };
  });
  const mayBeBilled = byRun
    .map(runMayBeBilled)
    .reduce((a, m) => ({ tries: a.tries + m.tries, usd: a.usd + m.usd, unpricedTries: a.unpricedTries + m.unpricedTries }), {
      tries: 0,
      usd: 0,
      unpricedTries: 0,
    });
  return { usd: unpriced.length ? null : knownUsd, knownUsd, unpriced, remainingUsd, byModel, byRun, mayBeBilled };
}

/**
 * One run's tries that may be billed: those it recorded, and, once it is gone and cannot settle
 * them, what it had out (reserved under a budget, else as its last heartbeat counted them).
 */
export function runMayBeBilled(r: RunCost): CostReport['mayBeBilled'] {
  return {
    tries: r.mayBeBilledTries + (r.live ? 0 : r.inFlight) + r.unpricedInFlight,
    usd: r.mayBeBilledUsd + (r.live ? 0 : r.reservedUsd),
    unpricedTries: r.unpricedInFlight,
  };
}

/**
 * A run to list with its money: it sent a request, holds or spent money, or cannot say (still
 * running, or no stats). A run that found nothing to do is not listed (as `last run` skips it):
 * five `llmq run`s of a finished queue made five "$0.00" lines and pushed the ones that worked
 * into "earlier runs".
 */
function sentOrSpent(r: StatusSnapshot['spend'][number]): boolean {
  const m = r.spend;
  // a batch-lane run's requests are its polls: one that only submitted (--no-wait) made none
  if (r.endedAt === null || r.stats === null || r.stats.requests > 0 || r.options.via === 'batch') return true;
  return m.spentUsd !== 0 || m.reservedUsd !== 0 || m.inFlight !== 0 || m.mayBeBilledTries !== 0 || m.unpricedTries !== 0;
}
