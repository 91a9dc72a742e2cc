import type { SchedulerEventMap, SchedulerEventName } from '../../scheduler/events.js';

/** One way of showing a run: it sees every event after the shared state has folded it in. */
export interface Renderer {
  onEvent<E extends SchedulerEventName>(event: E, payload: SchedulerEventMap[E]): void;
  /** Stop drawing (restore the cursor, flush the last line). Called once, safe to call again. */
  stop(): void;
}
