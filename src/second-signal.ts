/**
 * How long after a stop signal the same signal is taken as an echo of it, not as a second one. One
 * Ctrl-C often arrives twice: `npx llmq` (npm forwards it to its child, which the terminal signalled
 * too) and GNU `timeout` (to the child, then to its process group) each deliver it twice within a few
 * milliseconds, and the second aborted the requests the first meant to let finish. A person's
 * second Ctrl-C comes later than this.
 */
export const ECHO_MS = 250;

/**
 * Counts stop signals, an echo of the last one (the same signal within ECHO_MS of it) not counted:
 * 1 is the first stop, 2 or more a second one.
 */
export function signalCounter(now: () => number = Date.now): (signal: NodeJS.Signals) => number {
  let count = 0;
  let last: { signal: NodeJS.Signals; at: number } | null = null;
  return (signal) => {
    const at = now();
    if (last && last.signal === signal && at - last.at < ECHO_MS) return count;
    last = { signal, at };
    return ++count;
  };
}
