import { describe, expect, it } from 'vitest';
import { oneLine, percent, percentTenths, usd, usdApart, wrap } from '../src/report/format.js';

describe('wrap', () => {
  it('breaks at spaces, cuts a word longer than the width, and loses nothing', () => {
    expect(wrap('price from the file prices.json', 12)).toEqual(['price from', 'the file', 'prices.json']);
    expect(wrap('abcdefghijklmnopqrstuvwxyz', 10)).toEqual(['abcdefghij', 'klmnopqrst', 'uvwxyz']);
    expect(wrap('', 10)).toEqual(['']);
  });

  it('breaks a text of parts joined by " · " between its parts first, the dot kept at the end of the line', () => {
    const cost = 'cost $0.0000776 to $0.00684 · batch $0.0000388 to $0.00342 · worst $0.00684';
    expect(wrap(cost, 67)).toEqual(['cost $0.0000776 to $0.00684 · batch $0.0000388 to $0.00342 ·', 'worst $0.00684']);
    expect(wrap(cost, 80)).toEqual([cost]);
    // a part longer than the width is broken at its spaces, as any text
    expect(wrap('a · one two three four five · b', 10)).toEqual(['a ·', 'one two', 'three four', 'five · b']);
  });

  it('keeps a run of spaces inside a line: a path with two spaces is shown as it is', () => {
    expect(wrap('--prices /data/Q4  final/prices.json', 80)).toEqual(['--prices /data/Q4  final/prices.json']);
    const lines = wrap('--prices /data/Q4  final/prices.json', 20);
    expect(lines.join(' ')).toBe('--prices /data/Q4  final/prices.json');
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(20);
  });
});

describe('oneLine', () => {
  it('cuts a long text at a space near the end, not inside a word, and marks the cut', () => {
    const reason = 'HTTP 429: Rate limit reached for gpt-4o-mini in organization org-abc on requests per min';
    expect(oneLine(reason, 40)).toBe('HTTP 429: Rate limit reached for…');
    expect(oneLine(reason, 40).length).toBeLessThanOrEqual(40);
  });

  it('cuts inside a word when no space is near the end (a long URL), and leaves a short text as it is', () => {
    expect(oneLine('see https://platform.openai.com/account/rate-limits/details', 30)).toBe('see https://platform.openai.c…');
    expect(oneLine('  two\n lines ', 30)).toBe('two lines');
  });
});

describe('percent', () => {
  it('shows 100% only when nothing is left: 597 of 600 is 99.5%, not rounded up', () => {
    expect(percent(597, 600)).toBe('99.5%');
    expect(percent(599_999, 600_000)).toBe('99.9%');
    // to the tenth as status --json's percentDone (99.9): the text said 99.8
    expect(percent(19_972, 20_000)).toBe('99.9%');
    // status --json's percentDone is the same figure, and no 100 either while something is left
    expect(percentTenths(19_972, 20_000)).toBe(99.9);
    expect(percentTenths(599_999, 600_000)).toBe(99.9);
    expect(percentTenths(600, 600)).toBe(100);
    expect(percentTenths(5, 9)).toBe(55.6);
    expect(percent(600, 600)).toBe('100%');
    expect(percent(2, 3)).toBe('67%');
    expect(percent(1, 30)).toBe('3.3%');
    expect(percent(0, 30)).toBe('0%');
    expect(percent(0, 0)).toBe('0%');
  });

  it('rate: digits enough for a rate of a request every few minutes', async () => {
    const { rate } = await import('../src/report/format.js');
    expect([rate(0.0031), rate(0.05), rate(0.42), rate(4.56), rate(120.4), rate(0)]).toEqual(['0.0031', '0.05', '0.42', '4.6', '120', '0']);
  });
});

describe('usd', () => {
  it('shows two sums of the same answers alike, whatever order added their last bits (the run summary and status)', () => {
    // 0.0009045 a hair below and above: to the nano-dollar the ledger keeps, both are 904,500 nano-USD
    expect(usd(0.0009045 - 1e-15)).toBe(usd(0.0009045 + 1e-15));
    expect(usd(0.0009045 + 1e-15)).toBe('$0.000905');
    expect([usd(0), usd(4e-10), usd(0.0146), usd(1.234), usd(-0.5), usd(12_345.6), usd(null)]).toEqual([
      '$0.00',
      '$0.00',
      '$0.0146',
      '$1.23',
      '-$0.50',
      '$12,346',
      'unknown',
    ]);
  });
});

describe('usdApart', () => {
  it('adds digits until two amounts said as different read apart, and leaves ones that already do as usd says them', () => {
    expect(usdApart(0.0052512, 0.00525)).toEqual(['$0.005251', '$0.00525']);
    expect(usdApart(1.2346, 1.2301)).toEqual(['$1.235', '$1.23']);
    expect(usdApart(0.0146, 0.02)).toEqual(['$0.0146', '$0.02']);
    // equal to the nano-dollar: as near as the ledger tells them
    expect(usdApart(0.5, 0.5)).toEqual(['$0.50', '$0.50']);
  });
});
