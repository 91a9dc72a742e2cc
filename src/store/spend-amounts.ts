import type { AttemptRecord, RunSpend } from './types.js';

/**
 * USD to the ledger's integer nano-USD, rounded up: the ledger never counts less than was spent or
 * reserved, so a budget it holds is held in dollars too. (The 1e-6 keeps 0.000135 * 1e9 =
 * 135000.00000000003 from rounding up to 135001.)
 */
export function nanoUp(usd: number): number {
  return Math.max(0, Math.ceil(usd * 1e9 - 1e-6));
}

/** A budget in nano-USD, rounded down: what may be committed, at most. */
export function nanoDown(usd: number): number {
  return Math.max(0, Math.floor(usd * 1e9 + 1e-6));
}

export function usdOf(nano: number | string): number {
  return Number(nano) / 1e9;
}

/**
 * The tries a reservation of `nano` nano-USD counts in flight: one, or none for a request that
 * costs nothing (a free model under a budget). A $0 reservation holds nothing back, so nothing of
 * it may be billed; the attempt's settlement (`held`) takes off the same one or none.
 */
export function heldTries(nano: number): 0 | 1 {
  return nano > 0 ? 1 : 0;
}

/** How one attempt row moves its run's money: the reservation it settles goes, what it cost arrives. */
export interface Settlement {
  /** nano-USD of the reservation settled, and 1 if there was one. */
  readonly reserved: number;
  readonly held: number;
  /** nano-USD that was billed, or may have been (its worst case), and 1 for a may-be-billed try. */
  readonly spent: number;
  readonly unknown: number;
  readonly maybe: number;
  /** 1 for an answer priced at nothing known. */
  readonly unpriced: number;
}

/** Null when the attempt moves no money (an error answer with no reservation; a row written without costs). */
export function settlementOf(a: AttemptRecord): Settlement | null {
  const cost = a.costUsd;
  const reserved = a.reservedUsd ? nanoUp(a.reservedUsd) : 0;
  const maybe = a.mayBeBilled === true;
  const s: Settlement = {
    reserved,
    held: heldTries(reserved),
    spent: !maybe && typeof cost === 'number' ? nanoUp(cost) : 0,
    // without a price the try is still counted, at an unknown cost
    unknown: maybe && typeof cost === 'number' ? nanoUp(cost) : 0,
    maybe: maybe ? 1 : 0,
    // `undefined` is a writer that does not keep money (old rows, tests); null is a price that was not known.
    unpriced: cost === null && a.outcome === 'done' ? 1 : 0,
  };
  return s.held || s.spent || s.unknown || s.maybe || s.unpriced ? s : null;
}

/** A `spend` row as both stores' SQL returns it. */
export interface RawSpend {
  run_id: string;
  reserved_nanousd: number | string;
  in_flight: number;
  spent_nanousd: number | string;
  unknown_nanousd: number | string;
  unknown_tries: number;
  unpriced_tries: number;
}

export function toRunSpend(r: RawSpend): RunSpend {
  return {
    runId: r.run_id,
    reservedUsd: usdOf(r.reserved_nanousd),
    inFlight: Number(r.in_flight),
    spentUsd: usdOf(r.spent_nanousd),
    mayBeBilledUsd: usdOf(r.unknown_nanousd),
    mayBeBilledTries: Number(r.unknown_tries),
    unpricedTries: Number(r.unpriced_tries),
  };
}

/** The columns of `spend` a reader selects next to a run's, prefixed so they cannot clash with `runs`. */
/**
 * A run's money still reserved when it died, or ended with a try never stored: moved to "may be
 * billed" (those requests may have left). The SET clause of an UPDATE of spend, in either dialect.
 */
export const LEFT_OUT_SET =
  'unknown_nanousd = unknown_nanousd + reserved_nanousd, unknown_tries = unknown_tries + in_flight, reserved_nanousd = 0, in_flight = 0';

export const SPEND_COLUMNS = `s.run_id AS s_run_id, s.reserved_nanousd AS s_reserved_nanousd, s.in_flight AS s_in_flight,
  s.spent_nanousd AS s_spent_nanousd, s.unknown_nanousd AS s_unknown_nanousd, s.unknown_tries AS s_unknown_tries,
  s.unpriced_tries AS s_unpriced_tries`;

/** The spend of a row selected with SPEND_COLUMNS (null when the run has none). */
export function spendOfJoined(row: object): RunSpend | null {
  const r = row as Record<string, unknown>;
  if (r.s_run_id === null || r.s_run_id === undefined) return null;
  return toRunSpend({
    run_id: r.s_run_id as string,
    reserved_nanousd: r.s_reserved_nanousd as number,
    in_flight: r.s_in_flight as number,
    spent_nanousd: r.s_spent_nanousd as number,
    unknown_nanousd: r.s_unknown_nanousd as number,
    unknown_tries: r.s_unknown_tries as number,
    unpriced_tries: r.s_unpriced_tries as number,
  });
}

/**
 * SQL for the run whose `spend` row an attempt of run `run` (a parameter) settles into: its own; for
 * a batch answer (run `batch:<submission>`, as its attempt row keeps it to tell batch prices) the
 * run that collected the batch, so what batches cost counts in that run's money and in every
 * run's --budget-total. The prefix is `batchOwner`'s (src/store/batches.ts). `run` must not be a bare
 * `run_id` column: inside the subquery that would be the batch's.
 */
export function spendRunOf(run: string): string {
  return `CASE WHEN ${run} LIKE 'batch:%' THEN coalesce((SELECT b.run_id FROM batches b WHERE b.id = substr(${run}, 7)), ${run}) ELSE ${run} END`;
}
