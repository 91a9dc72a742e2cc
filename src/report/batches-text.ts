import { MOCK_BASE_URL } from '../mock-base-url.js';
import type { BatchRow } from '../store/batches.js';
import { count, duration, int, NO_PAINT, type Paint } from './format.js';

/** What `status` shows of the batch lane: every live submission, then the last few that ended. */
export interface BatchesReport {
  readonly live: number;
  readonly rows: ReadonlyArray<BatchRow & { readonly ageSeconds: number; readonly runDied: boolean }>;
}

/**
 * `deadRuns`: the runs known dead here (`deadRunsHere`). A live submission of one is marked
 * `runDied`: the next batch run takes it over; one to the offline mock is not live at all (its
 * Batch API lived in the dead process), and is not counted as live.
 */
export function buildBatchesReport(
  rows: readonly BatchRow[],
  now: number,
  deadRuns: ReadonlySet<string> = new Set(),
  endedShown = 5,
): BatchesReport {
  const live = rows
    .filter((r) => r.state === 'preparing' || r.state === 'submitted')
    .map((r) => ({ ...r, runDied: deadRuns.has(r.runId) }));
  const ended = rows
    .filter((r) => r.state === 'ended' || (r.state === 'abandoned' && r.jobs > 0))
    .slice(0, endedShown)
    .map((r) => ({ ...r, runDied: false }));
  return {
    live: live.filter((r) => !goneWithRun(r)).length,
    rows: [...live, ...ended].map((r) => ({ ...r, ageSeconds: Math.max(0, (now - r.createdAt) / 1000) })),
  };
}

/** Empty when the batch lane was never used. */
export function renderBatches(r: BatchesReport, p: Paint = NO_PAINT): string {
  if (r.rows.length === 0) return '';
  const lines = [p.bold(`batches   ${r.live} live`)];
  for (const b of r.rows) {
    const id = b.providerBatchId ?? `(${b.id.slice(0, 8)}, not created yet)`;
    lines.push(`  ${id}  ${stateOf(b)}  ${count(b.jobs, 'job')}${countsOf(b)}  ${p.dim(`age ${duration(b.ageSeconds)}`)}`);
  }
  return '\n' + lines.join('\n') + '\n';
}

type ReportRow = BatchesReport['rows'][number];

/** A live submission to the offline mock whose run died: its Batch API went with the process. */
function goneWithRun(b: Pick<ReportRow, 'runDied' | 'baseUrl'>): boolean {
  return b.runDied && b.baseUrl === MOCK_BASE_URL;
}

function stateOf(b: ReportRow): string {
  // abandoned: never created, or a mock batch that ended with the process it lived in
  if (b.state !== 'abandoned' && !goneWithRun(b)) return b.providerStatus ?? b.state;
  return b.providerBatchId ? 'gone with its process (mock)' : 'not sent';
}

function countsOf(b: ReportRow): string {
  if (goneWithRun(b)) return ' · its run died: the next run sends them again';
  const died = b.runDied ? ' · its run died: the next llmq run --via batch takes it over' : '';
  if (b.state === 'ended') return ` · ${int(b.done)} done · ${int(b.failed)} failed · ${int(b.requeued)} back to pending`;
  if (b.state === 'abandoned') return ` · ${int(b.requeued)} back to pending`;
  if (b.state === 'submitted' && b.progress) {
    const failed = b.progress.failed ? ` · ${int(b.progress.failed)} failed` : '';
    return ` · ${int(b.progress.completed)} answered${failed} so far${died}`;
  }
  return died;
}
