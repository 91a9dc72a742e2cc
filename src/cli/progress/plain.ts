import type { SchedulerEventMap, SchedulerEventName } from '../../scheduler/events.js';
import { duration, type Paint } from '../../report/format.js';
import { countsText, detailText, failureText, laneText, pauseText, startText, summaryText, type Where } from './lines.js';
import type { ProgressState } from './state.js';
import type { Renderer } from './types.js';

/**
 * For logs, CI and pipes: one line every `everyMs` (by the scheduler's clock) and at the end,
 * plus a line for each pause, resume and (the first few) failures. Never an escape code unless
 * `paint` colors, which the caller only allows on a terminal.
 */
export function plainRenderer(state: ProgressState, stream: NodeJS.WritableStream, paint: Paint, everyMs: number, where: Where): Renderer {
  let lastAt: number | null = null;
  let printedSnapshot: unknown = null;
  let failures = 0;
  let ended = false;
  const write = (line: string) => stream.write(line + '\n');
  const line = () => {
    const p = state.snapshot;
    printedSnapshot = p;
    // a run with nothing to do has no progress to tell: 0/0 says nothing
    if (state.total === 0 && !p?.done && !p?.failed) return;
    const elapsed = p ? `[${duration((p.now - p.startedAt) / 1000)}] ` : '';
    write(`${elapsed}${countsText(p, state.total)} · ${detailText(state, paint)}`);
    for (const lane of p?.lanes ?? []) {
      const text = laneText(lane, p!.now);
      if (text) write(`  ${text}`);
    }
  };
  return {
    onEvent<E extends SchedulerEventName>(event: E, payload: SchedulerEventMap[E]) {
      if (ended) return;
      switch (event) {
        case 'run:start':
          write(startText(payload as SchedulerEventMap['run:start'], where));
          break;
        case 'progress': {
          const now = (payload as SchedulerEventMap['progress']).now;
          if (lastAt === null || now - lastAt >= everyMs) {
            lastAt = now;
            line();
          }
          break;
        }
        case 'job:failed': {
          const text = failureText(++failures, payload as SchedulerEventMap['job:failed'], paint, 200, where);
          if (text !== null) write(text);
          break;
        }
        case 'paused':
        case 'stopping':
          write(paint.yellow(pauseText(state, Date.now(), 300) ?? event));
          break;
        case 'warning':
          write(warningLine(payload as SchedulerEventMap['warning'], paint));
          break;
        case 'resumed':
          write(`resumed after the ${(payload as SchedulerEventMap['resumed']).reason === 'rate_limit' ? 'rate limit' : 'outage'}`);
          break;
        case 'run:end':
          if (state.snapshot && printedSnapshot !== state.snapshot) line();
          ended = true;
          stream.write(summaryText(payload as SchedulerEventMap['run:end'], state, paint, where));
          break;
      }
    },
    stop() {
      if (ended) return;
      ended = true;
      if (state.snapshot && printedSnapshot !== state.snapshot) line();
    },
  };
}

/**
 * `--progress none`: no progress, but what the run came to (its summary: counts, money, what is
 * left and the command that picks it up), its warnings and a stop's line still print. Without them
 * a run that left failed jobs ended with exit code 2 and not a word about why, and a Ctrl-C said
 * nothing while the requests in flight took their time (up to the grace's 30 s).
 */
export function summaryRenderer(state: ProgressState, stream: NodeJS.WritableStream, paint: Paint, where: Where): Renderer {
  let ended = false;
  return {
    onEvent<E extends SchedulerEventName>(event: E, payload: SchedulerEventMap[E]) {
      if (ended) return;
      if (event === 'warning') stream.write(`${warningLine(payload as SchedulerEventMap['warning'], paint)}\n`);
      if (event === 'stopping') stream.write(`${paint.yellow(pauseText(state, Date.now(), 300) ?? event)}\n`);
      if (event !== 'run:end') return;
      ended = true;
      stream.write(summaryText(payload as SchedulerEventMap['run:end'], state, paint, where));
    },
    stop() {
      ended = true;
    },
  };
}

function warningLine(w: SchedulerEventMap['warning'], paint: Paint): string {
  return paint.yellow(`warning: ${w.message}`);
}
