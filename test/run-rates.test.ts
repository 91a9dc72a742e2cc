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

  it("leaves a pause's idle seconds out: back at its pace, the run says that pace at once, not a third of it for 30 s", () => {
    let now = 0;
    const c = new RunCounters(0, () => now);
    const answer = (from: number, to: number) => {
      for (let t = from; t < to; t += 10) c.finished(t, 1); // 100 jobs a second
    };
    answer(0, 10_000);
    now = 10_000;
    c.paused = { reason: 'rate_limit', until: 30_000 };
    // paused: the pace before it, so that the ETA is the pause's end plus the rest at that pace
    expect(c.rates(20_000).jobs).toBeCloseTo(100, 6);
    now = 30_000;
    c.paused = null;
    answer(30_000, 32_000);
    // the window [2 s, 32 s] holds 1,000 jobs and 20 s of pause: 100 a second, where it said 33
    expect(c.rates(32_000).jobs).toBeCloseTo(100, 6);
    const eta = c.snapshot(32_000);
    expect(eta.jobsPerSecond).toBeCloseTo(100, 6);
  });

  it('a pause of one lane while others answer is no pause of the pace: its seconds count', () => {
    let now = 0;
    const c = new RunCounters(0, () => now);
    for (let t = 0; t < 10_000; t += 10) c.finished(t, 1);
    now = 2_000;
    c.paused = { reason: 'rate_limit', until: 8_000 };
    now = 8_000;
    c.paused = null;
    expect(c.rates(10_000).jobs).toBeCloseTo(100, 6);
  });

  it('never rises above its pace while paused, as the window slides past the last answers', () => {
    let now = 0;
    const c = new RunCounters(0, () => now);
    for (let t = 0; t < 10_000; t += 10) c.finished(t, 1); // 100 jobs a second
    now = 10_000;
    c.paused = { reason: 'outage', until: 11_000, downSince: 10_000 };
    // the window's start slid into the last second of answers: that second's 100 jobs over the
    // 0.3 s of it left in the window said 333 jobs/s (the dashboard showed 12 climbing to 49)
    for (let t = 10_000; t <= 45_000; t += 100) expect(c.rates(t).jobs).toBeLessThanOrEqual(100 + 1e-9);
    expect(c.rates(39_700).jobs).toBeCloseTo(100, 6);
    expect(c.rates(41_000).jobs).toBe(0);
  });

  it('counts a steady pace as it is when the window starts mid-second', () => {
    const c = new RunCounters(0);
    for (let t = 0; t < 35_500; t += 10) c.finished(t, 1);
    expect(c.rates(35_500).jobs).toBeCloseTo(100, 6);
  });
});
