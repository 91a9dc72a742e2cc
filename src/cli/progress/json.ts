import type { SchedulerEventMap, SchedulerEventName } from '../../scheduler/events.js';
import type { ProgressState } from './state.js';
import type { Renderer } from './types.js';

/**
 * `--json`: one JSON object per line, `{"event": name, "time": ms, ...payload}`, for other programs.
 * Progress snapshots are thinned to one per `everyMs`; the last is always written before `run:end`.
 * `progress` carries `costUsd`, what this run's answers cost so far (null when a model has no
 * price); `run:end` is the run's summary (`RunSummary`: its `costUsd` null when an answer of a
 * model without a price came).
 */
export function jsonRenderer(state: ProgressState, stream: NodeJS.WritableStream, everyMs: number): Renderer {
  let lastAt: number | null = null;
  let pending: SchedulerEventMap['progress'] | null = null;
  const write = (event: string, payload: object, extra: object = {}) =>
    stream.write(JSON.stringify({ event, time: Date.now(), ...payload, ...extra }) + '\n');
  return {
    onEvent<E extends SchedulerEventName>(event: E, payload: SchedulerEventMap[E]) {
      if (event === 'progress') {
        const p = payload as SchedulerEventMap['progress'];
        if (lastAt !== null && p.now - lastAt < everyMs) {
          pending = p;
          return;
        }
        lastAt = p.now;
        pending = null;
        write(event, p, { costUsd: summed(state.cost) });
        return;
      }
      if (event === 'job:done') {
        // The answer rides on the event for hooks; the NDJSON stream stays as documented (export has answers).
        const { output: _answer, ...rest } = payload as SchedulerEventMap['job:done'];
        write(event, rest);
        return;
      }
      if (event === 'run:end' && pending) {
        write('progress', pending, { costUsd: summed(state.cost) });
        pending = null;
      }
      write(event, payload);
    },
    stop() {
      // Nothing buffered but a thinned snapshot, and the last one will be superseded by run:end.
    },
  };
}

/** A sum of many prices without its float noise (0.002799999999999999 beside run:end's 0.0028). */
function summed(usd: number | null): number | null {
  return usd === null ? null : Number(usd.toPrecision(12));
}
