import { describe, expect, it } from 'vitest';
import { seededPicks } from './helpers/random.js';
import { CSV_COLUMNS } from '../src/report/csv-columns.js';
import { csvField, csvRow, jsonlLine, jsonlRecord, openAiBatchLine, openAiBatchRecord } from '../src/report/export.js';
import { JOB_STATES, type ExportRow } from '../src/store/types.js';
import { finishReasonOf } from '../src/provider/finish.js';

// Each format's line is built by hand, with fast paths for texts with nothing to escape or quote.
// Whatever the row, the line must be what the straightforward encoding writes.

/** One done item, for the cases that change a field or two of it. */
const DONE_ROW: ExportRow = {
  id: 'doc-1',
  source: 'in.jsonl',
  meta: null,
  key: 'k',
  state: 'done',
  model: 'm',
  output: 'out',
  response: null,
  error: null,
  attempts: 1,
  usage: null,
  latencyMs: null,
  costUsd: null,
};

/** A CSV line the long way: each column looked up by name and written by csvField. */
function csvReference(r: ExportRow): string {
  const value: Record<(typeof CSV_COLUMNS)[number], unknown> = {
    id: r.id,
    key: r.key,
    state: r.state,
    model: r.model,
    attempts: r.attempts,
    prompt_tokens: r.usage?.promptTokens,
    completion_tokens: r.usage?.completionTokens,
    latency_ms: r.latencyMs,
    source: r.source,
    output: r.output,
    error: r.error,
    meta: r.meta,
    cost_usd: r.costUsd,
    finish_reason: r.state === 'done' ? finishReasonOf(r.response) : null,
  };
  return CSV_COLUMNS.map((c) => csvField(value[c])).join(',') + '\r\n';
}

function expectSame(r: ExportRow): void {
  expect([r, jsonlLine(r)]).toEqual([r, JSON.stringify(jsonlRecord(r)) + '\n']);
  expect([r, csvRow(r)]).toEqual([r, csvReference(r)]);
  expect([r, openAiBatchLine(r)]).toEqual([r, JSON.stringify(openAiBatchRecord(r)) + '\n']);
}

describe('export lines', () => {
  it('write what the straightforward encoding writes, over random rows with and without text to escape or quote', () => {
    const { rand, pick } = seededPicks(11);
    // mostly plain text, as most rows are, so the fast paths are taken as often as not
    const texts = ['plain text', 'doc-00000001', 'a,b', 'say "hi"', 'back\\slash', 'line\nbreak', 'cr\r', 'tab\t', '\u0001', '\u007f'];
    const more = ['é ü', '\u2028', '😀', '\ud800', '\udfff', '', ' ', '{"a":1}', '/', '0'];
    const text = () => (rand(3) ? `${pick(texts.slice(0, 2))} ${rand(1000)}` : pick(texts) + pick(more));
    const num = () => pick([0, 1, 52, 1.5, 0.0000222, 1e-7, 1e21, -3, Number.NaN, Number.POSITIVE_INFINITY]);
    const bodies = [
      null,
      'not json',
      '{"id":"x","choices":[]}',
      '{ "id" : "x" }',
      '{"a":1.0}',
      '{"a":"\\u00e9"}',
      '[1,2]',
      '{"choices":[{"message":{"content":"cut"},"finish_reason":"length"}]}',
      '{"choices":[{"message":{"content":null,"refusal":"no"},"finish_reason":"stop"}]}',
    ];
    let fast = 0;
    for (let n = 0; n < 5000; n++) {
      const r: ExportRow = {
        id: text(),
        source: text(),
        meta: rand(3) ? null : { tag: text(), n: num(), nested: { ok: rand(2) === 0 } },
        key: rand(4) ? 'a'.repeat(64) : text(),
        state: pick(JOB_STATES),
        model: rand(4) ? 'gpt-4o-mini' : text(),
        output: rand(4) ? text() : null,
        response: pick(bodies),
        error: rand(3) ? null : text(),
        attempts: rand(4),
        usage: rand(4) ? { promptTokens: rand(100), completionTokens: rand(100) } : null,
        latencyMs: rand(3) ? rand(5000) : null,
        costUsd: rand(2) ? num() : null,
      };
      expectSame(r);
      if (!/["\\\u0000-\u001f\ud800-\udfff]/.test(r.id + r.source + r.key + r.model + (r.output ?? '') + (r.error ?? ''))) fast++;
    }
    expect(fast).toBeGreaterThan(1000);
  });

  it('write a text that is not a string (a value SQLite kept as another type) as the straightforward encoding does', () => {
    const base = DONE_ROW;
    for (const odd of [42, 1.5, { a: 1 }, [1, 'x']] as unknown as string[]) {
      expectSame({ ...base, output: odd });
      expectSame({ ...base, id: odd });
      expectSame({ ...base, error: odd });
    }
  });

  it('mark how each answer ended, from the stored response: cut off, refused, stopped, or not said', () => {
    const body = (choice: object) => JSON.stringify({ id: 'c', choices: [{ index: 0, ...choice }], usage: {} });
    const pretty = (choice: object) => JSON.stringify({ choices: [choice] }, null, 2);
    const cases: Array<[string | null, string | null]> = [
      [body({ message: { content: 'all of it', refusal: null }, finish_reason: 'stop' }), 'stop'],
      [pretty({ message: { content: 'all of it', refusal: null }, finish_reason: 'stop' }), 'stop'],
      [body({ message: { content: 'half of i' }, finish_reason: 'length' }), 'length'],
      [pretty({ message: { content: 'half' }, finish_reason: 'length' }), 'length'],
      [body({ message: { content: null, refusal: "I can't help with that" }, finish_reason: 'stop' }), 'refusal'],
      [body({ message: { content: '' }, finish_reason: 'content_filter' }), 'content_filter'],
      // an answer that only quotes the words is an answer
      [body({ message: { content: 'the "finish_reason": "length" and "refusal": "x" fields' }, finish_reason: 'stop' }), 'stop'],
      [body({ message: { content: 'a tool' }, finish_reason: 'tool_calls' }), 'tool_calls'],
      // n > 1: the first choice's finish, not any "stop" of another
      [
        JSON.stringify({
          choices: [
            { index: 0, message: { content: 'cu' }, finish_reason: 'length' },
            { index: 1, message: { content: 'whole' }, finish_reason: 'stop' },
          ],
        }),
        'length',
      ],
      [body({ message: { content: 'no reason given' } }), null],
      ['not json', null],
      [null, null],
    ];
    for (const [response, finish] of cases) expect([response, finishReasonOf(response)]).toEqual([response, finish]);
    const row: ExportRow = {
      ...DONE_ROW,
      output: 'half of i',
      response: body({ message: { content: 'half of i' }, finish_reason: 'length' }),
    };
    expect(JSON.parse(jsonlLine(row)).finish_reason).toBe('length');
    expect(csvRow(row).trimEnd().split(',').at(-1)).toBe('length');
    // not done: no answer to mark, whatever an earlier response said
    expect(JSON.parse(jsonlLine({ ...row, state: 'pending' })).finish_reason).toBeNull();
  });
  it('openai-batch: a request the provider refused is its response (status and error body), as the Batch API writes it; other failures an error', () => {
    const failed = (error: string): ExportRow => ({ ...DONE_ROW, state: 'failed', output: null, error, attempts: 5 });
    expect(openAiBatchRecord(failed('HTTP 400: Invalid value for temperature.'))).toMatchObject({
      response: {
        status_code: 400,
        request_id: 'k',
        body: { error: { message: 'Invalid value for temperature.', type: null, param: null, code: null } },
      },
      error: null,
    });
    expect(openAiBatchRecord(failed('gave up after 5 attempts: HTTP 500: The server had an error.'))).toMatchObject({
      response: { status_code: 500, body: { error: { message: 'The server had an error.' } } },
      error: null,
    });
    expect(openAiBatchRecord(failed('gave up after 5 attempts: timed out after 60s'))).toMatchObject({
      response: null,
      error: { code: 'request_failed', message: 'gave up after 5 attempts: timed out after 60s' },
    });
    expect(openAiBatchRecord(failed('gave up after 5 attempts; last error: HTTP 502: Bad gateway'))).toMatchObject({
      response: { status_code: 502, body: { error: { message: 'Bad gateway' } } },
    });
    // a 200 whose body was no completion is no answer: never a response a reader takes for one
    expect(openAiBatchRecord(failed('gave up after 5 attempts: HTTP 200: invalid completion body: no choices'))).toMatchObject({
      response: null,
      error: { message: 'gave up after 5 attempts: HTTP 200: invalid completion body: no choices' },
    });
    expect(openAiBatchRecord({ ...DONE_ROW, state: 'pending', output: null })).toMatchObject({
      response: null,
      error: { code: 'job_pending' },
    });
    for (const r of [failed('HTTP 400: x'), failed('gave up after 2 attempts: HTTP 503: busy'), failed('reset')]) expectSame(r);
  });
});
