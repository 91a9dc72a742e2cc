import type { RunRow } from './store/types.js';

export { isProcessAlive, isProcessStopped } from './process-alive.js';

export interface Self {
  readonly host: string;
  readonly pid: number;
  readonly runId: string;
  readonly isAlive: (pid: number) => boolean;
  /** Stopped by a signal (Ctrl-Z): alive, silent, and going on when continued. @default never */
  readonly isStopped?: (pid: number) => boolean;
  readonly now: number;
  /** A run whose heartbeat is older than this may be dead. */
  readonly quietMs: number;
}

/**
 * Runs on this host whose process is gone. Only those can be checked this way; runs elsewhere are
 * taken back when their lease expires.
 */
function gone(r: RunRow, self: Self): boolean {
  return r.id !== self.runId && r.host === self.host && r.pid !== self.pid && !self.isAlive(r.pid);
}

/**
 * Runs known dead: on this host, process gone, and quiet for a few heartbeats. The heartbeat test
 * matters when two machines share a hostname (containers, cloned VMs): a live run elsewhere keeps
 * beating, so its pid missing here never condemns it.
 */
export function deadOwners(runs: readonly RunRow[], self: Self): string[] {
  return goneOwners(runs, self).dead;
}

/**
 * Runs on this host whose process is gone, parted by their heartbeat: `dead` (quiet past
 * `quietMs`, `deadOwners`) and `dying` (beat lately, `dyingOwners`). Each process is looked at once.
 */
export function goneOwners(runs: readonly RunRow[], self: Self): { dead: string[]; dying: string[] } {
  const dead: string[] = [];
  const dying: string[] = [];
  for (const r of runs) if (gone(r, self)) (self.now - r.heartbeatAt > self.quietMs ? dead : dying).push(r.id);
  return { dead, dying };
}

/**
 * Runs anywhere, not ended, silent longer than `quietMs` but not so long that a lease of theirs can
 * still hold (`leaseMs` past their last beat, which renewed it): stopped, most likely (killed on
 * another machine, whose process cannot be checked from here), their jobs back when the leases run
 * out. A run busy past `quietMs` looks silent too, and beats again: waiting for it costs a moment.
 */
export function silentOwners(runs: readonly RunRow[], self: Self, leaseMs: number): string[] {
  return runs
    .filter((r) => {
      const quiet = self.now - r.heartbeatAt;
      return r.id !== self.runId && r.endedAt === null && quiet > self.quietMs && quiet <= leaseMs + self.quietMs;
    })
    .map((r) => r.id);
}

/**
 * Runs on this host, not ended, whose process is stopped (Ctrl-Z, SIGSTOP): their leases run out
 * while they cannot beat, and taken back, their jobs would be sent again by another run and once
 * more by them when continued (`fg`), paid twice. Their jobs stay theirs; the user is told.
 */
export function suspendedOwners(runs: readonly RunRow[], self: Self): RunRow[] {
  const stopped = self.isStopped;
  if (!stopped) return [];
  return runs.filter((r) => r.id !== self.runId && r.host === self.host && r.pid !== self.pid && r.endedAt === null && stopped(r.pid));
}

/** A batch run silent this long, wherever it ran, has its batches taken over by another (its lease). */
export const BATCH_TAKEOVER_MS = 60_000;

/**
 * Whether run `runId`'s batches have no run to collect them: it ended (is not among `activeRuns`, the
 * runs not ended) or has been silent past BATCH_TAKEOVER_MS, when a run --via batch takes them over.
 */
export function batchOwnerGone(runId: string, activeRuns: ReadonlyArray<Pick<RunRow, 'id' | 'heartbeatAt'>>, now: number): boolean {
  const run = activeRuns.find((r) => r.id === runId);
  return !run || now - run.heartbeatAt > BATCH_TAKEOVER_MS;
}

/** Runs on this host whose process is gone but whose heartbeat is still recent: dead soon. */
export function dyingOwners(runs: readonly RunRow[], self: Self): string[] {
  return goneOwners(runs, self).dying;
}
