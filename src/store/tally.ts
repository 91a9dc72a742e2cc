import { JOB_STATES, type JobState, type StatusSnapshot } from './types.js';

/** One row of `SELECT model, state, count(*), sum(prompt_tokens), sum(completion_tokens) ... GROUP BY model, state`. */
export interface StateTokensRow {
  readonly model: string;
  readonly state: JobState;
  readonly n: number;
  readonly p: number;
  readonly c: number;
}

/** Counts by state, total, tokens and the per-model figures of `status`, from the grouped rows. */
export function tallyJobs(rows: readonly StateTokensRow[]): Pick<StatusSnapshot, 'counts' | 'total' | 'tokens' | 'byModel'> {
  const counts = Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number>;
  const models = new Map<string, { model: string; jobs: number; done: number; prompt: number; completion: number }>();
  let prompt = 0, completion = 0;
  for (const r of rows) {
    counts[r.state] += r.n;
    prompt += r.p;
    completion += r.c;
    const m = models.get(r.model) ?? { model: r.model, jobs: 0, done: 0, prompt: 0, completion: 0 };
    m.jobs += r.n;
    if (r.state === 'done') m.done += r.n;
    m.prompt += r.p;
    m.completion += r.c;
    models.set(r.model, m);
  }
  const total = JOB_STATES.reduce((a, s) => a + counts[s], 0);
  return { counts, total, tokens: { prompt, completion }, byModel: [...models.values()] };
}
