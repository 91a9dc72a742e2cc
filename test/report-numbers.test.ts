import { describe, expect, it } from 'vitest';
import { signedTokens } from '../src/report/estimate-text.js';
import { usdValue, withoutFractionNoise } from '../src/pricing/usd-value.js';
import { costOf } from '../src/pricing/cost.js';
import { loadPriceTable } from '../src/pricing/price-table.js';

describe('numbers people and programs read', () => {
  it('money without the noise of binary fractions, in costs and in --json reports', () => {
    // an export showed "cost_usd":0.00006584999999999999
    expect(usdValue(0.00006584999999999999)).toBe(0.00006585);
    // 1 token in and 1 out at $0.1/$0.2 per million: the float sum is 3.0000000000000004e-7
    const table = loadPriceTable({ price: [0.1, 0.2], catalog: false });
    expect((1 * 0.1 + 1 * 0.2) / 1e6).not.toBe(3e-7);
    expect(costOf('any', { promptTokens: 1, completionTokens: 1 }, table)).toBe(3e-7);
    expect(JSON.stringify({ high: 0.16503499999999993, jobs: 3, none: null }, withoutFractionNoise)).toBe(
      '{"high":0.165035,"jobs":3,"none":null}',
    );
    expect(usdValue(null)).toBeNull();
  });

  it("a correction of the prompt's tokens is signed once, with thousands separated", () => {
    expect(signedTokens(5312.66)).toBe('+5,312.7');
    expect(signedTokens(-161.4)).toBe('-161.4');
    expect(signedTokens(7)).toBe('+7.0');
  });
});
