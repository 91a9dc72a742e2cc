import type { AttemptRecord } from '../../src/store/types.js';

/**
 * A try of job `key`, its `n`th, by run `runId`, from `startedAt` for `ms`: answered with a 200, or
 * anything else with a 503 (its error the status line).
 */
export function tryOf(
  key: string,
  n: number,
  ms: number,
  outcome: AttemptRecord['outcome'],
  o: { runId: string; startedAt: number },
): AttemptRecord {
  const done = outcome === 'done';
  return {
    key,
    runId: o.runId,
    attempt: n,
    startedAt: o.startedAt,
    endedAt: o.startedAt + ms,
    status: done ? 200 : 503,
    outcome,
    error: done ? null : '503 Service Unavailable',
    usage: null,
  };
}
