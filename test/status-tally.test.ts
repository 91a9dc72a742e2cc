import { describe, expect, it } from 'vitest';
import { tallyJobs } from '../src/store/tally.js';
import { compact, quotedName, usd } from '../src/report/format.js';
import { unescapedId } from '../src/report/find-item.js';

const group = { model: 'gpt-test', state: 'done' as const, n: 2, p: 10, c: 5, up: 0, uc: 0, r: 0 };

describe('status tally of the maintained counts', () => {
  it('shows a cost that drifted to a hair below zero (floats added and taken away) as $0.00', () => {
    // what a count holds after a job costing 0.3 was counted in and jobs costing 0.1 and 0.2 out
    const drifted = 0.3 - 0.1 - 0.2;
    expect(drifted).toBeLessThan(0);
    const [m] = tallyJobs([{ ...group, usd: drifted }], 0).byModel;
    expect(usd(m!.storedUsd)).toBe('$0.00');
    expect(Object.is(m!.storedUsd, -0)).toBe(false);
  });

  it('keeps a real cost to the tenth of a nano-dollar', () => {
    const [m] = tallyJobs(
      [
        { ...group, usd: 0.000_000_123_4 },
        { ...group, state: 'failed', usd: 0.000_000_000_1 },
      ],
      0,
    ).byModel;
    expect(m!.storedUsd).toBe(0.000_000_123_5);
  });

  it('shows money to three digits under a dollar and to the cent above, never rounded to $0.00 or to the wrong cent', () => {
    const cases: Array<[number, string]> = [
      [0.01456, '$0.0146'], // of a $0.02 budget: not "$0.01"
      [0.02, '$0.02'],
      [0.135, '$0.135'],
      [0.5, '$0.50'],
      [0.0013949, '$0.00139'],
      [0.000013949999999999999, '$0.000014'], // a float's tail is not shown: 13,950 nano-USD, as the ledger keeps it, rounded half up
      [1e-7, '$0.0000001'],
      [1.234, '$1.23'],
      [1234.5, '$1,235'],
      [-0.0146, '-$0.0146'],
    ];
    for (const [n, shown] of cases) expect(usd(n), String(n)).toBe(shown);
  });

  it('leaves answers no item needs out of done and total, and keeps their tokens and cost', () => {
    const t = tallyJobs(
      [
        { ...group, n: 5, p: 50, c: 25, usd: 0.5 },
        { ...group, state: 'pending', n: 3, p: 0, c: 0, usd: 0 },
      ],
      2,
    );
    expect({ counts: t.counts, total: t.total, orphanedAnswers: t.orphanedAnswers, tokens: t.tokens }).toEqual({
      counts: { pending: 3, running: 0, done: 3, failed: 0 },
      total: 6,
      orphanedAnswers: 2,
      tokens: { prompt: 50, completion: 25 },
    });
    expect(t.byModel[0]).toMatchObject({ jobs: 8, done: 5, storedUsd: 0.5 });
  });
});

describe('compact', () => {
  it('rounds before it picks the unit: never 1000k or 1000M', () => {
    const shown = [9_999, 10_000, 99_940, 99_960, 999_499, 999_750, 14_200_000, 999_960_000, 2_500_000_000].map(compact);
    expect(shown).toEqual(['9,999', '10.0k', '99.9k', '100k', '999k', '1.0M', '14.2M', '1.0B', '2.5B']);
  });
});

describe('quotedName', () => {
  it('quotes a name with its control characters as the escapes show and forget take back (not JSON-quoted over them)', () => {
    const id = 'k\nept\u001b[2J.txt';
    const shown = quotedName(id);
    expect(shown).toBe('"k\\u000aept\\u001b[2J.txt"');
    expect(unescapedId(shown.slice(1, -1))).toBe(id);
    expect(quotedName('plain.txt')).toBe('"plain.txt"');
  });
});
