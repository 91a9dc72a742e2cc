import { JOB_STATES, type JobState, type ModelTally, type StatusSnapshot } from './types.js';

/**
 * One row of `SELECT model, state, count(*), sum(prompt_tokens), sum(completion_tokens), sum(cost_usd),
 * and the tokens of rows without a cost ... GROUP BY model, state` (TALLY_SQL).
 */
export interface StateTokensRow {
  readonly model: string;
  readonly state: JobState;
  readonly n: number;
  readonly p: number;
  readonly c: number;
  readonly usd: number | null;
  readonly up: number | null;
  readonly uc: number | null;
}

/** The grouped columns both stores select; each adds its own FROM and ordering. */
export const TALLY_COLUMNS = `model, state, count(*) AS n, coalesce(sum(prompt_tokens), 0) AS p, coalesce(sum(completion_tokens), 0) AS c,
  sum(cost_usd) AS usd, sum(CASE WHEN cost_usd IS NULL THEN prompt_tokens END) AS up,
  sum(CASE WHEN cost_usd IS NULL THEN completion_tokens END) AS uc`;

/** Counts by state, total, tokens and the per-model figures of `status`, from the grouped rows. */
export function tallyJobs(rows: readonly StateTokensRow[]): Pick<StatusSnapshot, 'counts' | 'total' | 'tokens' | 'byModel'> {
  const counts = Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
  const models = new Map<string, { -readonly [K in keyof ModelTally]: ModelTally[K] }>();
  let prompt = 0, completion = 0;
  for (const r of rows) {
    const n = Number(r.n), p = Number(r.p), c = Number(r.c);
    counts[r.state] += n;
    prompt += p;
    completion += c;
    const m = models.get(r.model) ?? {
      model: r.model, jobs: 0, done: 0, pending: 0, prompt: 0, completion: 0, storedUsd: 0, unpricedPrompt: 0, unpricedCompletion: 0,
    };
    m.jobs += n;
    if (r.state === 'done') m.done += n;
    if (r.state === 'pending') m.pending += n;
    m.prompt += p;
    m.completion += c;
    m.storedUsd += Number(r.usd ?? 0);
    m.unpricedPrompt += Number(r.up ?? 0);
    m.unpricedCompletion += Number(r.uc ?? 0);
    models.set(r.model, m);
  }
  const total = JOB_STATES.reduce((a, s) => a + counts[s], 0);
  return { counts, total, tokens: { prompt, completion }, byModel: [...models.values()] };
}
