import { InvalidArgumentError, Option } from 'commander';
import type { AlertWatcher } from '../alerts/watcher.js';
import { parseDuration, parseRate } from '../alerts/thresholds.js';
import { LlmqError } from '../errors.js';
import type { RunHooks } from '../hooks/run-hooks.js';
import type { SchedulerListener } from '../scheduler/events.js';
import type { QueueReader } from '../store/types.js';
import { intAtLeast } from './options.js';

export interface AlertFlags {
  alertFailed?: number;
  alertOldest?: number;
  alertErrorRate?: number;
  alertWindow?: number;
}

const usage =
  <T>(parse: (v: string, flag: string) => T, flag: string) =>
  (value: string): T => {
    try {
      return parse(value, flag);
    } catch (error) {
      if (error instanceof LlmqError) throw new InvalidArgumentError(error.message);
      throw error;
    }
  };

export function alertOptions(): Option[] {
  return [
    new Option('--alert-failed <n>', 'alert when this run has failed N jobs').argParser(intAtLeast(1)),
    new Option('--alert-oldest <duration>', 'alert when the oldest pending job has waited this long (90s, 15m, 2h)').argParser(
      usage(parseDuration, '--alert-oldest'),
    ),
    new Option('--alert-error-rate <share>', 'alert when this share of tries errored over the --alert-window (5% or 0.05)').argParser(
      usage(parseRate, '--alert-error-rate'),
    ),
    new Option('--alert-window <duration>', 'the window --alert-error-rate looks at')
      .default(300_000, '5m')
      .argParser(usage(parseDuration, '--alert-window')),
  ];
}

/** Whether any --alert-* threshold was given. */
export function alertsOn(flags: AlertFlags): boolean {
  return flags.alertFailed !== undefined || flags.alertOldest !== undefined || flags.alertErrorRate !== undefined;
}

/**
 * The run's alert watcher, or null without --alert-*: each crossing is said once on the progress
 * display (a warning) and sent to the alert hook. The watcher is loaded only for a run that alerts.
 */
export async function watchAlerts(
  flags: AlertFlags,
  store: Pick<QueueReader, 'status'>,
  hooks: RunHooks | null,
  emit: SchedulerListener,
): Promise<AlertWatcher | null> {
  if (!alertsOn(flags)) return null;
  const { AlertWatcher } = await import('../alerts/watcher.js');
  return new AlertWatcher({
    thresholds: { failed: flags.alertFailed, oldestMs: flags.alertOldest, errorRate: flags.alertErrorRate, windowMs: flags.alertWindow },
    oldestPendingAt: async () => (await store.status()).oldestPendingAt,
    fire: (alert) => {
      emit('warning', { message: `alert: ${alert.message}` });
      hooks?.alert(alert);
    },
  });
}
