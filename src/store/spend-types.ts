/**
 * The money side of the store: --budget reservations and what each run committed. Amounts are USD
 * here; the tables keep integer nano-USD (see the `spend` migration).
 */

/** What `reserve` is asked to hold before a request leaves. */
export interface ReserveRequest {
  readonly runId: string;
  /** The request's worst case, USD. */
  readonly usd: number;
  /** --budget: the most this run may commit, USD; null for no limit. */
  readonly runBudget: number | null;
  /** --budget-total: the most every run on this queue together may commit, USD; null for no limit. */
  readonly totalBudget: number | null;
  readonly now: number;
}

/**
 * Reserved, or why not: what is committed already in the budget that would be exceeded, and (for
 * --budget-total) how much of it is held by other live runs for their requests out now, which
 * settle, usually far lower: a run with nothing out of its own waits for them rather than stopping.
 */
export type ReserveResult =
  | { readonly ok: true }
  | { readonly ok: false; readonly scope: 'run' | 'total'; readonly committedUsd: number; readonly othersOutUsd: number };

/** A run counts as live for `othersOutUsd` while its last heartbeat is this recent. */
export const LIVE_RUN_MS = 30_000;

/** Money a run committed, as `spend` keeps it (USD). */
export interface RunSpend {
  readonly runId: string;
  /** Worst cases of its requests out now; for a run that died, of those out when it died (they may have been billed). */
  readonly reservedUsd: number;
  readonly inFlight: number;
  /** What its answered tries cost. */
  readonly spentUsd: number;
  /** Worst cases of its tries whose request left and whose outcome is unknown. */
  readonly mayBeBilledUsd: number;
  readonly mayBeBilledTries: number;
  /** Answered tries of models without a price: not in spentUsd. */
  readonly unpricedTries: number;
}

/** What a run's money counts against a budget, as the stores' `committed` sums it: reserved + spent + may be billed. */
export function committedUsd(s: Pick<RunSpend, 'reservedUsd' | 'spentUsd' | 'mayBeBilledUsd'>): number {
  return s.reservedUsd + s.spentUsd + s.mayBeBilledUsd;
}

/** Committed USD (reserved + spent + may be billed): one run's, and every run's on the queue. */
export interface Committed {
  readonly run: number;
  readonly total: number;
}
