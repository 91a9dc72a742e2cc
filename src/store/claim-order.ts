import type { JobToRun } from './estimate-types.js';

/** Rows of `jobs` as the estimate reads them. */
export interface RawJobToRun {
  seq: number;
  key: string;
  model: string;
  request: string;
  priority: number;
  attempts: number;
  /** Set on the jobs the offline mock answered, which a run of a real provider takes back and sends. */
  mocked?: number | boolean;
}

/** Pages of pending jobs are read this many at a time. */
export const JOBS_PAGE = 1000;

/**
 * The jobs a run would take, in the order it takes them (priority, then FIFO): pending ones, a page
 * at a time, merged with the few others it takes back first and then claims like pending ones
 * (running ones whose lease expired; the mock's answers, for a run of a real provider).
 */
export async function* inClaimOrder(
  expired: readonly RawJobToRun[],
  pending: (after: { priority: number; seq: number } | null) => Promise<RawJobToRun[]>,
): AsyncIterable<JobToRun> {
  const before = (a: RawJobToRun, b: RawJobToRun) => a.priority < b.priority || (a.priority === b.priority && a.seq < b.seq);
  const waiting = [...expired].sort((a, b) => a.priority - b.priority || a.seq - b.seq);
  let after: { priority: number; seq: number } | null = null;
  for (;;) {
    const page = await pending(after);
    for (const row of page) {
      while (waiting.length && before(waiting[0]!, row)) yield toJobToRun(waiting.shift()!);
      yield toJobToRun(row);
    }
    if (page.length < JOBS_PAGE) break;
    const last = page[page.length - 1]!;
    after = { priority: last.priority, seq: last.seq };
  }
  for (const row of waiting) yield toJobToRun(row);
}

function toJobToRun(r: RawJobToRun): JobToRun {
  const job = { key: r.key, model: r.model, request: r.request, priority: Number(r.priority), attempts: Number(r.attempts) };
  return r.mocked ? { ...job, mockAnswered: true } : job;
}
