import { deadOwners, dyingOwners, isProcessAlive } from '../scheduler/owners.js';
import type { BatchRow } from '../store/batches.js';
import type { BatchContext } from './context.js';
import { findBySubmission } from './submit.js';

export interface Liveness {
  readonly host: string;
  readonly pid: number;
  readonly isAlive?: (pid: number) => boolean;
  /** A run quiet this long is dead wherever it runs. */
  readonly leaseMs: number;
  /** A run on this host whose process is gone is dead once quiet this long. */
  readonly quietMs: number;
}

/**
 * Take over the submissions of runs that ended or died, so their batches are polled and collected
 * (never submitted again). A submission recorded but not known to be created is looked up at the
 * provider by its metadata: adopted if it exists, its jobs handed back if not.
 */
export async function adoptOrphans(ctx: BatchContext, live: Liveness): Promise<void> {
  const open = (await ctx.store.batches.open()).filter((b) => b.runId !== ctx.runId);
  if (open.length === 0) return;
  const runs = await ctx.store.activeRuns();
  const now = ctx.now();
  const dead = new Set(deadOwners(runs, { host: live.host, pid: live.pid, runId: ctx.runId, isAlive: live.isAlive ?? isProcessAlive, now, quietMs: live.quietMs }));
  const active = new Map(runs.map((r) => [r.id, r]));
  const orphaned = (b: BatchRow): boolean => {
    const run = active.get(b.runId);
    return !run || dead.has(run.id) || now - run.heartbeatAt > live.leaseMs;
  };
  for (const row of open) {
    if (!orphaned(row) || !(await ctx.store.batches.adopt(row.id, row.runId, ctx.runId, now))) continue;
    if (row.state === 'submitted') {
      ctx.emit({ type: 'adopted', id: row.id, providerBatchId: row.providerBatchId, from: row.runId });
      continue;
    }
    // No file uploaded, no batch possible: nothing to look for.
    const found = row.inputFileId === null ? null : await findBySubmission(ctx, row.id, row.createdAt);
    if (found) {
      await ctx.store.batches.submitted(row.id, found.id, found.status, ctx.now());
      ctx.emit({ type: 'adopted', id: row.id, providerBatchId: found.id, from: row.runId });
    } else {
      const reason = 'its run stopped before the batch was created';
      const requeued = await ctx.store.batches.end(row.id, { state: 'abandoned', providerStatus: null, done: 0, failed: 0, error: reason, now: ctx.now(), refund: true });
      ctx.emit({ type: 'abandoned', id: row.id, requeued, reason });
    }
  }
}

/** Whether some run's submissions will be ours to adopt shortly: its process on this host is gone, its heartbeat not yet stale. */
export async function orphansSoon(ctx: BatchContext, live: Liveness): Promise<boolean> {
  const open = (await ctx.store.batches.open()).filter((b) => b.runId !== ctx.runId);
  if (open.length === 0) return false;
  const dying = new Set(dyingOwners(await ctx.store.activeRuns(),
    { host: live.host, pid: live.pid, runId: ctx.runId, isAlive: live.isAlive ?? isProcessAlive, now: ctx.now(), quietMs: live.quietMs }));
  return open.some((b) => dying.has(b.runId));
}
