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
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  return !isZombie(pid);
}

/**
 * /proc says the process ended (Z) or is being torn down (X). Only what it says counts: a process
 * /proc does not show (`hidepid`, another user's) is taken for alive, as signal 0 found it, since
 * taking a live run for dead would send its jobs twice.
 */
function isZombie(pid: number): boolean {
  const state = procState(pid);
  return state === 'Z' || state === 'X';
}

/**
 * True while the process is stopped by a signal (T: Ctrl-Z, SIGSTOP) or a debugger (t): alive, its
 * heartbeat silent, and it goes on where it was when continued (`fg`), its requests out answered to
 * it. Its jobs taken back meanwhile would be sent twice. Unknown (no /proc, or not shown): false.
 */
export function isProcessStopped(pid: number): boolean {
  const state = procState(pid);
  return state === 'T' || state === 't';
}

/**
 * Whether the process of a run started at `runStartedAt` (ms) is stopped (`isProcessStopped`), and
 * is that run's: it started before the run did. A pid taken since by another process (a stopped
 * editor, or another machine's run of the same hostname) is not the run, and spares nothing.
 */
export function isRunProcessStopped(pid: number, runStartedAt: number): boolean {
  if (!isProcessStopped(pid)) return false;
  const started = processStartedAt(pid);
  // the run records its start once its process is up; a clock tick of /proc's rounding besides
  return started !== null && started <= runStartedAt + 1000;
}

/**
 * When the process started, ms since the epoch, from /proc (its start in clock ticks since boot, and
 * the boot time); null where /proc does not tell. Tells a run's own process from a later one that
 * took its pid.
 */
function processStartedAt(pid: number): number | null {
  const fields = procFields(pid);
  const ticks = Number(fields?.[19]);
  const boot = bootTimeMs();
  if (!fields || !Number.isFinite(ticks) || boot === null) return null;
  return boot + (ticks * 1000) / CLOCK_TICKS_PER_SECOND;
}

/** USER_HZ: the unit of /proc's times, 100 on every Linux that Node runs on. */
const CLOCK_TICKS_PER_SECOND = 100;

let bootMs: number | null | undefined;
/** The machine's boot time, ms since the epoch (`btime` in /proc/stat), read once. */
function bootTimeMs(): number | null {
  if (bootMs !== undefined) return bootMs;
  try {
    const btime = /^btime (\d+)$/m.exec(readFileSync('/proc/stat', 'latin1'))?.[1];
    bootMs = btime === undefined ? null : Number(btime) * 1000;
  } catch {
    bootMs = null;
  }
  return bootMs;
}

/** The state letter /proc gives the process (`R`, `S`, `T`, `Z`...), or null where /proc does not tell. */
function procState(pid: number): string | null {
  return procFields(pid)?.[0] ?? null;
}

/** The fields of /proc/PID/stat after the name, from the state on (`S`, ppid, ...); null where /proc does not tell. */
function procFields(pid: number): string[] | null {
  if (!PROC_STATES) return null;
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return null;
  }
  // "pid (comm) S ...": the name may hold spaces and parentheses, the fields follow the last ")"
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
}
