import { existsSync, readFileSync } from 'node:fs';

/** Whether /proc tells processes' states (Linux with /proc mounted): without it, nothing beyond signal 0 is known. */
const PROC_STATES = process.platform === 'linux' && existsSync('/proc/self/stat');

/**
 * True while a process with this pid exists on this machine and has not ended (EPERM: it exists but
 * is someone else's). A process that ended but was not reaped by its parent (a zombie: a killed
 * `llmq enqueue` under a parent that never waits for it, or in a container without an init) still
 * answers signal 0, and read as alive it held the queue's load lock, and its run's jobs, for as
 * long as the zombie lasted: on Linux its state in /proc says it is gone.
 */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM' && !hasEnded(pid);
  }
  return !hasEnded(pid);
}

/** Linux: the process is a zombie (Z) or being torn down (X). Without /proc, false. */
function hasEnded(pid: number): boolean {
  if (!PROC_STATES) return false;
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch (error) {
    // gone between the signal and the read
    return (error as NodeJS.ErrnoException).code === 'ENOENT';
  }
  // "pid (comm) S ...": the name may hold spaces and parentheses, the state follows the last ")"
  const state = stat.charAt(stat.lastIndexOf(')') + 2);
  return state === 'Z' || state === 'X';
}
