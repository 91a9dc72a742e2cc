import type { Db } from './open.js';

/** What a job adds to its (model, state) row of `job_counts`, as the count triggers weigh it. */
export interface CountedJob {
  readonly model: string;
  readonly state: string;
  readonly attempts: number;
  readonly promptTokens: number | null;
  readonly completionTokens: number | null;
  readonly costUsd: number | null;
}

/** One row of `job_counts` changed by the moves of a transaction, in the table's column order after its key. */
type Delta = [
  jobs: number,
  retried: number,
  prompt: number,
  completion: number,
  usd: number,
  unpricedPrompt: number,
  unpricedCompletion: number,
];

/** Adds a row's deltas to what the table holds: the count triggers' upsert, with a sum for their one. */
const ADD_COUNTS_SQL = `INSERT INTO job_counts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
  ON CONFLICT (model, state) DO UPDATE SET jobs = jobs + excluded.jobs, retried = retried + excluded.retried,
    prompt_tokens = prompt_tokens + excluded.prompt_tokens, completion_tokens = completion_tokens + excluded.completion_tokens,
    cost_usd = cost_usd + excluded.cost_usd, unpriced_prompt = unpriced_prompt + excluded.unpriced_prompt,
    unpriced_completion = unpriced_completion + excluded.unpriced_completion`;

/**
 * The status counts one transaction's claims or answers move, summed per (model, state), so they are
 * written in one statement per row (`countsWriter`) instead of two per job by the count trigger
 * (migration 12, `counts_kept`). A statement whose moves are kept here must raise `counts_kept` in
 * exactly the rows it moves, so the trigger skips them; any other change is the trigger's to count.
 */
export class CountMoves {
  readonly #deltas = new Map<string, { model: string; state: string; d: Delta }>();

  /** A job leaves one (model, state) for another. */
  move(from: CountedJob, to: CountedJob): void {
    this.#weigh(from, -1);
    this.#weigh(to, 1);
  }

  rows(): IterableIterator<{ model: string; state: string; d: Delta }> {
    return this.#deltas.values();
  }

  #weigh(job: CountedJob, sign: 1 | -1): void {
    const id = `${job.model}\u0000${job.state}`;
    let row = this.#deltas.get(id);
    if (!row) {
      row = { model: job.model, state: job.state, d: [0, 0, 0, 0, 0, 0, 0] };
      this.#deltas.set(id, row);
    }
    const d = row.d;
    const prompt = job.promptTokens ?? 0;
    const completion = job.completionTokens ?? 0;
    d[0] += sign;
    if (job.attempts > 0) d[1] += sign;
    d[2] += sign * prompt;
    d[3] += sign * completion;
    if (job.costUsd === null) {
      d[5] += sign * prompt;
      d[6] += sign * completion;
    } else d[4] += sign * job.costUsd;
  }
}

/** Writes a transaction's moves into `job_counts`, in that transaction. */
export function countsWriter(db: Db): (moves: CountMoves) => void {
  const add = db.prepare(ADD_COUNTS_SQL);
  return (moves) => {
    for (const { model, state, d } of moves.rows()) add.run(model, state, ...d);
  };
}
