import { describe, expect, it } from 'vitest';
import { InFlightRequests } from '../src/scheduler/in-flight.js';
import type { Lane } from '../src/scheduler/lane.js';
import { LatencyStats } from '../src/scheduler/pace/latency.js';

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

describe('InFlightRequests: --timeout auto on a lane with no latencies yet', () => {
  it("cuts at the cap a job that timed out before, though each timeout doubles a job's time", () => {
    const hardStop = new AbortController();
    let now = 0;
    const coldLane = { model: 'm', latency: new LatencyStats() } as unknown as Lane;
    const inFlight = new InFlightRequests({ auto: true, capMs: 1000, now: () => now, abortSignal: hardStop.signal, sweepMs: 60_000 });
    const again = inFlight.start(coldLane, '{}', 0, 3);
    now = 1001;
    inFlight.sweep();
    // it waited 8 x 600 s for a provider that never answered, each try
    expect(again.signal.aborted).toBe(true);
    expect(inFlight.oldestCold()).toEqual({ model: 'm', waitingSince: 0, count: 1, capMs: 1000 });
    inFlight.dispose();
  });
});

describe('InFlightRequests: this process held up', () => {
  it('does not count a long stall of the event loop (another process holding the SQLite lock) against the requests on the wire', async () => {
    const hardStop = new AbortController();
    const latency = new LatencyStats();
    for (let i = 0; i < 40; i++) latency.record(200, 10); // a warm lane: cut past 1.2 s
    const lane = { model: 'm', latency } as unknown as Lane;
    const inFlight = new InFlightRequests({ auto: true, capMs: 600_000, now: Date.now, abortSignal: hardStop.signal, sweepMs: 20 });
    const r = inFlight.start(lane, '{}', Date.now());
    const heldUntil = Date.now() + 1500;
    while (Date.now() < heldUntil) {} // better-sqlite3 waiting out a lock: synchronous
    await new Promise((resolve) => setTimeout(resolve, 300));
    // Observed: cut as timed out ("the provider may bill this try") two ticks after the stall
    expect(r.signal.aborted).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 1200));
    // still cut once it has been out its time since
    expect(r.signal.aborted).toBe(true);
    inFlight.dispose();
  });

  it('a request to a lane with no latencies yet has waited only since this process went on (Ctrl-Z, SIGSTOP: the run then said it "waited 1m 18s")', async () => {
    const hardStop = new AbortController();
    const coldLane = { model: 'm', latency: new LatencyStats() } as unknown as Lane;
    const inFlight = new InFlightRequests({ auto: true, capMs: 600_000, now: Date.now, abortSignal: hardStop.signal, sweepMs: 20 });
    const startedAt = Date.now();
    inFlight.start(coldLane, '{}', startedAt);
    const heldUntil = Date.now() + 1500;
    while (Date.now() < heldUntil) {} // the process held, as a stopped one is
    await new Promise((resolve) => setTimeout(resolve, 100));
    const cold = inFlight.oldestCold()!;
    expect(cold.waitingSince - startedAt).toBeGreaterThanOrEqual(1400);
    expect(Date.now() - cold.waitingSince).toBeLessThan(1000);
    inFlight.dispose();
  });
});
