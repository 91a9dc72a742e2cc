import type { SchedulerListener } from '../scheduler/events.js';
import { onReaderGone } from './reader-gone.js';
import { signalCounter } from '../second-signal.js';
import { EXIT } from '../errors.js';

/** SIGHUP is a closed terminal or a logged-out session: the run must still put its jobs back. */
export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

export interface RunStop {
  /** Aborted on the first stop: take no more jobs. */
  readonly stopSignal: AbortSignal;
  /** Aborted after the grace period or on a second signal: abort requests in flight. */
  readonly abortSignal: AbortSignal;
  /** Remove the handlers and the grace timer; call it in a `finally`. */
  dispose(): void;
}

/**
 * Until a run can stop gently (its store open, its handlers in place: most of a second of loading
 * prices, the tokenizer and the store), a stop signal ends llmq at once, as it would with no
 * handler, but with 130 as any later stop (SIGTERM's own death is 143, which a supervisor would
 * read as something else). Nothing is claimed yet, so nothing is to be put back. Returns the release.
 */
export function exitOnStopSignals(): () => void {
  // said, as every later stop is: an exit 130 with no word read as a crash, or as a run that never started
  const exitNow = (signal: NodeJS.Signals): never => {
    process.stderr.write(`stopped (${signal}) while the run was starting: nothing was claimed or sent\n`);
    return process.exit(EXIT.SIGNAL);
  };
  for (const signal of STOP_SIGNALS) process.on(signal, exitNow);
  return () => {
    for (const signal of STOP_SIGNALS) process.off(signal, exitNow);
  };
}

/**
 * How a run is stopped from outside. The first signal, or the reader of stdout or stderr going
 * away (`llmq run --json | head`), stops taking jobs and lets requests in flight finish for up to
 * `graceMs`, so their answers are stored, then aborts them; `runQueue` puts every unfinished job
 * back to pending either way. A second signal aborts at once (not an echo of the first: second-signal.ts). A reader going away never counts as
 * that second signal: `2>&1 | head` loses both streams together, and a closed terminal sends
 * SIGHUP as well as failing writes.
 */
export function watchRunStop(graceMs: number, emit: SchedulerListener): RunStop {
  const stop = new AbortController();
  const abort = new AbortController();
  let graceTimer: NodeJS.Timeout | undefined;
  const counted = signalCounter();

  const abortNow = (why: string): void => {
    if (abort.signal.aborted) return;
    abort.abort();
    emit('stopping', { graceMs, signal: why, aborting: true });
  };
  const stopGently = (why: string): void => {
    if (stop.signal.aborted) return;
    stop.abort();
    emit('stopping', { graceMs, signal: why });
    graceTimer = setTimeout(() => abortNow('grace'), graceMs);
  };
  const onSignal = (signal: NodeJS.Signals): void => {
    if (counted(signal) === 1) stopGently(signal);
    else abortNow(signal);
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  const release = onReaderGone(() => stopGently('SIGPIPE'));

  return {
    stopSignal: stop.signal,
    abortSignal: abort.signal,
    dispose() {
      clearTimeout(graceTimer);
      for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
      release();
    },
  };
}
