import type { RunRow } from './types.js';

/**
 * The offline mock provider's answers are stand-ins, for trying llmq: a run of a real provider
 * takes them back (`JobQueue.takeBackMockAnswers`) and sends those jobs, rather than leaving fake
 * answers marked done for good in a real queue. A mock run is known by its options (`provider`).
 * One that ended is marked in them once its answers are taken back, so it is not looked at again;
 * one gone quiet without ending (killed) is looked at until a reclaim ends it. A job a real run
 * answered is never taken back (`takeBackWhere`).
 */

/** The key set in a mock run's options once its answers were taken back (ms epoch). */
export const TAKEN_BACK = 'mockAnswersTakenBack';

/**
 * A done job's columns as a fresh pending job has them: no answer, no attempts, runnable now; the
 * value of `updated_at` is the caller's. Its cost keeps what was billed: the job's cost less what the
 * mock runs' tries of it added (their money was pretend), so that real runs' answers it did not keep,
 * and the cost carried to it from a request its item moved from (a job dropped unanswered, which has
 * no attempt rows here), stay. Set NULL, status, show and export lost them while the runs' spend kept
 * them. A cost an unpriced answer made NULL keeps what real runs' rejected answers cost.
 */
export function asPending(d: Dialect): string {
  const left = `cost_usd - coalesce(${billedUsd(d, 'mock')}, 0)`;
  // below a nano-dollar: the sums' rounding, no money
  const cost = `CASE WHEN cost_usd IS NULL THEN ${billedUsd(d, 'real')} WHEN ${left} >= 1e-9 THEN ${left} END`;
  return `state = 'pending', attempts = 0, run_after = 0, output = NULL, response = NULL, prompt_tokens = NULL,
  completion_tokens = NULL, cost_usd = ${cost}, latency_ms = NULL, error = NULL, finished_at = NULL, lease_owner = NULL,
  lease_expires_at = NULL`;
}

/**
 * SQL, what a job's (`jobs`) answered tries added to its cost, summed (NULL when none): the tries
 * `billedAnswerUsd` adds (an answer came, priced above 0, not one that may be billed) and its answer,
 * of the mock runs (`mock`) or of the others (`real`). A job taken back was answered by mock runs
 * only, so every real answered try of it was one it did not keep.
 */
function billedUsd(d: Dialect, by: 'mock' | 'real'): string {
  const notBilledMaybe = d === 'sqlite' ? 'a.may_be_billed = 0' : 'NOT a.may_be_billed';
  const allMock = `(SELECT id FROM runs WHERE ${mockRunWhere(d)})`;
  return `(SELECT sum(a.cost_usd) FROM attempts a WHERE ${DIALECT[d].ofJob} AND a.prompt_tokens IS NOT NULL
    AND ${notBilledMaybe} AND a.cost_usd > 0 AND ${by === 'mock' ? '' : 'NOT '}${byRuns(allMock, 'a.')})`;
}

/** SQL, a condition on an attempt row (`a`, or the bare table): made by one of the runs `runs` (an SQL set of run ids), online or through their batches. */
function byRuns(runs: string, a = ''): string {
  return `(${a}run_id IN ${runs} OR ${a}run_id IN (SELECT 'batch:' || b.id FROM batches b WHERE b.run_id IN ${runs}))`;
}

/** The jobs whose answer came from one of the runs `runs` (an SQL set of run ids), online or through their batches. */
export function answeredBy(runs: string): string {
  return `SELECT job_key FROM attempts WHERE outcome = 'done' AND ${byRuns(runs)}`;
}

/**
 * SQL, a condition on a job: no mock run answered it (online or through its batches); `ofJob` finds
 * the job's attempt rows `a`. What `llmq estimate` learns answers' lengths and latencies from: the
 * mock's are stand-ins, and timed a real run at the mock's latency ("answers took 166 ms ... under a
 * second"). A probe of the job's own attempts (their index), not a scan of every attempt.
 */
export function notAnsweredByMock(d: Dialect, ofJob: string): string {
  return `NOT EXISTS (SELECT 1 FROM attempts a WHERE ${ofJob} AND a.outcome = 'done'
    AND ${byRuns(`(SELECT id FROM runs WHERE ${mockRunWhere(d)})`, 'a.')})`;
}

/**
 * SQL, one row when some mock run's answers may still stand (not taken back by a real run yet):
 * only then does `answered` pay for `notAnsweredByMock`'s probe per job.
 */
export function mockAnswersMayStand(d: Dialect): string {
  return `SELECT 1 FROM runs WHERE ${mockRunWhere(d)} AND ${DIALECT[d].option(TAKEN_BACK)} IS NULL LIMIT 1`;
}

/** What the two stores write differently: reading a run's options (JSON text), and finding a job's attempt rows. */
const DIALECT = {
  sqlite: {
    option: (key: string) => `json_extract(options, '$.${key}')`,
    // by the job's seq (attempts_by_job), or the key for rows from before schema 9 (attempts_by_key)
    ofJob: '(a.job_seq = jobs.seq OR (a.job_seq IS NULL AND a.job_key = jobs.key))',
  },
  postgres: {
    option: (key: string) => `(options::jsonb ->> '${key}')`,
    ofJob: 'a.job_key = jobs.key',
  },
} as const;
export type Dialect = keyof typeof DIALECT;

/**
 * SQL, a condition on `runs`: a mock run; with `toTakeBack`, one whose answers are yet to be taken
 * back: not marked, and ended or quiet since `toTakeBack.quietSince` (an SQL value).
 */
export function mockRunWhere(d: Dialect, toTakeBack?: { readonly quietSince: string }): string {
  const { option } = DIALECT[d];
  const mock = `${option('provider')} = 'mock'`;
  if (!toTakeBack) return mock;
  return `${mock} AND ${option(TAKEN_BACK)} IS NULL AND (ended_at IS NOT NULL OR heartbeat_at < ${toTakeBack.quietSince})`;
}

/** A run of the offline mock whose answers are still in the queue (no real run has taken them back). */
export function mockAnswersKept(run: Pick<RunRow, 'options'>): boolean {
  return run.options.provider === 'mock' && run.options[TAKEN_BACK] === undefined;
}

/** Among `runs`, a mock run's answers stand (kept, not taken back); one that answered nothing, as its last figures say, is none. */
export function mockAnswersStandAmong(runs: ReadonlyArray<Pick<RunRow, 'options' | 'stats'>>): boolean {
  return runs.some((r) => mockAnswersKept(r) && (r.stats?.done ?? 1) > 0);
}

/**
 * `mockRunWhere(d, { quietSince })` of one run read already: a mock run whose answers, and money,
 * the next run of a real provider takes back. What a dry run of that real run leaves out of
 * --budget-total, as the run itself will.
 */
export function mockRunToTakeBack(run: Pick<RunRow, 'options' | 'endedAt' | 'heartbeatAt'>, quietSince: number): boolean {
  return mockAnswersKept(run) && (run.endedAt !== null || run.heartbeatAt < quietSince);
}

/**
 * Of the jobs `answeredBy` the runs `runs` (an SQL set of run ids), those to take back: done,
 * needed by an item still (a job no item points at any more is not worth paying for), and answered
 * by no run but mock ones. A real answer may have come too (a mock run paused past its lease, its
 * late answer recorded after a real run's): then the job is the real provider's, paid for, and
 * never sent again.
 */
export function takeBackWhere(d: Dialect, runs: string): string {
  return `${onlyMockAnswered(d, runs)} AND EXISTS (SELECT 1 FROM items WHERE items.job_key = jobs.key)`;
}

/**
 * Of the jobs `answeredBy` the runs `runs`, those no item needs (their document changed, or was
 * forgotten): dropped when the others are taken back. Kept, a stand-in would stand for good: an
 * enqueue pointing an item at it again later found it done, and exported the mock's answer as the
 * document's.
 */
export function dropMockAnsweredWhere(d: Dialect, runs: string): string {
  return `${onlyMockAnswered(d, runs)} AND NOT EXISTS (SELECT 1 FROM items WHERE items.job_key = jobs.key)`;
}

/** Done jobs answered by the runs `runs` and by no run but mock ones. */
function onlyMockAnswered(d: Dialect, runs: string): string {
  const allMock = `(SELECT id FROM runs WHERE ${mockRunWhere(d)})`;
  return `state = 'done' AND key IN (${answeredBy(runs)})
    AND NOT EXISTS (SELECT 1 FROM attempts a WHERE ${DIALECT[d].ofJob} AND a.outcome = 'done' AND a.run_id NOT IN ${allMock}
      AND a.run_id NOT IN (SELECT 'batch:' || b.id FROM batches b WHERE b.run_id IN ${allMock}))`;
}

/** A mock run's money was pretend: once its answers are taken back, none of it counts (--budget-total). */
export const NO_MONEY = `reserved_nanousd = 0, in_flight = 0, spent_nanousd = 0, unknown_nanousd = 0, unknown_tries = 0,
  unpriced_tries = 0`;

/**
 * The jobs `takeBackMockAnswers(now, quietSince)` would take back, for `jobsToRun` (estimate, dry
 * run): the same choice, `quietSince` an SQL value.
 */
export function mockAnswersToRun(d: Dialect, quietSince: string): string {
  return takeBackWhere(d, `(SELECT id FROM runs WHERE ${mockRunWhere(d, { quietSince })})`);
}
