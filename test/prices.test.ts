import { describe, expect, it } from 'vitest';
import { BUILTIN_PRICES, costOf, loadPriceTable, parsePrice, parsePriceFile, priceOf } from '../src/report/prices.js';
import { buildStatusReport } from '../src/report/status.js';
import type { StatusSnapshot } from '../src/store/types.js';

const table = loadPriceTable();
const usage = { promptTokens: 1_000_000, completionTokens: 1_000_000 };

describe('prices', () => {
  it('has the common models', () => {
    for (const m of ['gpt-4o', 'gpt-4o-mini', 'gpt-4.1', 'gpt-4.1-mini', 'gpt-4.1-nano', 'o3-mini', 'o4-mini', 'gpt-3.5-turbo']) {
      expect(BUILTIN_PRICES[m], m).toHaveLength(2);
    }
    expect(costOf('gpt-4o-mini', usage, table)).toBeCloseTo(0.75, 12);
  });

  it('prices dated snapshots and provider prefixes as their family, the longest name first', () => {
    expect(priceOf('gpt-4o-mini-2024-07-18', table)).toEqual([0.15, 0.6]);
    expect(priceOf('gpt-4o-2024-08-06', table)).toEqual([2.5, 10]);
    expect(priceOf('gpt-4o-2024-05-13', table)).toEqual([5, 15]);
    expect(priceOf('openai/gpt-4.1-nano', table)).toEqual([0.1, 0.4]);
  });

  it('an unknown model costs unknown, not 0; the mock model costs 0', () => {
    expect(costOf('llama3.1:8b', usage, table)).toBeNull();
    expect(costOf('gpt-4o-minimal', usage, table)).toBeNull();
    expect(costOf('mock', usage, table)).toBe(0);
    expect(costOf('mock-echo', usage, table)).toBe(0);
  });

  it('--price applies to every model, even unknown ones', () => {
    const t = loadPriceTable({ price: parsePrice('0.15,0.60') });
    expect(costOf('llama3.1:8b', usage, t)).toBeCloseTo(0.75, 12);
  });

  it('validates --price and price files, naming what is wrong', () => {
    for (const bad of ['0.15', '1,2,3', 'a,b', '-1,2', ',2', '']) expect(() => parsePrice(bad), bad).toThrow(/--price.*input,output/);
    expect(() => parsePriceFile('[1,2]', 'f.json')).toThrow(/f\.json to be a JSON object.*got an array/);
    expect(() => parsePriceFile('{"m": [1]}', 'f.json')).toThrow(/price of "m" in f\.json.*\[1\]/);
    expect(() => parsePriceFile('{nope', 'f.json')).toThrow(/Expected f\.json to be JSON/);
    expect(() => loadPriceTable({ file: '/no/such/prices.json' })).toThrow(/Cannot read the price file \/no\/such\/prices\.json given by --prices: ENOENT/);
    expect(loadPriceTable({ env: '{"local": [0, 0]}' }).models.local).toEqual([0, 0]);
  });

  it('status: a model without a price makes the total unknown and is named', () => {
    const snap: StatusSnapshot = {
      counts: { pending: 1, running: 0, done: 2, failed: 0 }, total: 3, items: 3, tokens: { prompt: 300, completion: 30 },
      byModel: [
        { model: 'gpt-4o', jobs: 2, done: 1, prompt: 200, completion: 20 },
        { model: 'my-finetune', jobs: 1, done: 1, prompt: 100, completion: 10 },
      ],
      failures: [], retrying: 0, oldestPendingAt: null, activeRuns: [], lastRun: null, lanes: [],
    };
    const r = buildStatusReport(snap, { now: Date.now(), prices: table, db: 'x.db' });
    expect(r.cost.usd).toBeNull();
    expect(r.cost.unpriced).toEqual(['my-finetune']);
    expect(r.cost.knownUsd).toBeCloseTo((200 * 2.5 + 20 * 10) / 1e6, 12);
    expect(r.cost.remainingUsd).toBeNull();
    expect(r.etaSeconds).toBeNull();
  });
});
