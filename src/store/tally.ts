import { JOB_STATES, type JobState, type ModelTally, type StatusSnapshot } from './types.js';

/**
 * One row of COUNTS_COLUMNS: a (model, state) of the maintained `job_counts` with its jobs, tokens,
 * stored cost, tokens stored without a cost, and jobs already tried.
 */
export interface StateTokensRow {
  readonly model: string;
  /** A job state, or `dropped`: what the billed tries of jobs dropped unanswered cost (`DROPPED`). */
  readonly state: JobState | typeof DROPPED;
  readonly n: number;
  readonly p: number;
  readonly c: number;
  readonly usd: number | null;
  readonly up: number | null;
  readonly uc: number | null;
  readonly r: number;
}

/**
 * The `job_counts` group of jobs dropped unanswered (`forget`, or failed with no item needing them)
 * whose tries were billed (answers rejected, or cut off): `jobs` of them, and what those tries cost,
 * kept in the queue's cost as it was before they went. An enqueue that moves a job's document gives
 * that cost to its new job instead.
 */
export const DROPPED = 'dropped';

/**
 * The grouped columns both stores select from `job_counts` (`FROM job_counts GROUP BY model, state`):
 * SQLite keeps one row per group, PostgreSQL may hold several not yet folded together (see its migration).
 */
export const COUNTS_COLUMNS = `model, state, sum(jobs) AS n, sum(prompt_tokens) AS p, sum(completion_tokens) AS c, sum(cost_usd) AS usd,
  sum(unpriced_prompt) AS up, sum(unpriced_completion) AS uc, sum(retried) AS r`;

function emptyModel(model: string): { -readonly [K in keyof ModelTally]: ModelTally[K] } {
  return {
    model,
    jobs: 0,
    done: 0,
    pending: 0,
    running: 0,
    prompt: 0,
    completion: 0,
    donePrompt: 0,
    doneCompletion: 0,
    storedUsd: 0,
    unpricedPrompt: 0,
    unpricedCompletion: 0,
    dropped: 0,
  };
}

/** The jobs of each state from rows of `SELECT state, sum(jobs) AS n FROM job_counts GROUP BY state` (either store). */
export function stateCountsOf(rows: ReadonlyArray<{ state: JobState | typeof DROPPED; n: number | string }>): Record<JobState, number> {
  const counts = Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
  for (const r of rows) if (r.state !== DROPPED) counts[r.state] += Number(r.n);
  return counts;
}

/** The SQL of `stateCountsOf`'s rows: the maintained counts, folded or not. */
export const STATE_COUNTS_SQL = 'SELECT state, sum(jobs) AS n FROM job_counts GROUP BY state';

/**
 * Counts by state, total, tokens, retrying and the per-model figures of `status`, from the grouped
 * rows. `orphanedAnswers`, answered jobs no item needs any more, leave `done` and `total`: those
 * count the jobs items need. Tokens, cost and the per-model figures keep them: they were paid for,
 * and each is an answer of its model all the same.
 */
export function tallyJobs(
  rows: readonly StateTokensRow[],
  orphanedAnswers: number,
): Pick<StatusSnapshot, 'counts' | 'total' | 'tokens' | 'byModel' | 'retrying' | 'orphanedAnswers'> {
  const counts = Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
  const models = new Map<string, { -readonly [K in keyof ModelTally]: ModelTally[K] }>();
  let prompt = 0,
    completion = 0,
    retrying = 0;
  for (const r of rows) {
    const n = Number(r.n),
      p = Number(r.p),
      c = Number(r.c);
    if (r.state === DROPPED) {
      // no job is left of them: only their cost, in their model's
      const m = models.get(r.model) ?? emptyModel(r.model);
      m.storedUsd += Number(r.usd ?? 0);
      m.dropped += n;
      models.set(r.model, m);
      continue;
    }
    // a group whose last job left it (kept by SQLite, not yet folded away by PostgreSQL)
    if (n === 0) continue;
    counts[r.state] += n;
    prompt += p;
    completion += c;
    if (r.state === 'pending') retrying += Number(r.r);
    const m = models.get(r.model) ?? emptyModel(r.model);
    m.jobs += n;
    if (r.state === 'done') {
      m.done += n;
      m.donePrompt += p;
      m.doneCompletion += c;
    }
    if (r.state === 'pending') m.pending += n;
    if (r.state === 'running') m.running += n;
    m.prompt += p;
    m.completion += c;
    m.storedUsd += Number(r.usd ?? 0);
    m.unpricedPrompt += Number(r.up ?? 0);
    m.unpricedCompletion += Number(r.uc ?? 0);
    models.set(r.model, m);
  }
  // Costs are floats added and taken away by the count triggers: a group whose priced jobs all left
  // can hold -1e-17 instead of 0 (shown as "$-1.0e-17"). No price has digits below a tenth of a
  // nano-dollar per token, so rounding there loses nothing.
  for (const m of models.values()) m.storedUsd = Math.round(m.storedUsd * 1e10) / 1e10 + 0;
  counts.done -= orphanedAnswers;
  const total = JOB_STATES.reduce((a, s) => a + counts[s], 0);
  return { counts, total, tokens: { prompt, completion }, byModel: [...models.values()], retrying, orphanedAnswers };
}
