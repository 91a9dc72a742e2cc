import { describe, expect, it } from 'vitest';
import { RunCounters } from '../src/scheduler/stats.js';

// Between two reads of the queue (each heartbeat), the shared progress moves on by this
// run's own finished jobs and the others' pace, never past what this run still holds.
describe("a run's view of a queue other runs work too", () => {
  const T = 1_754_000_000_000;

  it('is carried forward from the last read by what this run finished and the others did at their pace', () => {
    const c = new RunCounters(T);
    c.done = 10;
    c.shared = { at: T + 10_000, otherRuns: 1, othersPerSecond: 5, finished: 30, left: 100, ownFinished: 10 };
    expect(c.snapshot(T + 10_000).shared).toEqual({ runs: 2, finished: 30, left: 100, jobsPerSecond: 5 });
    // two seconds on: 4 of this run's own, 10 of the other's
    c.done = 14;
    const later = c.snapshot(T + 12_000);
    expect(later.shared).toMatchObject({ finished: 44, left: 86 });
    expect(later.etaSeconds).toBeCloseTo(86 / later.shared!.jobsPerSecond, 9);
    // what this run holds is never counted finished, however long the others' pace runs on
    c.inFlight = 3;
    c.waiting = 2;
    expect(c.snapshot(T + 600_000).shared).toMatchObject({ finished: 125, left: 5 });
  });

  it('is none while the run works the queue alone: its ETA is its own', () => {
    const c = new RunCounters(T);
    c.total = 100;
    c.done = 50;
    c.finished(T + 4000, 0);
    const s = c.snapshot(T + 5000);
    expect(s.shared).toBeNull();
    expect(s.etaSeconds).toBeCloseTo(50 / s.jobsPerSecond, 9);
  });
});
