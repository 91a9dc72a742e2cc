import { describe, expect, it } from 'vitest';
import { tallyJobs } from '../src/store/tally.js';
import { usd } from '../src/report/format.js';

const group = { model: 'gpt-test', state: 'done' as const, n: 2, p: 10, c: 5, up: 0, uc: 0, r: 0 };

describe('status tally of the maintained counts', () => {
  it('shows a cost that drifted to a hair below zero (floats added and taken away) as $0.00', () => {
    // what a count holds after a job costing 0.3 was counted in and jobs costing 0.1 and 0.2 out
    const drifted = 0.3 - 0.1 - 0.2;
    expect(drifted).toBeLessThan(0);
    const [m] = tallyJobs([{ ...group, usd: drifted }]).byModel;
    expect(usd(m!.storedUsd)).toBe('$0.00');
    expect(Object.is(m!.storedUsd, -0)).toBe(false);
  });

  it('keeps a real cost to the tenth of a nano-dollar', () => {
    const [m] = tallyJobs([
      { ...group, usd: 0.000_000_123_4 },
      { ...group, state: 'failed', usd: 0.000_000_000_1 },
    ]).byModel;
    expect(m!.storedUsd).toBe(0.000_000_123_5);
  });
});
