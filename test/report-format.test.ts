import { describe, expect, it } from 'vitest';
import { wrap } from '../src/report/format.js';

describe('wrap', () => {
  it('breaks at spaces, cuts a word longer than the width, and loses nothing', () => {
    expect(wrap('price from the file prices.json', 12)).toEqual(['price from', 'the file', 'prices.json']);
    expect(wrap('abcdefghijklmnopqrstuvwxyz', 10)).toEqual(['abcdefghij', 'klmnopqrst', 'uvwxyz']);
    expect(wrap('', 10)).toEqual(['']);
  });

  it('keeps a run of spaces inside a line: a path with two spaces is shown as it is', () => {
    expect(wrap('--prices /data/Q4  final/prices.json', 80)).toEqual(['--prices /data/Q4  final/prices.json']);
    const lines = wrap('--prices /data/Q4  final/prices.json', 20);
    expect(lines.join(' ')).toBe('--prices /data/Q4  final/prices.json');
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(20);
  });
});
