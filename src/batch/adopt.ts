import { goneOwners, isProcessAlive, isRunProcessStopped } from '../run-owners.js';
import { STOPPED_BEFORE_CREATED, type BatchRow } from '../store/batches.js';
import type { RunRow } from '../store/types.js';
import type { BatchContext } from './context.js';
import { sentWithAnotherKey } from './api-key-id.js';
import { findBySubmission } from './submit.js';

export interface Liveness {
  readonly host: string;
  readonly pid: number;
  readonly isAlive?: (pid: number) => boolean;
  /** Whether a run's process here is stopped (Ctrl-Z): its online jobs stay its own. @default isRunProcessStopped */
  readonly isStopped?: (pid: number, runStartedAt: number) => boolean;
  /** A run quiet this long is dead wherever it runs. */
  readonly leaseMs: number;
  /** A run on this host whose process is gone is dead once quiet this long. */
  readonly quietMs: number;
}

/**
 * Record the runs found dead here as died (endDeadRuns), then take over the submissions of runs that
 * ended, so their batches are polled and collected
 * (never submitted again). A submission recorded but not known to be created is looked up at the
 * provider by its metadata: adopted if it exists, its jobs handed back if not; unless it was sent
 * with another API key, whose project this run's key may not see: then it is returned in `otherKey`
 * and left as it is, its jobs held.
 *
 * Only submissions made to this run's endpoint: another endpoint would not know the batch (404) and
 * its jobs would be sent again while it still runs, and is billed, where it was sent. Those are left
 * alone, their jobs held, and returned so the run can say where to collect them.
 */
export async function adoptOrphans(ctx: BatchContext, live: Liveness): Promise<{ elsewhere: BatchRow[]; otherKey: BatchRow[] }> {
  await endDeadRuns(ctx, live);
  const { orphaned, elsewhere } = await othersSubmissions(ctx, live);
  const otherKey: BatchRow[] = [];
  const now = ctx.now();
  for (const row of orphaned) {
    if (!(await ctx.store.batches.adopt(row.id, row.runId, ctx.runId, now))) continue;
    if (row.state === 'submitted') {
      ctx.emit({ type: 'adopted', id: row.id, providerBatchId: row.providerBatchId, from: row.runId });
      continue;
    }
    // No file uploaded, no batch possible: nothing to look for.
    const found = row.inputFileId === null ? null : await findBySubmission(ctx, row.id, row.createdAt);
    if (!found && row.inputFileId !== null && sentWithAnotherKey(row.apiKey, ctx.apiKey)) {
      // another key lists only its own project's batches: this one may exist there, and run
      otherKey.push(row);
    } else if (found) {
      await ctx.store.batches.submitted(row.id, found.id, found.status, ctx.now());
      ctx.emit({ type: 'adopted', id: row.id, providerBatchId: found.id, from: row.runId });
    } else {
      const reason = STOPPED_BEFORE_CREATED;
      const requeued = await ctx.store.batches.end(row.id, {
        state: 'abandoned',
        providerStatus: null,
        done: 0,
        failed: 0,
        error: reason,
        now: ctx.now(),
        refund: true,
      });
      ctx.emit({ type: 'abandoned', id: row.id, requeued, reason });
    }
  }
  return { elsewhere, otherKey };
}

/**
 * Record the runs on this host whose process is gone as died, as an online run does when it
 * reclaims (store.reclaim): their reserved money is settled, their unsent submissions and those to
 * the offline mock (whose Batch API died with the process) are abandoned and their jobs handed back.
 * Without it a batch run killed outright stayed "running" (silent) in `status` for good.
 */
async function endDeadRuns(ctx: BatchContext, live: Liveness): Promise<void> {
  const now = ctx.now();
  const { dead, suspended } = goneOwners(await ctx.store.activeRuns(), ownersView(ctx, live, now));
  if (dead.length === 0) return;
  // the expired leases it takes back with theirs spare a stopped run's (Ctrl-Z): answered to it when continued
  const requeued = await ctx.store.reclaim(
    now,
    dead,
    suspended.map((r) => r.id),
  );
  ctx.emit({ type: 'dead-runs', runIds: dead, requeued });
}

/**
 * Whether some other run's submissions are ours to adopt now or shortly (its process on this host
 * is gone, its heartbeat not yet stale): worth waiting for before calling the queue drained.
 */
export async function orphansSoon(ctx: BatchContext, live: Liveness): Promise<{ soon: boolean; dying: readonly RunRow[] }> {
  const { orphaned, dying } = await othersSubmissions(ctx, live);
  return { soon: orphaned.length > 0 || dying.length > 0, dying };
}

/**
 * Other runs' open submissions whose run ended (or went silent past its lease, wherever it ran):
 * those made to this run's endpoint, and those made elsewhere; and the runs dying or dead here, not
 * yet recorded, that hold submissions to this endpoint.
 */
async function othersSubmissions(
  ctx: BatchContext,
  live: Liveness,
): Promise<{ orphaned: BatchRow[]; elsewhere: BatchRow[]; dying: RunRow[] }> {
  const open = (await ctx.store.batches.open()).filter((b) => b.runId !== ctx.runId);
  if (open.length === 0) return { orphaned: [], elsewhere: [], dying: [] };
  const runs = await ctx.store.activeRuns();
  const now = ctx.now();
  const self = ownersView(ctx, live, now);
  // Dead but not yet recorded (found dead since endDeadRuns looked): taken over on the next pass,
  // once ended, and waited for till then. Taken over now, the run could end with it never recorded.
  const { dead, dying } = goneOwners(runs, self);
  const soon = new Set([...dead, ...dying]);
  const active = new Map(runs.map((r) => [r.id, r]));
  const ended = open.filter((b) => {
    const run = active.get(b.runId);
    return !run || now - run.heartbeatAt > live.leaseMs;
  });
  const here = (b: BatchRow) => b.baseUrl === ctx.baseUrl;
  return {
    orphaned: ended.filter(here),
    elsewhere: ended.filter((b) => !here(b)),
    dying: runs.filter((r) => soon.has(r.id) && open.some((b) => here(b) && b.runId === r.id)),
  };
}

/** This run as `goneOwners` judges other runs from it, at `now`. */
function ownersView(ctx: BatchContext, live: Liveness, now: number) {
  return {
    host: live.host,
    pid: live.pid,
    runId: ctx.runId,
    isAlive: live.isAlive ?? isProcessAlive,
    isStopped: live.isStopped ?? isRunProcessStopped,
    now,
    quietMs: live.quietMs,
  };
}
