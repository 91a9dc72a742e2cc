import type { AttemptRecord, Committed, ReserveRequest, ReserveResult } from '../types.js';
import { LIVE_RUN_MS } from '../spend-types.js';
import { heldTries, LEFT_OUT_SET, nanoDown, nanoUp, settlementOf, spendRunOf, usdOf } from '../spend-amounts.js';
import { immediateTxn, type Db } from './open.js';

const COMMITTED = 'reserved_nanousd + spent_nanousd + unknown_nanousd';

/**
 * The `spend` ledger in SQLite. Reserving reads the committed sums and adds to them in one
 * IMMEDIATE transaction: SQLite lets one writer in at a time, so two runs on the file cannot both
 * take the last of a budget. Settling happens in the transaction that writes the attempt row.
 */
export class SqliteSpend {
  readonly #db: Db;
  readonly #s;
  /** Made once (`immediateTxn`): a run under a budget reserves before every request. */
  readonly #reserveTxn: (rs: readonly ReserveRequest[]) => ReserveResult[];

  constructor(db: Db) {
    this.#db = db;
    this.#s = {
      open: db.prepare('INSERT INTO spend (run_id, updated_at) VALUES (?, ?) ON CONFLICT (run_id) DO NOTHING'),
      runCommitted: db.prepare(`SELECT ${COMMITTED} FROM spend WHERE run_id = ?`).pluck(),
      totalCommitted: db.prepare(`SELECT coalesce(sum(${COMMITTED}), 0) FROM spend`).pluck(),
      othersOut: db
        .prepare(`SELECT coalesce(sum(s.reserved_nanousd), 0) FROM spend s JOIN runs r ON r.id = s.run_id
          WHERE s.run_id <> ? AND r.ended_at IS NULL AND r.heartbeat_at > ?`)
        .pluck(),
      hold: db.prepare(
        'UPDATE spend SET reserved_nanousd = reserved_nanousd + ?, in_flight = in_flight + ?, updated_at = ? WHERE run_id = ?',
      ),
      unhold:
        db.prepare(`UPDATE spend SET reserved_nanousd = max(reserved_nanousd - ?, 0), in_flight = max(in_flight - ?, 0), updated_at = ?
        WHERE run_id = ?`),
      settle: db.prepare(`UPDATE spend SET reserved_nanousd = max(reserved_nanousd - @reserved, 0), in_flight = max(in_flight - @held, 0),
          spent_nanousd = spent_nanousd + @spent, unknown_nanousd = unknown_nanousd + @unknown, unknown_tries = unknown_tries + @maybe,
          unpriced_tries = unpriced_tries + @unpriced, updated_at = @now
        WHERE run_id = ${spendRunOf('@run')}`),
      leftOut: db.prepare(`UPDATE spend SET ${LEFT_OUT_SET}, updated_at = ? WHERE run_id = ?`),
    };
    this.#reserveTxn = immediateTxn(db, (rs: readonly ReserveRequest[]) => rs.map((r) => this.#reserveOne(r)));
  }

  /** The run's row, written with the run itself. */
  open(runId: string, now: number): void {
    this.#s.open.run(runId, now);
  }

  /**
   * Reservations in one transaction, each checked against what those before it took, in order: the
   * same answers as one transaction each, for one commit.
   */
  reserveAll(rs: readonly ReserveRequest[]): ReserveResult[] {
    return this.#reserveTxn(rs);
  }

  #reserveOne(r: ReserveRequest): ReserveResult {
    const s = this.#s;
    const usd = nanoUp(r.usd);
    s.open.run(r.runId, r.now);
    const run = s.runCommitted.get(r.runId) as number;
    if (r.runBudget !== null && run + usd > nanoDown(r.runBudget))
      return { ok: false, scope: 'run', committedUsd: usdOf(run), othersOutUsd: 0 };
    if (r.totalBudget !== null) {
      const total = s.totalCommitted.get() as number;
      if (total + usd > nanoDown(r.totalBudget)) {
        const othersOutUsd = usdOf(s.othersOut.get(r.runId, r.now - LIVE_RUN_MS) as number);
        return { ok: false, scope: 'total', committedUsd: usdOf(total), othersOutUsd };
      }
    }
    s.hold.run(usd, heldTries(usd), r.now, r.runId);
    return { ok: true };
  }

  unreserve(runId: string, usd: number, now: number): void {
    const nano = nanoUp(usd);
    this.#s.unhold.run(nano, heldTries(nano), now, runId);
  }

  committed(runId: string): Committed {
    return this.#db.transaction(() => ({
      run: usdOf((this.#s.runCommitted.get(runId) as number | undefined) ?? 0),
      total: usdOf(this.#s.totalCommitted.get() as number),
    }))();
  }

  /** Inside the transaction that writes the attempt row: its reservation goes, its cost arrives. */
  settle(a: AttemptRecord): void {
    const m = settlementOf(a);
    if (m) this.#s.settle.run({ ...m, now: a.endedAt, run: a.runId });
  }

  /**
   * `settle` for many attempts in one statement per run (a group commit of answers). The same end
   * as one by one: the amounts only add, and a floor at 0 taken once is the floor taken each time.
   */
  settleAll(attempts: readonly AttemptRecord[]): void {
    const sums = new Map<
      string,
      { reserved: number; held: number; spent: number; unknown: number; maybe: number; unpriced: number; now: number }
    >();
    for (const a of attempts) {
      const m = settlementOf(a);
      if (!m) continue;
      const t = sums.get(a.runId);
      if (!t) {
        sums.set(a.runId, { ...m, now: a.endedAt });
        continue;
      }
      t.reserved += m.reserved;
      t.held += m.held;
      t.spent += m.spent;
      t.unknown += m.unknown;
      t.maybe += m.maybe;
      t.unpriced += m.unpriced;
      t.now = a.endedAt;
    }
    for (const [run, t] of sums) this.#s.settle.run({ ...t, run });
  }

  /**
   * A run known dead, or ended with a request whose try was never stored (a store failing under it):
   * what it had out may have been billed, so it stays committed, as "may be billed".
   */
  leftOut(runId: string, now: number): void {
    this.#s.leftOut.run(now, runId);
  }
}
