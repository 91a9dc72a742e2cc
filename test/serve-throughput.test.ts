import { describe, expect, it } from 'vitest';
import { historyPoints, throughput } from '../src/serve/feed.js';
import type { StatusReport } from '../src/report/status.js';

const report = (now: number, done: number, failed: number, orphanedAnswers: number, tokens = 0) =>
  ({
    now,
    counts: { pending: 0, running: 0, done, failed },
    orphanedAnswers,
    tokens: { prompt: tokens, completion: 0 },
  }) as unknown as StatusReport;

describe("the dashboard's throughput between two polls", () => {
  it('counts jobs that finished, not answers that items moved onto or off', () => {
    // 100 items enqueued again with their old text: 100 answers needed again, none sent
    expect(throughput(report(0, 50, 0, 100), report(2000, 150, 0, 0))!.jobsPerSecond).toBe(0);
    // and the other way: a new prompt takes items off 100 answers
    expect(throughput(report(0, 150, 0, 0), report(2000, 50, 0, 100))!.jobsPerSecond).toBe(0);
    // a job answered after its item moved away finished all the same, as did a done and a failed one
    expect(throughput(report(0, 50, 0, 100), report(2000, 51, 1, 101))!.jobsPerSecond).toBe(1.5);
  });

  it('after the polls stopped (no page was open), a break before the average of the gap, not a ramp drawn across it', () => {
    // a slow read (4 s at a 2 s poll) is no break
    expect(historyPoints(report(0, 0, 0, 0), report(4000, 20, 0, 0), false)).toEqual([{ t: 4, jobsPerSecond: 5, tokensPerSecond: 0 }]);
    expect(historyPoints(report(0, 0, 0, 0), report(420_000, 18_480, 0, 0), true)).toEqual([
      { t: 0.001, jobsPerSecond: null, tokensPerSecond: null },
      { t: 420, jobsPerSecond: 44, tokensPerSecond: 0 },
    ]);
  });
});
