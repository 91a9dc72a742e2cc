import { describe, expect, it } from 'vitest';
import { seededPicks } from './helpers/random.js';
import { compactJson } from '../src/report/compact-json.js';

/** What the export wrote before compactJson: the body parsed and written again; undefined when it is not JSON. */
function reference(text: string): string | undefined {
  try {
    return JSON.stringify(JSON.parse(text));
  } catch {
    return undefined;
  }
}

/** compactJson may decline (null), but what it answers is exactly the reference, and never for text that is not JSON. */
function expectSafe(text: string): string | null {
  const got = compactJson(text);
  if (got !== null) expect([text, got]).toEqual([text, reference(text)]);
  return got;
}

const BODY = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  created: 1_754_000_000,
  model: 'gpt-4o-mini',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Line one,\n"two"\ttab — ünï' }, logprobs: null, finish_reason: 'stop' }],
  usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120, cost: 0.0000123, ok: true, neg: -5, big: 1e21 },
};

describe('compactJson', () => {
  it('gives a provider body, compact or pretty-printed, as JSON.stringify writes it', () => {
    for (const indent of [0, 2, '\t']) expect(expectSafe(JSON.stringify(BODY, null, indent))).toBe(JSON.stringify(BODY));
    expect(expectSafe(' \r\n[ 1 , {"a" : [ ] , "b":{ } } ,"x" ] \n')).toBe('[1,{"a":[],"b":{}},"x"]');
  });

  it('declines whatever writing it again would change, and what is not JSON', () => {
    const changed = [
      '{"a":1.0}',
      '{"a":1E5}',
      '{"a":-0}',
      '[12345678901234567]',
      '[-12345678901234567]',
      '{"a":00}',
      '{"a":1e999}',
      '{"a":0.10000000000000001}',
      '{"a":"\\/"}',
      '{"a":"\\u00e9"}',
      '{"a":"\\u001f"}',
      '{"a":1,"a":2}',
      '{"b":1,"1":2}',
      '"\ud83d\ude00"',
      '"\\ud800"',
    ];
    const invalid = [
      '',
      ' ',
      'not json {',
      '{',
      '{"a":1,}',
      '[1,]',
      '{"a" 1}',
      '{a:1}',
      '01',
      '1.',
      '.5',
      '+1',
      'tru',
      'nul',
      '"a',
      '"\t"',
      '[1] x',
      '{"a":1}}',
    ];
    for (const text of [...changed, ...invalid]) expect([text, expectSafe(text)]).toEqual([text, null]);
  });

  it('never answers other than JSON.parse then JSON.stringify, over random and mangled text', () => {
    const { rand, pick } = seededPicks(7);
    const strings = ['', 'a', 'é', '"', '\\', '\n', '\u0001', '\u2028', '/', '\ud800', '😀', '1', '12', '__proto__', 'x y'];
    const numbers = [0, -0, 1, -1, 0.5, 1e-7, 123456789012, 999999999999999, -999999999999999, 1e21, 2 ** 53, 0.1 + 0.2, -1.5e-300];
    const value = (depth: number): unknown => {
      const k = rand(depth > 3 ? 4 : 6);
      if (k === 0) return pick(strings) + pick(strings);
      if (k === 1) return pick(numbers);
      if (k === 2) return pick([true, false, null]);
      if (k === 3) return pick(strings);
      if (k === 4) return Array.from({ length: rand(4) }, () => value(depth + 1));
      return Object.fromEntries(Array.from({ length: rand(4) }, () => [pick(strings) + pick(strings), value(depth + 1)]));
    };
    const marks = ['', ' ', '\n', ',', ':', '"', '\\', '0', '.', 'e', '-', '{', '}', '[', ']', '/', 'u'];
    let answered = 0;
    for (let n = 0; n < 3000; n++) {
      const text = JSON.stringify(value(0), null, pick([0, 1, 2]));
      if (expectSafe(text) !== null) answered++;
      // the same text with one character replaced, inserted or dropped
      const at = rand(text.length + 1);
      expectSafe(text.slice(0, at) + pick(marks) + text.slice(at + rand(2)));
    }
    expect(answered).toBeGreaterThan(1000);
  });

  it('answers a body like the last one (same keys and nesting, other values) as the reference does, whatever its values', () => {
    const { rand, pick } = seededPicks(3);
    // values as raw JSON text: most fair, some that writing again changes, some not JSON at all
    const fair = [
      '"x"',
      '"chatcmpl-1"',
      '"a \\"quoted\\" \\\\ word\\n"',
      '""',
      '"é 😀"',
      '0',
      '5',
      '-3',
      '0.5',
      '1e-7',
      '123456789012345',
      'true',
      'null',
    ];
    const unfair = [
      '"\\/"',
      '"\\u00e9"',
      '"\t"',
      '"\n"',
      '"\u0001"',
      '"\ud800"',
      '1.0',
      '1E5',
      '-0',
      '01',
      '12345678901234567',
      '"a',
      'a"',
      '"x" "y"',
      '1 2',
      '[]',
      '{}',
      'tru',
      '',
    ];
    type Shape = { kind: 'leaf' } | { kind: 'array'; items: Shape[] } | { kind: 'object'; keys: string[]; items: Shape[] };
    const shape = (depth: number): Shape => {
      const k = rand(depth > 2 ? 1 : 3);
      if (k === 0) return { kind: 'leaf' };
      const items = Array.from({ length: 1 + rand(4) }, () => shape(depth + 1));
      if (k === 1) return { kind: 'array', items };
      return { kind: 'object', keys: items.map((_, n) => pick(['"id"', '"a b"', '"choices"', '"1x"', '"q\\"k"']) + n), items };
    };
    // keys are made unique by their position (the number after the quote is outside it: fixed below)
    const text = (sh: Shape, indent: string, depth: number, leaf: () => string): string => {
      if (sh.kind === 'leaf') return leaf();
      const nl = indent ? '\n' + indent.repeat(depth + 1) : '';
      const end = indent ? '\n' + indent.repeat(depth) : '';
      const sep = indent ? ': ' : ':';
      if (sh.kind === 'array') return `[${sh.items.map((i) => nl + text(i, indent, depth + 1, leaf)).join(',')}${end}]`;
      const keys = sh.keys.map((k) => k.replace(/"(\d+)$/, '$1"'));
      return `{${sh.items.map((i, n) => nl + keys[n] + sep + text(i, indent, depth + 1, leaf)).join(',')}${end}}`;
    };
    let answered = 0;
    for (let n = 0; n < 300; n++) {
      const sh = shape(0);
      const indent = pick(['', '', '  ', '\t']);
      for (let m = 0; m < 20; m++) {
        // mostly bodies of fair values only, as a provider's are; some with one unfair value or more
        const rate = m % 3 ? 0 : 8;
        const body = text(sh, indent, 0, () => (rate && !rand(rate) ? pick(unfair) : pick(fair)));
        if (expectSafe(body) !== null) answered++;
        // the same body with other whitespace, or one character more or less
        const at = rand(body.length + 1);
        expectSafe(body.slice(0, at) + pick([' ', '\n', '"', ',', '0', '\\', '}', ']']) + body.slice(at + rand(2)));
      }
    }
    expect(answered).toBeGreaterThan(2500);
  });
});
