import type { RunRow } from './store/types.js';

export { isProcessAlive } from './process-alive.js';

export interface Self {
  readonly host: string;
  readonly pid: number;
  readonly runId: string;
  readonly isAlive: (pid: number) => boolean;
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
  return runs.filter((r) => gone(r, self) && self.now - r.heartbeatAt > self.quietMs).map((r) => r.id);
}

/** Runs on this host whose process is gone but whose heartbeat is still recent: dead soon. */
export function dyingOwners(runs: readonly RunRow[], self: Self): string[] {
  return runs.filter((r) => gone(r, self) && self.now - r.heartbeatAt <= self.quietMs).map((r) => r.id);
}
