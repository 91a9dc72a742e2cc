import type pg from 'pg';
import type { AttemptRecord, Committed, ReserveRequest, ReserveResult } from '../types.js';
import { LIVE_RUN_MS } from '../spend-types.js';
import { heldTries, nanoDown, nanoUp, settlementOf, spendRunOf, usdOf } from '../spend-amounts.js';
import { inTransaction, query } from './connect.js';

const COMMITTED = 'reserved_nanousd + spent_nanousd + unknown_nanousd';

/**
 * The settlement of one attempt row as a data-modifying CTE named `settled`: the reservation goes,
 * the cost arrives. `$2` is the attempt's run and `$5` its end (as in INSERT_ATTEMPT); its six
 * amounts start at `$first` (see settlementParams). A row that moves no money writes nothing.
 */
export function settleSql(first: number): string {
  const [reserved, held, spent, unknown, maybe, unpriced] = [0, 1, 2, 3, 4, 5].map((i) => `$${first + i}`);
  return `settled AS (
    UPDATE spend SET reserved_nanousd = greatest(reserved_nanousd - ${reserved}::bigint, 0), in_flight = greatest(in_flight - ${held}::int, 0),
      spent_nanousd = spent_nanousd + ${spent}::bigint, unknown_nanousd = unknown_nanousd + ${unknown}::bigint,
      unknown_tries = unknown_tries + ${maybe}::int, unpriced_tries = unpriced_tries + ${unpriced}::int, updated_at = $5
    WHERE run_id = ${spendRunOf('$2::text')} AND ${held}::int + ${spent}::bigint + ${unknown}::bigint + ${maybe}::int + ${unpriced}::int > 0
  )`;
}

export function settlementParams(a: AttemptRecord): unknown[] {
  const m = settlementOf(a);
  return m ? [m.reserved, m.held, m.spent, m.unknown, m.maybe, m.unpriced] : [0, 0, 0, 0, 0, 0];
}

/**
 * The `spend` ledger in PostgreSQL. A reservation locks its run's row; against --budget-total it
 * first takes a transaction-scoped advisory lock for the schema, so runs on many machines check
 * and take the last of a shared budget one at a time. Settling runs with the attempt's own
 * statement (settleSql) and only ever lowers what is committed, so it needs no lock.
 */
export class PgSpend {
  readonly #pool: pg.Pool;
  readonly #lockKey: string;

  constructor(pool: pg.Pool, schema: string) {
    this.#pool = pool;
    this.#lockKey = `llmq:spend:${schema}`;
  }

  reserve(r: ReserveRequest): Promise<ReserveResult> {
    return inTransaction(this.#pool, async (db): Promise<ReserveResult> => {
      if (r.totalBudget !== null) await db.query('SELECT pg_advisory_xact_lock(hashtext($1))', [this.#lockKey]);
      const usd = nanoUp(r.usd);
      // Creates the run's row if it has none, and locks it either way.
      const run = Number(
        (
          await db.query<{ v: string }>(
            `INSERT INTO spend (run_id, updated_at) VALUES ($1, $2)
        ON CONFLICT (run_id) DO UPDATE SET updated_at = excluded.updated_at RETURNING ${COMMITTED} AS v`,
            [r.runId, r.now],
          )
        ).rows[0]!.v,
      );
      if (r.runBudget !== null && run + usd > nanoDown(r.runBudget))
        return { ok: false, scope: 'run', committedUsd: usdOf(run), othersOutUsd: 0 };
      if (r.totalBudget !== null) {
        const total = Number((await db.query<{ v: string }>(`SELECT coalesce(sum(${COMMITTED}), 0) AS v FROM spend`)).rows[0]!.v);
        if (total + usd > nanoDown(r.totalBudget)) {
          const others = await db.query<{ v: string }>(
            `SELECT coalesce(sum(s.reserved_nanousd), 0) AS v FROM spend s JOIN runs r ON r.id = s.run_id
            WHERE s.run_id <> $1 AND r.ended_at IS NULL AND r.heartbeat_at > $2`,
            [r.runId, r.now - LIVE_RUN_MS],
          );
          return { ok: false, scope: 'total', committedUsd: usdOf(total), othersOutUsd: usdOf(Number(others.rows[0]!.v)) };
        }
      }
      await db.query('UPDATE spend SET reserved_nanousd = reserved_nanousd + $1, in_flight = in_flight + $2 WHERE run_id = $3', [
        usd,
        heldTries(usd),
        r.runId,
      ]);
      return { ok: true };
    });
  }

  async unreserve(runId: string, usd: number, now: number): Promise<void> {
    const nano = nanoUp(usd);
    await query(
      this.#pool,
      `UPDATE spend SET reserved_nanousd = greatest(reserved_nanousd - $1, 0), in_flight = greatest(in_flight - $2, 0),
      updated_at = $3 WHERE run_id = $4`,
      [nano, heldTries(nano), now, runId],
    );
  }

  async committed(runId: string): Promise<Committed> {
    const r = (
      await query<{ run: string | null; total: string | null }>(
        this.#pool,
        `SELECT
        sum(${COMMITTED}) FILTER (WHERE run_id = $1) AS run, sum(${COMMITTED}) AS total FROM spend`,
        [runId],
      )
    ).rows[0]!;
    return { run: usdOf(r.run ?? 0), total: usdOf(r.total ?? 0) };
  }
}
