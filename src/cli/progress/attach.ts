import { Chalk } from 'chalk';
import type { RunSummary, SchedulerEventMap, SchedulerEventName, SchedulerListener } from '../../scheduler/events.js';
import { loadPriceTable, type PriceTable } from '../../pricing/price-table.js';
import { NO_PAINT, type Paint } from '../../report/format.js';
import { useColor } from '../output.js';
import { jsonRenderer } from './json.js';
import { plainRenderer, summaryRenderer } from './plain.js';
import { ProgressState } from './state.js';
import { ttyRenderer } from './tty.js';
import type { Renderer } from './types.js';

export type ProgressMode = 'tty' | 'plain' | 'json' | 'none';

/** Every scheduler event, so an EventEmitter source can be subscribed name by name. */
const EVENTS: readonly SchedulerEventName[] = [
  'run:start',
  'job:start',
  'job:done',
  'job:retry',
  'job:failed',
  'paused',
  'resumed',
  'stopping',
  'warning',
  'progress',
  'run:end',
];

/**
 * Where events come from: an EventEmitter-like object emitting `SchedulerEventMap` events, or a
 * subscribe function taking one `SchedulerListener` and returning an unsubscribe. Null: the
 * caller feeds events itself through the returned `listener`.
 */
// `any` so both Node's untyped EventEmitter and a typed EventEmitter<...> fit.
type AnyListener = (...args: any[]) => void;
export type ProgressSource =
  | { on(event: string, fn: AnyListener): unknown; off?(event: string, fn: AnyListener): unknown }
  // biome-ignore lint/suspicious/noConfusingVoidType: a subscribe function may return nothing; `undefined` would refuse `() => {}`.
  | ((listener: SchedulerListener) => (() => void) | void)
  | null;

export interface ProgressOptions {
  /** `tty`: live bars; `plain`: a line every few seconds; `json`: NDJSON events; `none`: the summary and warnings only. See `progressMode`. */
  readonly mode: ProgressMode;
  /** Where to draw. @default process.stderr for tty/plain, process.stdout for json */
  readonly stream?: NodeJS.WritableStream;
  /** Color the human output. @default useColor(stream): a TTY and no NO_COLOR */
  readonly color?: boolean;
  /** Prices for "cost so far". @default the built-in table */
  readonly prices?: PriceTable;
  /** Plain mode: at most one line per this many ms of run time; json: one progress event per. @default 5000 / 1000 */
  readonly intervalMs?: number;
  /** Named in the plain and tty header line: where the queue is (no password) and which provider. */
  readonly db?: string;
  readonly provider?: string;
  /** Flags the next commands the summary suggests need to reach this queue (` --db q.db`, see `dbArgument`). @default '' */
  readonly again?: string;
  /** Flags a suggested `llmq run` needs besides to send where this run sent, after the run that ended so (`Where.runAgain`): a function of its summary. */
  readonly runAgain?: (r: RunSummary) => string;
  /** The answers are the offline mock's stand-ins: what they say of the model's answers (cut off at max_tokens) is not proposed as a fix. */
  readonly offline?: boolean;
}

export interface Progress {
  /** Hand this to the scheduler if it takes a listener rather than being an emitter. */
  readonly listener: SchedulerListener;
  /** Detach and stop drawing (restores the cursor). Idempotent; call it in a `finally`. */
  stop(): void;
}

/** The display a stream calls for: NDJSON with --json, bars on a terminal, lines otherwise. */
export function progressMode(stream: NodeJS.WritableStream, json: boolean): ProgressMode {
  if (json) return 'json';
  return (stream as NodeJS.WriteStream).isTTY ? 'tty' : 'plain';
}

/** Listen to a run and show it. The run command calls this once before starting the scheduler. */
export function attachProgress(source: ProgressSource, options: ProgressOptions): Progress {
  const stream = options.stream ?? (options.mode === 'json' ? process.stdout : process.stderr);
  const color = options.mode !== 'json' && (options.color ?? useColor(stream as NodeJS.WriteStream));
  const paint: Paint = color ? new Chalk({ level: 1 }) : NO_PAINT;
  const state = new ProgressState(options.prices ?? loadPriceTable());
  const columns = () => (stream as NodeJS.WriteStream).columns || 80;
  const where = {
    db: options.db ?? null,
    provider: options.provider ?? null,
    again: options.again ?? '',
    runAgain: options.runAgain,
    offline: options.offline ?? false,
  };
  const renderer: Renderer =
    options.mode === 'none'
      ? summaryRenderer(state, stream, paint, where)
      : options.mode === 'json'
        ? jsonRenderer(state, stream, options.intervalMs ?? 1000)
        : options.mode === 'tty'
          ? ttyRenderer(state, stream, paint, columns, where)
          : plainRenderer(state, stream, paint, options.intervalMs ?? 5000, where);

  let stopped = false;
  const listener: SchedulerListener = (event, payload) => {
    if (stopped) return;
    state.apply(event, payload);
    renderer.onEvent(event, payload);
  };
  const detach = subscribe(source, listener);
  return {
    listener,
    stop() {
      if (stopped) return;
      stopped = true;
      detach();
      renderer.stop();
    },
  };
}

function subscribe(source: ProgressSource, listener: SchedulerListener): () => void {
  if (source === null) return () => {};
  if (typeof source === 'function') return source(listener) ?? (() => {});
  const handlers = EVENTS.map((event) => {
    const fn = (payload: SchedulerEventMap[typeof event]) => listener(event, payload);
    source.on(event, fn as AnyListener);
    return [event, fn] as const;
  });
  return () => {
    for (const [event, fn] of handlers) source.off?.(event, fn as AnyListener);
  };
}

export { summaryText } from './lines.js';
export { ProgressState } from './state.js';
