import { MOCK_BASE_URL } from '../mock-base-url.js';
import { isOpen, uncollectedByEndpoint } from '../batches-uncollected.js';
import { batchOwnerGone } from '../run-owners.js';
import type { BatchRow, BatchStore } from '../store/batches.js';
import type { RunRow } from '../store/types.js';
import { count, duration, int, NO_PAINT, type Paint } from './format.js';

/** What `status` shows of the batch lane: every live submission, then the last few that ended. */
export interface BatchesReport {
  readonly live: number;
  readonly rows: ReadonlyArray<BatchRow & { readonly ageSeconds: number; readonly runDied: boolean; readonly runEnded: boolean }>;
  /**
   * The live submissions that wait for a run --via batch (their run died, ended: --no-wait, stopped,
   * recorded as died by a later run; or went silent past the takeover), by endpoint: a run --via
   * batch to that endpoint collects them.
   */
  readonly uncollected: ReadonlyArray<{ readonly baseUrl: string; readonly jobs: number }>;
}

/** The runs a batch's `runId` is looked up in: those not ended (`activeRuns`), and of them those known dead here. */
export interface BatchOwners {
  readonly active: ReadonlyArray<Pick<RunRow, 'id' | 'heartbeatAt'>>;
  readonly dead: ReadonlySet<string>;
}

/**
 * `owners.dead`: the runs known dead here (`deadRunsHere`). A live submission of one is marked
 * `runDied`; one of a run that ended, or went silent past the takeover (`batchOwnerGone`),
 * `runEnded`: the next batch run takes it over. One to the offline mock whose run stopped is not
 * live at all (its Batch API lived in the dead process), and is not counted as live.
 */
export function buildBatchesReport(rows: readonly BatchRow[], now: number, owners: BatchOwners, endedShown = 5): BatchesReport {
  const live = rows.filter(isOpen).map((r) => {
    const runDied = owners.dead.has(r.runId);
    return { ...r, runDied, runEnded: !runDied && batchOwnerGone(r.runId, owners.active, now) };
  });
  const ended = rows
    .filter((r) => r.state === 'ended' || (r.state === 'abandoned' && r.jobs > 0))
    .slice(0, endedShown)
    .map((r) => ({ ...r, runDied: false, runEnded: false }));
  return {
    live: live.filter((r) => !goneWithRun(r)).length,
    rows: [...live, ...ended].map((r) => ({ ...r, ageSeconds: Math.max(0, (now - r.createdAt) / 1000) })),
    uncollected: uncollectedByEndpoint(live, (r) => r.runDied || r.runEnded),
  };
}

/**
 * The rows a report is built from: every live submission (a 10-million-job queue has 200 of 50,000
 * out at once), newest first, then the newest that ended.
 */
export async function readBatchRows(batches: Pick<BatchStore, 'open' | 'recent'>): Promise<BatchRow[]> {
  const [open, recent] = await Promise.all([batches.open(), batches.recent(50)]);
  const live = new Set(open.map((b) => b.id));
  return [...open.reverse(), ...recent.filter((b) => !live.has(b.id))];
}

/** Empty when the batch lane was never used. `liveShown`: live rows listed before the rest are counted on one line. */
export function renderBatches(r: BatchesReport, p: Paint = NO_PAINT, liveShown = Number.POSITIVE_INFINITY): string {
  if (r.rows.length === 0) return '';
  const line = (b: ReportRow) => {
    const id = b.providerBatchId ?? `(${b.id.slice(0, 8)}, not created yet)`;
    return `  ${id}  ${stateOf(b)}  ${count(b.jobs, 'job')}${countsOf(b)}  ${p.dim(`age ${duration(b.ageSeconds)}`)}`;
  };
  const open = r.rows.filter(isOpen);
  const lines = [p.bold(`batches   ${r.live} live`), ...open.slice(0, liveShown).map(line)];
  const rest = open.slice(liveShown);
  if (rest.length) {
    // mock batches gone with their run are not live: counted apart, as the header leaves them out
    const restLive = rest.filter(isLive).length;
    const gone = rest.length - restLive;
    const what = [restLive ? `${int(restLive)} more live` : '', gone ? `${int(gone)} more gone with their run (mock)` : '']
      .filter(Boolean)
      .join(', ');
    lines.push(p.dim(`  and ${what}: llmq batches lists them all`));
  }
  lines.push(...r.rows.filter((b) => !isOpen(b)).map(line));
  return '\n' + lines.join('\n') + '\n';
}

type ReportRow = BatchesReport['rows'][number];

/** Live: to be collected (not ended, nor a mock batch gone with its dead run). */
export function isLive(b: ReportRow): boolean {
  return isOpen(b) && !goneWithRun(b);
}

/** A live submission to the offline mock whose run stopped: its Batch API went with the process. */
function goneWithRun(b: Pick<ReportRow, 'runDied' | 'runEnded' | 'baseUrl'>): boolean {
  return (b.runDied || b.runEnded) && b.baseUrl === MOCK_BASE_URL;
}

function stateOf(b: ReportRow): string {
  // abandoned: never created, or a mock batch that ended with the process it lived in
  if (b.state !== 'abandoned' && !goneWithRun(b)) return b.providerStatus ?? b.state;
  return b.providerBatchId ? 'gone with its process (mock)' : 'not sent';
}

function countsOf(b: ReportRow): string {
  if (goneWithRun(b)) return ` · its run ${b.runDied ? 'died' : 'stopped'}: the next run sends them again`;
  const died = b.runDied
    ? ' · its run died: the next llmq run --via batch takes it over'
    : b.runEnded
      ? ' · no run is collecting it: the next llmq run --via batch takes it over'
      : '';
  if (b.state === 'ended') return ` · ${int(b.done)} done · ${int(b.failed)} failed · ${int(b.requeued)} back to pending`;
  if (b.state === 'abandoned') return ` · ${int(b.requeued)} back to pending`;
  if (b.state === 'submitted' && b.progress) {
    const failed = b.progress.failed ? ` · ${int(b.progress.failed)} failed` : '';
    // no run polls it: its counts are the last poll's
    const when = b.runDied || b.runEnded ? 'when last polled' : 'so far';
    return ` · ${int(b.progress.completed)} answered${failed} ${when}${died}`;
  }
  return died;
}
