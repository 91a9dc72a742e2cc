import { ATTEMPT_COLUMNS, attemptValues } from '../rows.js';
import type { AttemptRecord } from '../types.js';
import type { Db } from './open.js';
import { DROPPED } from '../tally.js';

/**
 * The SQLite store's attempt rows since migration 9 (attempts_by_job_seq, migrations.ts): each
 * carries its job's seq, found from the key in the insert itself. Values: insertAttemptValues.
 */
export const INSERT_ATTEMPT_SQL = `INSERT INTO attempts (${ATTEMPT_COLUMNS}, job_seq)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, (SELECT seq FROM jobs WHERE key = ?))`;

/** INSERT_ATTEMPT_SQL with the job's seq known (an answer's UPDATE returned it): no lookup of the key. */
export const INSERT_ATTEMPT_OF_SEQ_SQL = `INSERT INTO attempts (${ATTEMPT_COLUMNS}, job_seq)
  VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`;

/** The values of INSERT_ATTEMPT_SQL for one try. */
export function insertAttemptValues(a: AttemptRecord, latencyMs: number) {
  return [...attemptValues(a, latencyMs, Number), a.key];
}

/**
 * The attempts of job `job` (as `a`), through either index of migration 9: a job tried before and
 * after the upgrade has attempts in both.
 */
export function attemptsOf(job: string): string {
  return `(a.job_seq = ${job}.seq OR (a.job_seq IS NULL AND a.job_key = ${job}.key))`;
}

/** The attempts of job `j` (attemptsOf). */
export const ATTEMPTS_OF_JOB = attemptsOf('j');

/**
 * Every attempt of a job being dropped, ATTEMPTS_OF_JOB with the job's values: its seq
 * (`RETURNING seq` of the job's DELETE) and its key.
 */
export const DROP_ATTEMPTS_SQL = 'DELETE FROM attempts WHERE job_seq = ? OR (job_seq IS NULL AND job_key = ?)';

/**
 * Drops the jobs handed back or failed that no item needs any more (the document changed while
 * they ran), with their attempts, never to be sent (a failed one kept would be sent again by
 * retry-failed): the rule enqueue applies to the old job of a changed document. What a dropped
 * job's billed tries cost goes to `costTo`, the job its item moved to, when given, and else to the
 * queue's dropped cost (`DROPPED`): dropped with the job, that money left status's cost while the
 * runs' spend kept it. Runs in the caller's transaction; returns how many it dropped.
 */
export function orphanDropper(db: Db): (keys: readonly string[], costTo?: string) => number {
  const dropJob = db.prepare(`DELETE FROM jobs WHERE key = ? AND state IN ('pending', 'failed')
      AND NOT EXISTS (SELECT 1 FROM items WHERE job_key = jobs.key) RETURNING seq, model, cost_usd AS cost`);
  const dropAttempts = db.prepare(DROP_ATTEMPTS_SQL);
  const addCost = db.prepare('UPDATE jobs SET cost_usd = coalesce(cost_usd, 0) + ? WHERE key = ?');
  // with no job to take it (`forget`, a failed job no item needs), the queue keeps it apart (tally.ts's DROPPED)
  const keepCost = db.prepare(`INSERT INTO job_counts (model, state, jobs, cost_usd) VALUES (?, '${DROPPED}', 1, ?)
      ON CONFLICT (model, state) DO UPDATE SET jobs = jobs + 1, cost_usd = cost_usd + excluded.cost_usd`);
  return (keys, costTo) => {
    let dropped = 0;
    for (const key of keys) {
      const job = dropJob.get(key) as { seq: number; model: string; cost: number | null } | undefined;
      if (job === undefined) continue;
      dropAttempts.run(job.seq, key);
      if (job.cost && !(costTo !== undefined && addCost.run(job.cost, costTo).changes === 1)) keepCost.run(job.model, job.cost);
      dropped++;
    }
    return dropped;
  };
}
