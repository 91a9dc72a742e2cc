import { describe, expect, it } from 'vitest';
import { RunCounters } from '../src/scheduler/stats.js';

// One run, one rate: the progress line's jobs/s, the summary's and status's count the same finished
// jobs (done and failed) over the same time.
describe("a run's jobs per second", () => {
  it('is the jobs finished over the time they took, in a run shorter than a second too', () => {
    const c = new RunCounters(10_000);
    c.finished(10_040, 5);
    c.finished(10_090, 5);
    // 2 jobs in 0.1 s: it said 2 jobs/s (over a whole second at least) where the summary said 20
    expect(c.rates(10_100).jobs).toBeCloseTo(20, 6);
    expect(c.rates(10_100).tokens).toBeCloseTo(100, 6);
    // a first snapshot just after the start is not a wild figure
    expect(new RunCounters(0).rates(1).jobs).toBe(0);
    const early = new RunCounters(0);
    early.finished(1, 0);
    expect(early.rates(2).jobs).toBe(20);
  });
});
