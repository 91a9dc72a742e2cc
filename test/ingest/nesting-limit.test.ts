import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../src/ingest/depth.js';
import { items, run, tempStore } from './helpers.js';

const arrays = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
const objects = (levels: number) => '{"a":'.repeat(levels) + '1' + '}'.repeat(levels);
const TOO_DEEP = `nested deeper than ${MAX_JSON_DEPTH} levels (llmq's limit for JSON documents)`;

describe('JSON nesting limit', () => {
  it('rejects lines nested 5,000 levels deep by line number and enqueues the good lines of the same batch', async () => {
    const store = tempStore();
    const lines = [
      '{"id":"good-1","text":"first"}',
      `{"id":"deep-array","text":"x","m":${arrays(5000)}}`,
      `{"id":"deep-object","text":"x","m":${objects(5000)}}`,
      // An OpenAI Batch body goes through key sorting for its hash: the other place that recursed.
      `{"custom_id":"deep-body","body":{"model":"m","messages":[{"role":"user","content":"hi"}],"x":${arrays(5000)}}}`,
      arrays(5000),
      '{"id":"good-2","text":"second"}',
    ];
    const s = await run(store, ['-'], { stdin: Readable.from([lines.join('\n') + '\n']) });
    // each with the id of the item it names, read from the line (one with no fields: its line's)
    const ids = ['deep-array', 'deep-object', 'deep-body', '-:5'];
    expect(s.rejections).toEqual([2, 3, 4, 5].map((line, i) => ({ path: '-', line, id: ids[i], reason: TOO_DEEP })));
    expect(items(store).map((i) => i.id)).toEqual(['good-1', 'good-2']);
  });

  it(`accepts a line nested exactly ${MAX_JSON_DEPTH} levels (the line's own object is level 1) and stores it`, async () => {
    const store = tempStore();
    const at = (levels: number) => `{"id":"d${levels}","text":"x","m":${arrays(levels - 1)}}`;
    const batch = (levels: number) =>
      `{"custom_id":"b${levels}","body":{"model":"m","messages":[{"role":"user","content":"hi"}],"x":${arrays(levels - 2)}}}`;
    const input = [at(MAX_JSON_DEPTH), at(MAX_JSON_DEPTH + 1), batch(MAX_JSON_DEPTH), batch(MAX_JSON_DEPTH + 1)].join('\n');
    const s = await run(store, ['-'], { stdin: Readable.from([input]) });
    expect(s.rejections).toEqual([
      { path: '-', line: 2, id: `d${MAX_JSON_DEPTH + 1}`, reason: TOO_DEEP },
      { path: '-', line: 4, id: `b${MAX_JSON_DEPTH + 1}`, reason: TOO_DEEP },
    ]);
    const stored = items(store);
    expect(stored.map((i) => i.id)).toEqual([`d${MAX_JSON_DEPTH}`, `b${MAX_JSON_DEPTH}`]);
    expect(JSON.parse(stored[0]!.meta!).m).toEqual(JSON.parse(arrays(MAX_JSON_DEPTH - 1)));
  });

  it('measures depth without recursion, so 100,000 levels is an answer, not a stack overflow', () => {
    const deep = JSON.parse(arrays(100_000));
    expect(nestsDeeperThan(deep, 99_999)).toBe(true);
    expect(nestsDeeperThan(deep, 100_000)).toBe(false);
    expect(nestsDeeperThan({ a: [1, { b: [] }], c: 'x' }, 3)).toBe(true);
    expect(nestsDeeperThan({ a: [1, { b: 'x' }], c: [] }, 3)).toBe(false);
    expect(nestsDeeperThan('not an object', 0)).toBe(false);
  });
});
