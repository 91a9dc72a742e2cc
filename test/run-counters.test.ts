import { describe, expect, it } from 'vitest';
import { RunCounters } from '../src/scheduler/stats.js';

describe('RunCounters', () => {
  it('gives no ETA from the first seconds of a run, when its pace is still a ramp', () => {
    const t0 = 1_700_000_000_000;
    const c = new RunCounters(t0);
    c.total = 80_000;
    c.done = 1;
    c.finished(t0 + 900, 10);
    expect(c.snapshot(t0 + 1000).etaSeconds).toBeNull();
    for (let n = 0; n < 3000; n++) c.finished(t0 + 1000 + n, 10);
    c.done += 3000;
    expect(c.snapshot(t0 + 4000).etaSeconds).toBeCloseTo((80_000 - 3001) / (3001 / 4), 0);
  });

  it("counts a rate limit's pause in the ETA: an hour's retry-after is waited before the pace goes on", () => {
    const t0 = 1_700_000_000_000;
    const c = new RunCounters(t0);
    c.total = 80_000;
    for (let n = 0; n < 3000; n++) c.finished(t0 + 1000 + n, 10);
    c.done = 3000;
    const unpaused = c.snapshot(t0 + 4000).etaSeconds!;
    c.paused = { reason: 'rate_limit', until: t0 + 4000 + 3_600_000 };
    // it said "ETA 3m 11s" beside "paused: resuming in 59m 45s"
    expect(c.snapshot(t0 + 4000).etaSeconds).toBeCloseTo(3600 + unpaused, 0);
  });
});
