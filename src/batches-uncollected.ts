import { MOCK_BASE_URL } from './mock-base-url.js';
import { count } from './report/format.js';
import type { BatchRow } from './store/batches.js';

// Which batches out wait for a run --via batch: what `llmq run`'s summary, `status` and the
// dashboard count alike. A leaf: the scheduler and the reports both read it.

/** Not ended: recorded and not yet collected (`preparing`), or at the provider (`submitted`). */
export function isOpen(b: Pick<BatchRow, 'state'>): boolean {
  return b.state === 'preparing' || b.state === 'submitted';
}

/**
 * Whether the jobs of an open submission whose run stopped wait for a run --via batch to collect
 * them. Not one never uploaded, nor one to the offline mock: any run's reclaim hands those back
 * (`unsentOfStoppedRunWhere`).
 */
export function waitsForCollection(b: Pick<BatchRow, 'state' | 'inputFileId' | 'baseUrl'>): boolean {
  return isOpen(b) && !(b.state === 'preparing' && b.inputFileId === null) && b.baseUrl !== MOCK_BASE_URL;
}

/** The jobs of the `rows` whose run is gone (`ownerGone`) that wait for collection, by the endpoint they were sent to. */
export function uncollectedByEndpoint<R extends Pick<BatchRow, 'state' | 'inputFileId' | 'baseUrl' | 'jobs'>>(
  rows: readonly R[],
  ownerGone: (b: R) => boolean,
): Array<{ baseUrl: string; jobs: number }> {
  const jobs = new Map<string, number>();
  for (const b of rows) if (waitsForCollection(b) && ownerGone(b)) jobs.set(b.baseUrl, (jobs.get(b.baseUrl) ?? 0) + b.jobs);
  return [...jobs].map(([baseUrl, n]) => ({ baseUrl, jobs: n }));
}

/**
 * Whether a live run collects the batches sent to `baseUrl` on its next pass: a batch run (or
 * `--via auto`, should it ever record itself so) to that endpoint, or one of a version that did not
 * record its endpoint. A run sending elsewhere leaves them be. `live`: the runs working the queue,
 * as their options say their lane and endpoint.
 */
export function collectedByLiveRun(baseUrl: string, live: ReadonlyArray<{ readonly via: unknown; readonly baseUrl: unknown }>): boolean {
  return live.some(
    (run) => (run.via === 'batch' || run.via === 'auto') && (run.baseUrl === null || run.baseUrl === undefined || run.baseUrl === baseUrl),
  );
}

/** How `status` and `llmq batches` head the command that collects an endpoint's batches no run is collecting. */
export function uncollectedLabel(jobs: number): string {
  return `to collect the ${count(jobs, 'job')} in batches no run is collecting:`;
}
