/**
 * The offline mock provider's answers are stand-ins, for trying llmq: a run of a real provider
 * takes them back (`JobQueue.takeBackMockAnswers`) and sends those jobs, rather than leaving fake
 * answers marked done for good in a real queue. A mock run is known by its options (`provider`),
 * and marked in them once its answers are taken back, so no later answer is ever taken twice.
 */

/** The key set in a mock run's options once its answers were taken back (ms epoch). */
export const TAKEN_BACK = 'mockAnswersTakenBack';

/**
 * A done job's columns as a fresh pending job has them: no answer, no attempts, runnable now; the
 * value of `updated_at` is the caller's.
 */
export const AS_PENDING = `state = 'pending', attempts = 0, run_after = 0, output = NULL, response = NULL, prompt_tokens = NULL,
  completion_tokens = NULL, cost_usd = NULL, latency_ms = NULL, error = NULL, finished_at = NULL, lease_owner = NULL,
  lease_expires_at = NULL`;

/** The jobs whose answer came from one of the runs `runs` (an SQL set of run ids), online or through their batches. */
export function answeredBy(runs: string): string {
  return `SELECT job_key FROM attempts WHERE outcome = 'done' AND (run_id IN ${runs}
    OR run_id IN (SELECT 'batch:' || b.id FROM batches b WHERE b.run_id IN ${runs}))`;
}
