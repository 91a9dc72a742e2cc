import { describe, expect, it } from 'vitest';
import { InFlightRequests } from '../src/scheduler/in-flight.js';
import type { Lane } from '../src/scheduler/lane.js';

// Each request's AbortSignal is reused by a later request once it ended quietly: not when it was
// aborted, and not while the provider still listens on it (the listener would hear a later abort).

const lane = {} as Lane;

describe('InFlightRequests: the signals handed to providers', () => {
  it('hands a signal on only when its request ended unaborted with no listener left', () => {
    const hardStop = new AbortController();
    const inFlight = new InFlightRequests({ auto: false, capMs: 1000, now: Date.now, abortSignal: hardStop.signal });
    const quiet = inFlight.start(lane, '{}', 0);
    const listener = () => {};
    quiet.signal.addEventListener('abort', listener, { once: true });
    quiet.signal.removeEventListener('abort', listener);
    inFlight.end(quiet);
    const reused = inFlight.start(lane, '{}', 0);
    expect(reused.signal).toBe(quiet.signal);

    reused.signal.addEventListener('abort', () => {}); // a provider that never lets go of it
    inFlight.end(reused);
    const afterListener = inFlight.start(lane, '{}', 0);
    expect(afterListener.signal).not.toBe(reused.signal);

    afterListener.controller.abort(new Error('cut by the watchdog'));
    inFlight.end(afterListener);
    const afterAbort = inFlight.start(lane, '{}', 0);
    expect(afterAbort.signal).not.toBe(afterListener.signal);
    expect(afterAbort.signal.aborted).toBe(false);
    inFlight.dispose();
  });

  it('aborts every request on the wire at a hard stop, and each later one at once, reused signals too', () => {
    const hardStop = new AbortController();
    const inFlight = new InFlightRequests({ auto: false, capMs: 1000, now: Date.now, abortSignal: hardStop.signal });
    const ended = inFlight.start(lane, '{}', 0);
    inFlight.end(ended);
    const onWire = inFlight.start(lane, '{}', 0);
    const reason = new Error('run stopped');
    hardStop.abort(reason);
    expect(onWire.signal.reason).toBe(reason);
    const later = inFlight.start(lane, '{}', 0);
    expect(later.signal.aborted).toBe(true);
    expect(later.signal.reason).toBe(reason);
    inFlight.dispose();
  });
});
