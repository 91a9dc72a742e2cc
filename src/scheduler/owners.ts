import type { RunRow } from '../store/types.js';

/** True while a process with this pid exists on this machine. */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Runs that hold leases but whose process is gone. Only runs on this host can be checked this
 * way; runs elsewhere are taken back when their lease expires.
 */
export function deadOwners(
  runs: readonly RunRow[],
  self: { host: string; pid: number; runId: string; isAlive: (pid: number) => boolean },
): string[] {
  return runs
    .filter((r) => r.id !== self.runId && r.host === self.host && r.pid !== self.pid && !self.isAlive(r.pid))
    .map((r) => r.id);
}
