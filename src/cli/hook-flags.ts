import { InvalidArgumentError, Option } from 'commander';
import { LlmqError } from '../errors.js';
import type { HookReport } from '../hooks/run-hooks.js';
import { int } from '../report/format.js';
import { parseHookTarget, type HookTarget } from '../hooks/target.js';
import type { HookCounts } from '../hooks/queue.js';

export interface HookFlags {
  onDone?: HookTarget;
  onJob?: HookTarget;
  onAlert?: HookTarget;
}

/** The --on-alert target, or the --on-done one when alerts are on and no --on-alert was given. */
export function alertTarget(flags: HookFlags, alertsOn: boolean): HookTarget | undefined {
  if (!alertsOn) return undefined;
  return flags.onAlert ?? flags.onDone;
}

export function hookOptions(): Option[] {
  const target = (flag: string) => (value: string) => {
    try {
      return parseHookTarget(value, flag);
    } catch (error) {
      if (error instanceof LlmqError) throw new InvalidArgumentError(error.message);
      throw error;
    }
  };
  return [
    new Option(
      '--on-done <cmd|url>',
      'when the run ends, send its summary as JSON: on stdin of a shell command, or POSTed to an http(s) URL',
    ).argParser(target('--on-done')),
    new Option('--on-alert <cmd|url>', 'where --alert-* alerts are sent, the same way (default: the --on-done hook)').argParser(
      target('--on-alert'),
    ),
    new Option(
      '--on-job <cmd|url>',
      'for each job done or failed for good, send {key, items, state, attempts, output|error} the same way (never slows the run)',
    ).argParser(target('--on-job')),
  ];
}

/** One line on stderr about the hooks, saying what did not go out. */
export function hookReportLine(report: HookReport): string {
  const part = (name: string, c: HookCounts | null) => {
    if (!c) return null;
    const missed = [c.failed ? `${c.failed} failed` : '', c.dropped ? `${c.dropped} dropped` : ''].filter(Boolean).join(', ');
    return `${name} ${c.sent} sent${missed ? `, ${missed}` : ''}${c.lastError && (c.failed || c.dropped) ? ` (last error: ${c.lastError})` : ''}`;
  };
  const parts = [part('--on-job', report.job), part('alerts', report.alert), part('--on-done', report.done)].filter(Boolean);
  const job = report.job;
  return `hooks: ${parts.join('; ')}.${job?.dropped ? ` ${droppedJobHooksText(job)}` : ''}\n`;
}

/** Why job hooks were dropped: the queue full while the run went on, the time allowed after it, or both. */
function droppedJobHooksText(c: HookCounts): string {
  const atEnd = c.dropped - c.queueFull;
  const full = c.queueFull > 0 ? `${int(c.queueFull)} did not fit the queue while the run went on (the hook was slower than the jobs)` : '';
  const late =
    atEnd <= 0
      ? ''
      : c.lastError
        ? `${int(atEnd)} were still waiting behind failing deliveries (each tried several times), or being tried, when the 5 s allowed after the run ran out`
        : `${int(atEnd)} were still waiting or being sent when the 5 s allowed after the run ran out`;
  return `Of the dropped job hooks, ${[full, late].filter(Boolean).join('; ')}. Their jobs are in llmq export.`;
}
