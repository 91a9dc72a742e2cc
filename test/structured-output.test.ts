import { copyFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readSchemaFile, strictModeProblems } from '../src/ingest/schema-file.js';
import { mockAnswer } from '../src/provider/mock.js';
import { checkAnswer, cutOffRoom, outputProblem } from '../src/provider/structured-output.js';
import { int, usd } from '../src/report/format.js';
import { runCli } from './helpers/cli.js';
import { enqueueJsonl, jsonLines, readDb } from './helpers/e2e.js';
import { completionBody, reply } from './helpers/fake-openai.js';
import { startFake } from './helpers/start-fake.js';
import { tempDir } from './helpers/tmp.js';

const TICKET = {
  type: 'object',
  additionalProperties: false,
  required: ['summary', 'urgency', 'tags'],
  properties: {
    summary: { type: 'string', maxLength: 40 },
    urgency: { enum: ['low', 'high'] },
    tags: { type: 'array', items: { $ref: '#/$defs/tag' } },
  },
  $defs: { tag: { type: 'string' } },
};

const asking = (schema: object) =>
  JSON.stringify({ model: 'm', messages: [], response_format: { type: 'json_schema', json_schema: { name: 't', strict: true, schema } } });

function schemaFile(content: unknown, name = 'ticket.schema.json'): string {
  const file = join(tempDir(), name);
  writeFileSync(file, typeof content === 'string' ? content : JSON.stringify(content));
  return file;
}

describe('answers held to the JSON their request asks for (response_format)', () => {
  it('says what is wrong with an answer: not JSON, not of the schema, a field of the wrong type; nothing for a request that asks for no JSON', () => {
    const request = asking(TICKET);
    expect(outputProblem(request, '{"summary":"s","urgency":"high","tags":["a"]}')).toBeNull();
    expect(outputProblem(request, '{"summary": "s", oops')).toBe(
      'the answer is not JSON, where response_format asks for it (the answer: {"summary": "s", oops)',
    );
    expect(outputProblem(request, '{"nom":3}')).toBe(
      `the answer does not match response_format's schema: the answer must have required property 'summary' (the answer: {"nom":3})`,
    );
    expect(outputProblem(request, '{"summary":"s","urgency":"soon","tags":[]}')).toMatch(
      /^the answer does not match response_format's schema: \/urgency must be equal to one of the allowed values/,
    );
    expect(outputProblem(request, '{"summary":"s","urgency":"low","tags":[],"extra":1}')).toMatch(
      /must NOT have additional properties \("extra"\)/,
    );
    expect(outputProblem(request, null)).toMatch(/^the answer is not JSON.*\(the answer: empty\)$/);
    // json_object asks for an object, of no schema
    const object = JSON.stringify({ model: 'm', messages: [], response_format: { type: 'json_object' } });
    expect(outputProblem(object, '{"any":1}')).toBeNull();
    expect(outputProblem(object, '[1]')).toMatch(/^the answer is JSON but no object/);
    // text answers asked for as text, however they look
    expect(outputProblem(JSON.stringify({ model: 'm', messages: [] }), 'not { json')).toBeNull();
    expect(outputProblem(JSON.stringify({ model: 'm', messages: [], response_format: { type: 'text' } }), 'x')).toBeNull();
  });

  it('a JSON answer in a Markdown code fence (as local models write it) is taken, and stored without the fence', () => {
    const request = asking(TICKET);
    const json = '{"summary":"s","urgency":"high","tags":["a"]}';
    for (const fenced of ['```json\n' + json + '\n```', '```\n' + json + '\n```\n', '  ```JSON\r\n' + json + '\r\n```  ']) {
      expect(checkAnswer(request, fenced, 'stop', 200)).toEqual({ output: json, failure: null });
    }
    // what is inside is held to the schema as any answer is
    const inside = checkAnswer(request, '```json\n{"nom":3}\n```', 'stop', 200).failure!;
    expect([inside.message, inside.answer]).toEqual([
      "the answer does not match response_format's schema: the answer must have required property 'summary'",
      '```json {"nom":3} ```',
    ]);
    // text around the fence, or two fences: no JSON taken out of prose
    expect(checkAnswer(request, 'Here it is:\n```json\n' + json + '\n```', 'stop', 200).failure?.message).toMatch(
      /^the answer is not JSON/,
    );
    expect(checkAnswer(request, '```json\n' + json + '\n```\n```json\n' + json + '\n```', 'stop', 200).failure).not.toBeNull();
    // a fence then a long run of spaces (a model padding to max_tokens): read in one pass (a regex took
    // seconds over 100 KB, the run's event loop held)
    expect(checkAnswer(request, '```json\n{"summary":' + ' \t'.repeat(200_000), 'length', 200).failure?.message).toMatch(
      /^the answer was cut off/,
    );
    // an unfenced answer is stored as it came; a request that asks for no JSON keeps its fences
    expect(checkAnswer(request, ` ${json}\n`, 'stop', 200)).toEqual({ output: ` ${json}\n`, failure: null });
    const text = JSON.stringify({ model: 'm', messages: [] });
    expect(checkAnswer(text, '```json\n{}\n```', 'stop', 200)).toEqual({ output: '```json\n{}\n```', failure: null });
  });

  it("the offline mock answers JSON of the request's schema (refs, enums, bounds followed), so --schema can be tried offline", () => {
    const request = JSON.parse(asking(TICKET));
    request.messages = [{ role: 'user', content: 'Extract:\n\nthe printer is broken' }];
    const answer = mockAnswer(request);
    expect(outputProblem(JSON.stringify(request), answer)).toBeNull();
    expect(JSON.parse(answer)).toEqual({ summary: '[mock] Summary of: the printer is broken', urgency: 'low', tags: [expect.any(String)] });
    const bounded = {
      type: 'object',
      properties: { n: { type: 'integer', exclusiveMinimum: 2 }, x: { type: ['null', 'number'], minimum: 1.5 } },
    };
    expect(JSON.parse(mockAnswer(JSON.parse(asking(bounded))))).toEqual({ n: 3, x: 1.5 });
  });

  it('an answer cut off at max_tokens before its JSON was whole fails at once, saying so; retry-failed --max-tokens sends it alone again with room', async () => {
    const fake = await startFake({ latencyMs: 5, record: true });
    const good = '{"summary":"the printer on the third floor","urgency":"high","tags":["printer"]}';
    fake.respond((r) => {
      const roomy = (r.json?.max_tokens ?? 0) >= 2048;
      const text = String(r.json?.messages?.at(-1)?.content);
      if (roomy || text.endsWith('doc 1')) return reply.ok({ content: good });
      const body = completionBody(r, { content: '{"summary":"the printer on the third fl' }) as {
        choices: Array<{ finish_reason: string }>;
      };
      body.choices[0]!.finish_reason = 'length';
      return reply.raw(200, body);
    });
    const docs = [
      { id: 'd0', text: 'doc 0' },
      { id: 'd1', text: 'doc 1' },
    ];
    const enqueueFlags = ['--schema', schemaFile(TICKET), '--max-tokens', '1000'];
    const { db, file } = await enqueueJsonl(tempDir(), docs, 'in.jsonl', enqueueFlags);
    const run = ['run', '--db', db, '--base-url', fake.url, '--retry-delay', '0.05', '--progress', 'none'];
    const r = await runCli(run);
    expect(r.code, r.stderr).toBe(2);
    expect(fake.requests).toHaveLength(2);
    const failed = readDb(db).jobs.find((j) => j.state === 'failed')!;
    expect(failed.error).toBe(
      'the answer was cut off at max_tokens before its JSON was whole: llmq retry-failed --error "cut off" --max-tokens 2000 sends it again with more room ' +
        '(the answer is not JSON, where response_format asks for it)',
    );
    // the run's summary and status propose that, reaching this queue, not a plain retry that is cut off again
    expect(r.stderr).toContain(`llmq retry-failed --error "cut off" --max-tokens 2000 --db ${db}`);
    const status = (await runCli(['status', '--db', db])).stdout;
    expect(status).toContain(
      `  to send them again with more room: llmq retry-failed --error "cut off" --max-tokens 2000 --db ${db}\n  then: llmq run`,
    );
    expect(status).not.toContain('to try them again');
    // a plain retry-failed would send it as it was: it says so (tried on a copy of the queue)
    const copy = join(tempDir(), 'copy.db');
    copyFileSync(db, copy);
    const plain = await runCli(['retry-failed', '--db', copy]);
    expect(plain.code, plain.stderr).toBe(0);
    // a plain retry-failed leaves it failed, where --max-tokens still reaches it, and says what does
    expect(plain.stderr).toBe(
      'Left 1 failed job cut off at max_tokens as it is: sent as it was, most likely cut off, and paid for, again. ' +
        `llmq retry-failed --error "cut off" --max-tokens 2000 --db ${copy} sends it with more room (--error "cut off" alone, as it was).\n`,
    );
    expect(readDb(copy).jobs.filter((j) => j.state === 'failed')).toHaveLength(1);
    // named by --error, it goes as it is, said
    const named = await runCli(['retry-failed', '--db', copy, '--error', 'cut off']);
    expect(named.stderr).toContain('1 of them was cut off at max_tokens: sent as it is, most likely cut off again.');
    expect(readDb(copy).jobs.filter((j) => j.state === 'failed')).toHaveLength(0);
    // as it says: only that document's request changes, the schema's field order kept; the other's answer stands
    const again = await runCli(['retry-failed', '--db', db, '--error', 'cut off', '--max-tokens', '2048']);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain(
      'Put 1 failed job whose error contains "cut off", asking for answers of up to 2048 tokens (1 item moved to that request) back to pending.',
    );
    expect((await runCli(run)).code).toBe(0);
    expect(fake.requests).toHaveLength(3);
    const resent = fake.requests[2]!;
    expect(resent.json.max_tokens).toBe(2048);
    expect(JSON.stringify(resent.json.response_format)).toBe(JSON.stringify(fake.requests[0]!.json.response_format));
    const { jobs, items } = readDb(db);
    expect(jobs.map((j) => [j.state, JSON.parse(j.request).max_tokens]).sort()).toEqual([
      ['done', 1000],
      ['done', 2048],
    ]);
    expect(items.map((i) => jobs.find((j) => j.key === i.job_key)!.output)).toEqual([good, good]);
    // asked again with the same limit: nothing to gain, said so
    const failing = await runCli(['retry-failed', '--db', db, '--max-tokens', '2048']);
    expect(failing.stderr).toContain('No failed jobs.');
    // the same input enqueued again with its options as before (to add a document, say): the raised
    // document stays at its raise, where it moved back to the request that was cut off and paid again
    const enqueued = await runCli(['enqueue', file, '--db', db, '--max-tokens', '32', ...enqueueFlags]);
    expect(enqueued.code, enqueued.stderr).toBe(0);
    expect(enqueued.stderr).toContain(
      '1 document stays at the higher max_tokens that retry-failed --max-tokens gave it: at the max_tokens asked now, its answer was cut off (and paid for).',
    );
    expect(enqueued.stderr).not.toContain('no longer belong');
    expect((await runCli(run)).code).toBe(0);
    expect(fake.requests).toHaveLength(3);
  });

  it('retry-failed --max-tokens whose documents all join requests answered already says nothing is pending, not "to try them again"', async () => {
    const fake = await startFake({ latencyMs: 5 });
    const good = '{"summary":"s","urgency":"high","tags":[]}';
    fake.respond((r) => {
      if ((r.json?.max_tokens ?? 0) >= 2048) return reply.ok({ content: good });
      const body = completionBody(r, { content: '{"summary":"s' }) as { choices: Array<{ finish_reason: string }> };
      body.choices[0]!.finish_reason = 'length';
      return reply.raw(200, body);
    });
    const dir = tempDir();
    const schema = ['--schema', schemaFile(TICKET)];
    const { db } = await enqueueJsonl(dir, [{ id: 'd0', text: 'doc 0' }], 'a.jsonl', [...schema, '--max-tokens', '1000']);
    // the same document, enqueued again under another id with room
    writeFileSync(join(dir, 'b.jsonl'), `${JSON.stringify({ id: 'd0-roomy', text: 'doc 0' })}\n`);
    expect((await runCli(['enqueue', join(dir, 'b.jsonl'), '--db', db, ...schema, '--max-tokens', '2048'])).code).toBe(0);
    expect((await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none'])).code).toBe(2);
    const r = await runCli(['retry-failed', '--db', db, '--error', 'cut off', '--max-tokens', '2048']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /^The items of 1 failed job whose error contains "cut off", asking for answers of up to 2048 tokens .* joined requests answered \(or failed\) already: nothing is pending\.\n$/,
    );
    expect((await runCli(['status', '--db', db, '--json'])).stdout).toMatch(/"pending":0/);
  });

  it("says, at enqueue, what OpenAI's strict mode would refuse in a schema: an object open to more properties, a property not required", async () => {
    expect(strictModeProblems(TICKET)).toEqual([]);
    const loose = {
      type: 'object',
      required: ['a'],
      properties: { a: { type: 'string' }, b: { type: 'object', additionalProperties: false, properties: { c: { type: 'number' } } } },
    };
    expect(strictModeProblems(loose)).toEqual([
      'the schema has no "additionalProperties": false',
      `the schema's "required" leaves out "b"`,
      `/properties/b's "required" leaves out "c"`,
    ]);
    const dir = tempDir();
    const file = schemaFile(loose, 'loose.json');
    writeFileSync(join(dir, 'in.jsonl'), '{"id":"a","text":"x"}\n');
    const r = await runCli(['enqueue', join(dir, 'in.jsonl'), '--db', join(dir, 'q.db'), '--schema', file]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(`--schema: OpenAI's strict mode refuses this schema (the schema has no "additionalProperties": false;`);
    // said strict: false, nothing to say
    const relaxed = schemaFile({ name: 'loose', strict: false, schema: loose }, 'relaxed.json');
    const quiet = await runCli(['enqueue', join(dir, 'in.jsonl'), '--db', join(dir, 'q.db'), '--schema', relaxed]);
    expect(quiet.stderr).not.toContain('strict mode refuses');
  });

  it('takes schemas of either dialect ($schema of 2020-12 or draft-07), and holds answers to each of two schemas sharing an $id', () => {
    for (const dialect of ['https://json-schema.org/draft/2020-12/schema', 'http://json-schema.org/draft-07/schema#']) {
      expect(readSchemaFile(schemaFile({ $schema: dialect, ...TICKET })).json_schema.schema).toMatchObject({ $schema: dialect });
    }
    const a = { $id: 'https://example.com/t', type: 'object', required: ['a'], properties: { a: { type: 'string' } } };
    const b = { $id: 'https://example.com/t', type: 'object', required: ['b'], properties: { b: { type: 'string' } } };
    expect(outputProblem(asking(a), '{"a":"x"}')).toBeNull();
    expect(outputProblem(asking(b), '{"a":"x"}')).toMatch(/must have required property 'b'/);
  });

  it("--schema takes a JSON Schema or OpenAI's {name, schema, strict}; a file that is neither is refused, naming it", () => {
    expect(readSchemaFile(schemaFile(TICKET))).toEqual({
      type: 'json_schema',
      json_schema: { name: 'ticket', schema: TICKET, strict: true },
    });
    expect(readSchemaFile(schemaFile({ name: 'Ticket v2', strict: false, schema: TICKET }))).toEqual({
      type: 'json_schema',
      json_schema: { name: 'Ticket_v2', schema: TICKET, strict: false },
    });
    const notJson = schemaFile('{"type": "object",', 'a.json');
    expect(() => readSchemaFile(notJson)).toThrow(new RegExp(`^--schema: ${notJson} is not JSON`));
    // a hand-edited file's mistake found by its line and column, not a character count
    const comma = schemaFile('{\n  "type": "object",\n  "properties": {"a": {"type": "string"},}\n}', 'comma.json');
    expect(() => readSchemaFile(comma)).toThrow(
      /^--schema: .*comma\.json is not JSON \(line 3, column \d+\): .+\. Give a JSON Schema file\.$/,
    );
    // a byte-order mark before the JSON is no mistake of it
    expect(readSchemaFile(schemaFile(`\uFEFF${JSON.stringify(TICKET)}`, 'bom.json')).json_schema.schema).toEqual(TICKET);
    const bad = schemaFile({ type: 'object', properties: { a: { type: 'strin' } } }, 'b.json');
    // where in the file, what is there, and what it must be: not the checker's own words
    expect(() => readSchemaFile(bad)).toThrow(
      `--schema: ${bad} is not a JSON Schema: /properties/a/type is "strin", where it must be one of "array", "boolean", "integer", "null", "number", "object", "string".`,
    );
    expect(() => readSchemaFile(schemaFile({ type: 'object', required: 'a' }, 'r.json'))).toThrow(
      /is not a JSON Schema: \/required is "a", where it must be an array\.$/,
    );
    expect(() => readSchemaFile(schemaFile({ type: 'object', properties: { a: { $ref: '#/defs/x' } } }, 'f.json'))).toThrow(
      /is not a JSON Schema: its \$ref "#\/defs\/x" points at nothing in the file \(definitions go under "\$defs"\)\.$/,
    );
    expect(() => readSchemaFile(schemaFile('[1]', 'c.json'))).toThrow(/is not a JSON Schema: a JSON Schema is an object/);
    // the wrapper without its name, and a whole response_format pasted: the schema inside each
    expect(readSchemaFile(schemaFile({ schema: TICKET, strict: true })).json_schema).toEqual({
      name: 'ticket',
      schema: TICKET,
      strict: true,
    });
    const pasted = { type: 'json_schema', json_schema: { name: 't2', strict: true, schema: TICKET } };
    expect(readSchemaFile(schemaFile(pasted)).json_schema).toEqual({ name: 't2', schema: TICKET, strict: true });
    // a schema that says nothing of the answers would let any answer pass
    for (const nothing of [{}, { hello: 'world' }]) {
      expect(() => readSchemaFile(schemaFile(nothing, 'd.json'))).toThrow(
        /d\.json says nothing of the answers \(no type, properties, \$ref\.\.\.\)/,
      );
    }
  });

  it('a run sends the schema with each request; an answer not of it is a failed try, tried again; one never of it fails naming why', async () => {
    const fake = await startFake({ latencyMs: 5, record: true });
    const good = '{"summary":"broken printer","urgency":"high","tags":["printer"]}';
    fake.respond((r) => {
      const text = String(r.json?.messages?.at(-1)?.content);
      // d0: right first time, in a Markdown fence; d1: wrong, then right; d2: never JSON
      if (text.endsWith('doc 0')) return reply.ok({ content: '```json\n' + good + '\n```' });
      if (text.endsWith('doc 1')) return reply.ok({ content: r.attempt === 1 ? '{"summary":"x"}' : good });
      return reply.ok({ content: 'Sure! Here is the JSON you asked for:' });
    });
    const dir = tempDir();
    const docs = [0, 1, 2].map((i) => ({ id: `d${i}`, text: `doc ${i}` }));
    const { db } = await enqueueJsonl(dir, docs, 'in.jsonl', ['--schema', schemaFile(TICKET)]);
    const r = await runCli([
      'run',
      '--db',
      db,
      '--base-url',
      fake.url,
      '--max-attempts',
      '2',
      '--retry-delay',
      '0.05',
      '--price',
      '1000,2000',
      '--progress',
      'none',
    ]);
    expect(r.code, r.stderr).toBe(2);
    // the request as OpenAI's structured outputs take it
    expect(fake.requests[0]!.json.response_format).toEqual({
      type: 'json_schema',
      json_schema: { name: 'ticket', schema: TICKET, strict: true },
    });
    const { jobs } = readDb(db);
    const byDoc = Object.fromEntries(jobs.map((j) => [JSON.parse(j.request).messages.at(-1).content.slice(-5), j]));
    expect([byDoc['doc 0']!.state, byDoc['doc 0']!.output]).toEqual(['done', good]);
    expect([byDoc['doc 1']!.state, byDoc['doc 1']!.attempts, byDoc['doc 1']!.output]).toEqual(['done', 2, good]);
    expect(byDoc['doc 2']!.state).toBe('failed');
    // the job's error says what was wrong, so that status groups such failures; each try's says the answer too
    expect(byDoc['doc 2']!.error).toBe('gave up after 2 attempts: the answer is not JSON, where response_format asks for it');
    // the answers that were not what was asked were billed: each try records what it used, at its cost
    const { attempts } = readDb(db);
    const wrong = attempts.filter((a) => a.outcome !== 'done');
    expect(wrong.at(-1)!.error).toBe(
      'the answer is not JSON, where response_format asks for it (the answer: Sure! Here is the JSON you asked for:)',
    );
    expect(wrong.map((a) => [a.outcome, a.status])).toEqual([
      ['retry', 200],
      ['retry', 200],
      ['failed', 200],
    ]);
    for (const a of wrong) expect(a.prompt_tokens).toBeGreaterThan(0);
    expect((await runCli(['status', '--db', db])).stdout).not.toMatch(/may be billed/);
    // and they are in the money: each job's cost is its answered tries', the status headline and the
    // run's summary their sum, and the summary says what of it went to answers not kept
    const costOfTries = (key: string) => attempts.filter((a) => a.job_key === key).reduce((sum, a) => sum + a.cost_usd!, 0);
    for (const j of jobs) expect(j.cost_usd).toBeCloseTo(costOfTries(j.key), 12);
    const spent = attempts.reduce((sum, a) => sum + a.cost_usd!, 0);
    const rejectedUsd = wrong.reduce((sum, a) => sum + a.cost_usd!, 0);
    expect(rejectedUsd).toBeGreaterThan(0);
    const status = JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout);
    expect(status.cost.usd).toBeCloseTo(spent, 12);
    expect(r.stderr).toContain(`cost ${usd(spent)} `);
    expect(r.stderr).toContain(`${usd(rejectedUsd)} of it for 3 answers billed and not kept (not the JSON asked for)`);
    const shown = (await runCli(['show', 'd1', '--db', db])).stdout;
    expect(shown).toMatch(new RegExp(`cost +\\${usd(byDoc['doc 1']!.cost_usd!)} \\(with 1 answer billed and not kept\\)`));
    // the tokens of the answers not kept, apart from the answer's: a failed job's are all it has
    const tokensOf = (key: string) => {
      const tries = wrong.filter((a) => a.job_key === key);
      return `${int(tries.reduce((sum, a) => sum + a.prompt_tokens!, 0))} in, ${int(tries.reduce((sum, a) => sum + a.completion_tokens!, 0))} out`;
    };
    const d1 = byDoc['doc 1']!;
    expect(shown).toContain(
      `tokens    ${int(d1.prompt_tokens!)} in, ${int(d1.completion_tokens!)} out (and ${tokensOf(d1.key)} for 1 answer not kept)\n`,
    );
    const failedShown = (await runCli(['show', 'd2', '--db', db])).stdout;
    expect(failedShown).toContain(`tokens    ${tokensOf(byDoc['doc 2']!.key)} (2 answers billed and not kept)\n`);
  });

  it("a rejected answer of a model without a price makes the run's cost unknown, as an unpriced answer does, not a sum without it", async () => {
    const fake = await startFake({ latencyMs: 5 });
    // the unpriced model's answers are never JSON; the priced one's are right
    fake.respond((r) =>
      reply.ok({ content: r.json?.model === 'local-unpriced' ? 'not JSON' : '{"summary":"s","urgency":"low","tags":[]}' }),
    );
    const dir = tempDir();
    const schema = ['--schema', schemaFile(TICKET)];
    const { db } = await enqueueJsonl(dir, [{ id: 'd0', text: 'doc 0' }], 'a.jsonl', [...schema, '--model', 'local-unpriced']);
    await enqueueJsonl(dir, [{ id: 'd1', text: 'doc 1' }], 'b.jsonl', [...schema, '--model', 'gpt-4o-mini']);
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--max-attempts', '1', '--json']);
    expect(r.code, r.stderr).toBe(2);
    const events = jsonLines(r.stdout);
    expect(events.find((e) => e.event === 'job:failed').billed).toMatchObject({ costUsd: null });
    expect(events.find((e) => e.event === 'job:done').costUsd).toBeGreaterThan(0);
    expect(events.find((e) => e.event === 'run:end').costUsd).toBeNull();
  });

  it('the batch lane holds its answers to the schema too: one not of it goes back for another try, and fails after --max-attempts', async () => {
    // the fake Batch API answers each line in plain text (answerFor), never JSON
    const fake = await startFake();
    fake.batches.configure({ completeAfterMs: 50 });
    const docs = [0, 1, 2].map((i) => ({ id: `d${i}`, text: `doc ${i}` }));
    const { db } = await enqueueJsonl(tempDir(), docs, 'in.jsonl', ['--schema', schemaFile(TICKET)]);
    const run = [
      'run',
      '--db',
      db,
      '--base-url',
      fake.url,
      '--via',
      'batch',
      '--poll',
      '0.1',
      '--max-attempts',
      '2',
      '--price',
      '1000,2000',
    ];
    const r = await runCli(run);
    expect(r.code, r.stderr).toBe(2);
    expect(fake.batches.count('create')).toBe(2);
    const { jobs, attempts } = readDb(db);
    expect(jobs.map((j) => [j.state, j.attempts])).toEqual(Array(3).fill(['failed', 2]));
    // each rejected answer was billed: the job's cost is its two tries'
    for (const j of jobs) {
      const tries = attempts.filter((a) => a.job_key === j.key);
      expect(tries.map((a) => a.cost_usd! > 0)).toEqual([true, true]);
      expect(j.cost_usd).toBeCloseTo(tries[0]!.cost_usd! + tries[1]!.cost_usd!, 12);
    }
    expect(jobs[0]!.error).toBe('gave up after 2 attempts: the answer is not JSON, where response_format asks for it');
    expect(attempts[0]!.error).toMatch(/^the answer is not JSON, where response_format asks for it \(the answer: /);
  }, 30_000);
});

describe('the --max-tokens proposed for answers kept though cut off (online and batch lanes alike)', () => {
  it('is twice the larger of the request limit and the tokens used, at least 1,024', () => {
    const request = (body: object) => JSON.stringify({ model: 'm', messages: [], ...body });
    expect(cutOffRoom(request({ max_tokens: 700 }), 700)).toBe(1400);
    expect(cutOffRoom(request({ max_completion_tokens: 3000 }), 3000)).toBe(6000);
    // the batch lane holds no plain request: the tokens a cut-off answer used are its limit
    expect(cutOffRoom(null, 700)).toBe(1400);
    expect(cutOffRoom(null, 64)).toBe(1024);
    // none set: cut at the model's own limit, which only the tokens say (4,096 was proposed, fewer than it had)
    expect(cutOffRoom(request({}), 16_384)).toBe(32_768);
    expect(cutOffRoom(null, 0)).toBe(4096);
  });
});
