import cliProgress from 'cli-progress';
import type { SchedulerEventMap, SchedulerEventName } from '../../scheduler/events.js';
import { oneLine, type Paint, wrap } from '../../report/format.js';
import { countsText, detailText, progressOf, failureText, laneText, pauseText, startText, summaryText, type Where } from './lines.js';
import type { ProgressState } from './state.js';
import type { Renderer } from './types.js';

/**
 * The live display on a terminal: a bar line and a details line redrawn in place by cli-progress,
 * a third line only while paused or stopping, and failures logged above the bars.
 */
export function ttyRenderer(
  state: ProgressState,
  stream: NodeJS.WritableStream,
  paint: Paint,
  columns: () => number,
  where: Where,
): Renderer {
  const multi = new cliProgress.MultiBar({
    stream,
    format: (_o, _params, payload: { line: () => string }) => payload.line(),
    hideCursor: true,
    clearOnComplete: false,
    linewrap: false,
    fps: 8,
    // The run command owns SIGINT (first = graceful stop); the bars must not exit on it.
    gracefulExit: false,
  });
  const width = () => Math.max(40, Math.min(columns(), 200) - 1);
  const barLine = () => {
    const text = countsText(state.snapshot, state.total);
    // cli-progress cuts lines at the terminal width counting color codes as characters, so they
    // come out of the room for the bar; otherwise the end of the line (the ETA) would be cut.
    const codes = paint.green('x').length - 1;
    const room = width() - text.length - 1 - codes;
    const size = Math.max(0, Math.min(40, room));
    const shown = progressOf(state.snapshot, state.total);
    const ratio = shown.total ? Math.min(1, shown.finished / shown.total) : 0;
    const full = Math.round(size * ratio);
    const bar = size >= 5 ? paint.green('█'.repeat(full)) + '░'.repeat(size - full) + ' ' : '';
    return bar + text;
  };
  const main = multi.create(1, 0, { line: barLine });
  // Both detail and pause texts are built to fit 80 columns, so they are not cut (cutting could split a color code).
  multi.create(1, 0, { line: () => detailText(state, paint) });
  // One line per lane that has a limit, added as lanes appear.
  const laneBars = new Map<string, cliProgress.SingleBar>();
  const laneLine = (model: string) => () => {
    const p = state.snapshot;
    const lane = p?.lanes.find((l) => l.model === model);
    return lane ? paint.dim(laneText(lane, p!.now) ?? model) : model;
  };
  let note: cliProgress.SingleBar | null = null;
  let failures = 0;
  let stopped = false;

  const stop = () => {
    if (stopped) return;
    stopped = true;
    // stop() draws the bars one last time but drops logged lines not yet drawn; update() flushes them.
    multi.update();
    multi.stop();
  };
  return {
    onEvent<E extends SchedulerEventName>(event: E, payload: SchedulerEventMap[E]) {
      if (stopped) return;
      // wrapped, not cut at the screen's width: a warning's end is what to do about it
      if (event === 'warning')
        multi.log(
          `${wrap(`warning: ${(payload as SchedulerEventMap['warning']).message}`, width())
            .map((l) => paint.yellow(l))
            .join('\n')}\n`,
        );
      if (event === 'progress') {
        const p = payload as SchedulerEventMap['progress'];
        for (const lane of p.lanes) {
          if (!laneBars.has(lane.model) && laneText(lane, p.now))
            laneBars.set(lane.model, multi.create(1, 0, { line: laneLine(lane.model) }));
        }
      }
      if (event === 'run:start') multi.log(paint.dim(oneLine(startText(payload as SchedulerEventMap['run:start'], where), width())) + '\n');
      if (event === 'job:failed') {
        const text = failureText(++failures, payload as SchedulerEventMap['job:failed'], paint, width(), where);
        if (text !== null) multi.log(text + '\n');
      }
      const text = pauseText(state, Date.now());
      if (text && !note) note = multi.create(1, 0, { line: () => paint.yellow(pauseText(state, Date.now()) ?? '') });
      else if (!text && note) {
        multi.remove(note);
        note = null;
      }
      if (event === 'run:end') {
        main.update(0);
        stop();
        stream.write(summaryText(payload as SchedulerEventMap['run:end'], state, paint, where));
        return;
      }
      // Values are ignored by the format; update() just asks for a redraw at the next frame.
      main.update(0);
    },
    stop,
  };
}
