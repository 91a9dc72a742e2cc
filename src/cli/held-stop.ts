import { EXIT } from '../errors.js';
import { STOP_SIGNALS } from './run-stop.js';
import { signalCounter } from '../second-signal.js';

/**
 * For a command that makes one change to the queue (`forget`, `retry-failed`): a stop signal waits
 * until the change is made and said, then the command exits 130, as every command a signal stops
 * does. Killed by the signal itself, it exited 143 or 129, and said nothing of a change it had just
 * committed. A second signal (not an echo of the first) quits at once: a transaction not committed
 * then is rolled back, whole. Returns what stops holding them, to call in a `finally`.
 */
export function holdStopSignals(change: string): () => void {
  let first: NodeJS.Signals | null = null;
  const counted = signalCounter();
  const onSignal = (signal: NodeJS.Signals): void => {
    if (counted(signal) >= 2) {
      process.stderr.write(`stopped (${signal}) at once\n`);
      process.exit(EXIT.SIGNAL);
    }
    if (first !== null) return;
    first = signal;
    process.stderr.write(`stopping (${signal}): ${change} first (a second Ctrl-C quits at once)\n`);
  };
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  return () => {
    for (const signal of STOP_SIGNALS) process.off(signal, onSignal);
    if (first !== null) process.exitCode = EXIT.SIGNAL;
  };
}
