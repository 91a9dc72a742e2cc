import { describe, expect, it } from 'vitest';
import { catalogSource, GENAI_PRICES_RELEASES, installedGenaiPricesVersion } from '../src/pricing/catalog.js';
import { costOf, worstCaseUsage } from '../src/pricing/cost.js';
import { parsePrice, parsePriceFile } from '../src/pricing/overrides.js';
import { loadPriceTable } from '../src/pricing/price-table.js';
import { buildStatusReport } from '../src/report/status.js';
import { countTextTokens, estimatePromptTokens, estimateRequestTokens } from '../src/provider/tokens.js';
import type { StatusSnapshot } from '../src/store/types.js';
import { tempDir } from './helpers/tmp.js';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { calcPrice } from '@pydantic/genai-prices';

const table = loadPriceTable();
const usage = { promptTokens: 1_000_000, completionTokens: 1_000_000 };

describe('prices', () => {
  it('come from genai-prices, labelled with the date of its data', () => {
    for (const m of [
      'gpt-4o',
      'gpt-4o-mini',
      'gpt-4.1',
      'gpt-4.1-mini',
      'gpt-4.1-nano',
      'o3-mini',
      'o4-mini',
      'gpt-3.5-turbo',
      'claude-sonnet-4-20250514',
      'gemini-2.5-flash',
    ]) {
      expect(table.lookup(m)?.source, m).toMatch(/^genai-prices \d{4}-\d{2}-\d{2}$/);
    }
    expect(costOf('gpt-4o-mini', usage, table)).toBeCloseTo(0.75, 12);
    // Upgrading the package needs its release date here, or the label falls back to the version number.
    expect(GENAI_PRICES_RELEASES[installedGenaiPricesVersion()]).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    expect(catalogSource()).toBe(`genai-prices ${GENAI_PRICES_RELEASES[installedGenaiPricesVersion()]}`);
  });

  it('prices dated snapshots and provider prefixes as their family', () => {
    expect(table.lookup('gpt-4o-mini-2024-07-18')?.perMillion).toEqual([0.15, 0.6]);
    expect(table.lookup('gpt-4o-2024-08-06')?.perMillion).toEqual([2.5, 10]);
    expect(table.lookup('gpt-4o-2024-05-13')?.perMillion).toEqual([5, 15]);
    expect(table.lookup('openai/gpt-4.1-nano')?.perMillion).toEqual([0.1, 0.4]);
  });

  it('cached prompt tokens cost the cache price; the batch price is half for OpenAI, unknown elsewhere', () => {
    const mini = table.lookup('gpt-4o-mini')!;
    expect(mini.cost({ promptTokens: 1_000_000, completionTokens: 0, cachedTokens: 1_000_000 })).toBeCloseTo(0.075, 12);
    expect(mini.batchCost(usage)).toBeCloseTo(0.375, 12);
    expect(table.lookup('deepseek-chat')!.batchCost(usage)).toBeNull();
  });

  it("a given price is the online one: a batch costs the share the model's provider takes, unknown where nobody knows the provider", () => {
    const given = loadPriceTable({ price: [1, 2], file: null });
    expect(given.lookup('gpt-4o-mini')!.cost(usage)).toBeCloseTo(1 + 2, 12);
    expect(given.lookup('gpt-4o-mini')!.batchCost(usage)).toBeCloseTo((1 + 2) / 2, 12);
    expect(given.lookup('claude-3-5-haiku-latest')!.batchCost(usage)).toBeCloseTo((1 + 2) / 2, 12);
    expect(given.lookup('deepseek-chat')!.batchCost(usage)).toBeNull();
    expect(given.lookup('my-own-finetune')!.batchCost(usage)).toBeNull();
    // the offline mock's batch lane stands in for OpenAI's
    expect(given.lookup('mock-1')!.batchCost(usage)).toBeCloseTo((1 + 2) / 2, 12);
    // without the catalog, no provider is known
    expect(
      loadPriceTable({ price: [1, 2], catalog: false })
        .lookup('gpt-4o-mini')!
        .batchCost(usage),
    ).toBeNull();
    // a price file's too, also for a model it names by its family or without the provider's prefix
    const env = loadPriceTable({ env: JSON.stringify({ 'gpt-4o-mini': [4, 8] }) });
    expect(env.lookup('gpt-4o-mini')!.batchCost(usage)).toBeCloseTo((4 + 8) / 2, 12);
    expect(env.lookup('openai/gpt-4o-mini-2024-07-18')!.batchCost(usage)).toBeCloseTo((4 + 8) / 2, 12);
  });

  it('a flat price worked out here (and kept in the cache) costs what genai-prices says, cached and batch tokens included', () => {
    const u = { promptTokens: 12_345, completionTokens: 678, cachedTokens: 2_000 };
    const theirs = { input_tokens: 12_345, cache_read_tokens: 2_000, output_tokens: 678 };
    for (const m of ['gpt-4o-mini', 'gpt-4.1-nano', 'claude-3-5-haiku-latest', 'o3-mini', 'gemini-2.5-flash']) {
      const ours = table.lookup(m)!;
      const total = calcPrice(theirs, m)!.total_price;
      expect(ours.cost(u), m).toBeCloseTo(total, 15);
      expect(ours.cost({ promptTokens: 10, completionTokens: 1 }), m).toBeCloseTo(
        calcPrice({ input_tokens: 10, output_tokens: 1 }, m)!.total_price,
        15,
      );
      expect(ours.batchCost(u), m).toBeCloseTo(total / 2, 15);
    }
  });

  it('a tiered price is worked out per request by the library', () => {
    const pro = table.lookup('gemini-2.5-pro')!;
    expect(pro.perMillion).toEqual([1.25, 10]);
    expect(pro.cost({ promptTokens: 100_000, completionTokens: 0 })).toBeCloseTo(0.125, 12);
    expect(pro.cost({ promptTokens: 300_000, completionTokens: 0 })).toBeCloseTo(0.75, 12); // all at the >200k rate
  });

  it('an unknown model costs unknown, not 0; the mock model costs 0', () => {
    expect(costOf('llama3.1:8b', usage, table)).toBeNull();
    expect(costOf('gpt-4o-minimal', usage, table)).toBeNull();
    expect(costOf('mock', usage, table)).toBe(0);
    expect(costOf('mock-echo', usage, table)).toBe(0);
  });

  it("the offline mock's answers cost what --prices FILE says of their model, as --price: a budget tried offline; LLMQ_PRICES leaves them free", () => {
    const file = join(tempDir(), 'p.json');
    writeFileSync(file, '{"gpt-4o": [2.5, 10]}');
    const env = '{"gpt-4o-mini": [3, 4]}';
    const mock = loadPriceTable({ free: true, file, env });
    expect(mock.lookup('gpt-4o')).toMatchObject({ perMillion: [2.5, 10], source: `--prices ${file}` });
    expect(costOf('gpt-4o', usage, mock)).toBeCloseTo(2.5 + 10, 12);
    // set for real runs, the environment's prices do not bill the mock's stand-ins
    expect(costOf('gpt-4o-mini', usage, mock)).toBe(0);
    expect(costOf('mock-echo', usage, loadPriceTable({ file }))).toBe(0);
  });

  it('--price applies to every model, even unknown ones; files and LLMQ_PRICES win over genai-prices', () => {
    const t = loadPriceTable({ price: parsePrice('0.15,0.60') });
    expect(costOf('llama3.1:8b', usage, t)).toBeCloseTo(0.75, 12);
    expect(t.lookup('gpt-4o')?.source).toBe('--price');
    const file = join(tempDir(), 'p.json');
    writeFileSync(file, '{"gpt-4o": [1, 2], "local": [0, 0]}');
    const f = loadPriceTable({ file, env: '{"gpt-4o": [7, 8], "gpt-4o-mini": [3, 4]}' });
    expect(f.lookup('gpt-4o')).toMatchObject({ perMillion: [1, 2], source: `--prices ${file}` });
    expect(f.lookup('gpt-4o-2024-08-06')?.perMillion).toEqual([1, 2]);
    expect(f.lookup('gpt-4o-mini')).toMatchObject({ perMillion: [3, 4], source: 'LLMQ_PRICES' });
    expect(f.lookup('local')?.cost(usage)).toBe(0);
    expect(f.lookup('gpt-4.1')?.source).toMatch(/^genai-prices/);
  });

  it('validates --price and price files, naming what is wrong', () => {
    for (const bad of ['0.15', '1,2,3', 'a,b', '-1,2', ',2', '']) expect(() => parsePrice(bad), bad).toThrow(/--price.*input,output/);
    expect(() => parsePriceFile('[1,2]', 'f.json')).toThrow(/f\.json to be a JSON object.*got an array/);
    expect(() => parsePriceFile('{"m": [1]}', 'f.json')).toThrow(/price of "m" in f\.json.*\[1\]/);
    expect(() => parsePriceFile('{nope', 'f.json')).toThrow(/Expected f\.json to be JSON/);
    // a hand-edited file's mistake, by line and column, on one line whichever way Node words it
    const missingComma = '{\n  "gpt-4o": [2.5, 10],\n  "gpt-4o-mini": [0.15, 0.6]\n  "x": [1, 2]\n}\n';
    expect(() => parsePriceFile(missingComma, 'p.json')).toThrow(
      `Expected p.json to be JSON like {"gpt-4o": [2.5, 10]} (line 4, column 3): Expected ',' or '}' after property value.`,
    );
    // the token's first place is not where the mistake is; nor is a mistake after the JSON "in" it
    expect(() => parsePriceFile('{"aaaaaaaaaaaa": [1], "b":]}', 'p.json')).toThrow('(line 1, column 27): Unexpected token');
    expect(() => parsePriceFile('{"m": [1, 2]}\n}', 'p.json')).toThrow('(line 2, column 1): Unexpected non-whitespace character');
    // quoted from the start and cut: the token is the one ten characters before the cut, not its first place
    expect(() => parsePriceFile('{"type": e, "properties": {}}', 'p.json')).toThrow('(line 1, column 10): Unexpected token');
    // the whole text quoted, the token there twice: no place rather than a wrong one
    expect(() => parsePriceFile('{"type": e}', 'p.json')).toThrow(
      /^Expected p\.json to be JSON like \{"gpt-4o": \[2\.5, 10\]\}: Unexpected token 'e'\.$/,
    );
    const trailingComma = '{\n  "gpt-4o": [2.5, 10],\n  "gpt-4o-mini": [0.15, 0.6,],\n}\n';
    expect(() => parsePriceFile(trailingComma, 'p.json')).toThrow(
      `Expected p.json to be JSON like {"gpt-4o": [2.5, 10]} (line 3, column 29): Unexpected token ']' (a comma before it ends nothing: take it out).`,
    );
    expect(() => parsePriceFile('{\n  "m": [1, 2],\n}', 'p.json')).toThrow(
      '(line 3, column 1): Expected double-quoted property name (a comma before it ends nothing: take it out).',
    );
    expect(() => loadPriceTable({ file: '/no/such/prices.json' })).toThrow(
      /Cannot read the price file \/no\/such\/prices\.json given by --prices: no such file\./,
    );
  });

  it('the worst case of a request covers its framing and all of max_tokens', () => {
    const request = JSON.stringify({
      model: 'gpt-4o-mini',
      max_tokens: 300,
      messages: [
        { role: 'system', content: 'Be terse.' },
        { role: 'user', content: 'Summarize: the quick brown fox.' },
      ],
    });
    const worst = worstCaseUsage(request);
    const text = estimatePromptTokens(JSON.parse(request));
    // OpenAI adds about 3 tokens per message and 3 for the reply: the worst case must be above that.
    expect(worst.promptTokens).toBeGreaterThan(text + 3 * 2 + 3);
    expect(worst.completionTokens).toBe(300);
    expect(worstCaseUsage(JSON.stringify({ model: 'x', messages: [] })).completionTokens).toBeNull();
  });

  it("a request's schema (response_format) and tools are input the model reads: the estimate counts them, the worst case once", () => {
    const schema = {
      type: 'object',
      properties: { summary: { type: 'string' }, urgency: { enum: ['low', 'high'] } },
      required: ['summary'],
    };
    const tools = [
      { type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } },
    ];
    const plain = { model: 'x', max_tokens: 50, messages: [{ role: 'user', content: 'Extract the ticket: the printer is on fire' }] };
    const asking = { ...plain, response_format: { type: 'json_schema', json_schema: { name: 't', schema, strict: true } } };
    const text = estimatePromptTokens(plain);
    expect(estimatePromptTokens(asking)).toBe(text + countTextTokens(JSON.stringify(schema)));
    expect(estimatePromptTokens({ ...plain, tools })).toBe(text + countTextTokens(JSON.stringify(tools)));
    expect(estimateRequestTokens(asking)).toBe(estimatePromptTokens(asking) + 50);
    // the worst case counts the request's JSON besides its messages' text: the schema in it, once
    const framing = { ...asking, messages: [{ role: 'user', content: '' }] };
    expect(worstCaseUsage(JSON.stringify(asking)).promptTokens).toBe(text + countTextTokens(JSON.stringify(framing)));
  });

  it('counts max_tokens once for each of the n choices a request asks for (an OpenAI Batch line may), as the provider bills and limits them', () => {
    const request = { model: 'x', messages: [{ role: 'user', content: 'hi' }], max_tokens: 300 };
    expect(worstCaseUsage(JSON.stringify({ ...request, n: 5 })).completionTokens).toBe(1500);
    expect(estimateRequestTokens({ ...request, n: 5 })).toBe(estimatePromptTokens(request) + 1500);
    // n absent, 1, or not a whole number above 1: one choice
    for (const n of [undefined, 1, 0, 2.5, '3']) expect(worstCaseUsage(JSON.stringify({ ...request, n })).completionTokens).toBe(300);
  });

  it('status: a model without a price makes the total unknown and is named', () => {
    const snap: StatusSnapshot = {
      counts: { pending: 1, running: 0, done: 2, failed: 0 },
      total: 3,
      orphanedAnswers: 0,
      items: 3,
      tokens: { prompt: 300, completion: 30 },
      byModel: [
        // answered before llmq kept costs: priced now
        {
          model: 'gpt-4o',
          jobs: 2,
          done: 1,
          pending: 1,
          running: 0,
          prompt: 200,
          completion: 20,
          donePrompt: 200,
          doneCompletion: 20,
          storedUsd: 0,
          unpricedPrompt: 200,
          unpricedCompletion: 20,
          dropped: 0,
        },
        {
          model: 'my-finetune',
          jobs: 1,
          done: 1,
          pending: 0,
          running: 0,
          prompt: 100,
          completion: 10,
          donePrompt: 100,
          doneCompletion: 10,
          storedUsd: 0,
          unpricedPrompt: 100,
          unpricedCompletion: 10,
          dropped: 0,
        },
      ],
      failures: [],
      retrying: 0,
      oldestPendingAt: null,
      activeRuns: [],
      lastRun: null,
      lanes: [],
      spend: [],
      rejected: [],
    };
    const r = buildStatusReport(snap, { now: Date.now(), prices: table, db: 'x.db' });
    expect(r.cost.usd).toBeNull();
    expect(r.cost.unpriced).toEqual(['my-finetune']);
    expect(r.cost.knownUsd).toBeCloseTo((200 * 2.5 + 20 * 10) / 1e6, 12);
    // the job left is a gpt-4o one: an answer like its first, at today's price
    expect(r.cost.remainingUsd).toBeCloseTo((200 * 2.5 + 20 * 10) / 1e6, 12);
    expect(r.etaSeconds).toBeNull();
  });
});
