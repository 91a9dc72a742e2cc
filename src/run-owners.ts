import type { RunRow } from './store/types.js';

export { isProcessAlive, isRunProcessStopped } from './process-alive.js';

export interface Self {
  readonly host: string;
  readonly pid: number;
  readonly runId: string;
  readonly isAlive: (pid: number) => boolean;
  /** The run's process stopped by a signal (Ctrl-Z): alive, silent, and going on when continued (`isRunProcessStopped`). @default never */
  readonly isStopped?: (pid: number, runStartedAt: number) => boolean;
  readonly now: number;
  /** A run whose heartbeat is older than this may be dead. */
  readonly quietMs: number;
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
 * `quietMs`, `deadOwners`) and `dying` (beat lately, `dyingOwners`); and `suspended`, those whose
 * process is stopped (Ctrl-Z, SIGSTOP): their leases run out while they cannot beat, and taken
 * back, their jobs' requests they had out would be sent again by another run and answered to them
 * too when continued (`fg`), paid twice. Their jobs stay theirs; the user is told. Each process is
 * looked at once.
 */
export function goneOwners(runs: readonly RunRow[], self: Self): { dead: string[]; dying: string[]; suspended: RunRow[] } {
  const dead: string[] = [];
  const dying: string[] = [];
  const suspended: RunRow[] = [];
  for (const r of runs) {
    if (r.id === self.runId || r.host !== self.host || r.pid === self.pid) continue;
    if (!self.isAlive(r.pid)) (self.now - r.heartbeatAt > self.quietMs ? dead : dying).push(r.id);
    else if (r.endedAt === null && self.isStopped?.(r.pid, r.startedAt)) suspended.push(r);
  }
  return { dead, dying, suspended };
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
