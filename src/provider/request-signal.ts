/** A listener for a request's abort: a function, or an object with `handleEvent` (as EventTarget takes). */
export type AbortListener = (() => void) | { handleEvent(): void };

/**
 * What a provider is told about one request's end from outside: the run stopping, or the watchdog
 * cutting a request that hung. The part of AbortSignal a provider needs, so a real AbortSignal is
 * one (pass `new AbortController().signal` when calling a provider yourself), and so is the run's
 * lighter RequestAbort. A provider that hands it to an API wanting a real AbortSignal (fetch) bridges
 * it with `toAbortSignal`.
 */
export interface RequestSignal {
  readonly aborted: boolean;
  readonly reason: unknown;
  throwIfAborted(): void;
  addEventListener(type: 'abort', listener: AbortListener, options?: { readonly once?: boolean }): void;
  removeEventListener(type: 'abort', listener: AbortListener): void;
}

/**
 * One request's abort, as AbortController does it without an EventTarget: a controller and its
 * signal cost about 3 us to make and the first listener on it 3 us more, where this costs an
 * object. At thousands of requests a second that was a fifth of what llmq adds to each one.
 * Listeners run once, in the order added; aborting twice keeps the first reason.
 */
export class RequestAbort implements RequestSignal {
  aborted = false;
  reason: unknown = undefined;
  /** Almost always one listener (the provider's), so no array until a second comes. */
  #listeners: AbortListener | AbortListener[] | null = null;

  throwIfAborted(): void {
    if (this.aborted) throw this.reason;
  }

  addEventListener(_type: 'abort', listener: AbortListener): void {
    if (this.aborted) return; // as AbortSignal: a listener added after the abort never runs
    const l = this.#listeners;
    if (l === null) this.#listeners = listener;
    else if (Array.isArray(l)) l.push(listener);
    else this.#listeners = [l, listener];
  }

  removeEventListener(_type: 'abort', listener: AbortListener): void {
    const l = this.#listeners;
    if (l === listener) this.#listeners = null;
    else if (Array.isArray(l)) {
      const i = l.indexOf(listener);
      if (i >= 0) l.splice(i, 1);
    }
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const l = this.#listeners;
    this.#listeners = null;
    if (l === null) return;
    for (const listener of Array.isArray(l) ? l : [l]) {
      if (typeof listener === 'function') listener();
      else listener.handleEvent();
    }
  }
}

/** A real AbortSignal that aborts with `signal`: for handing a request's signal to fetch and the like. */
export function toAbortSignal(signal: RequestSignal): AbortSignal {
  if (signal instanceof AbortSignal) return signal;
  const controller = new AbortController();
  if (signal.aborted) controller.abort(signal.reason);
  else signal.addEventListener('abort', () => controller.abort(signal.reason), { once: true });
  return controller.signal;
}
