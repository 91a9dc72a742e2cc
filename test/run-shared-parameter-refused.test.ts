import { describe, expect, it } from 'vitest';
import { classifyHttpError, refusesSharedParameter } from '../src/provider/classify.js';
import { runCli } from './helpers/cli.js';
import { enqueueJsonl, readDb } from './helpers/e2e.js';
import { errorBody, reply } from './helpers/fake-openai.js';
import { startFake } from './helpers/start-fake.js';
import { tempDir } from './helpers/tmp.js';

const docs = Array.from({ length: 12 }, (_, i) => ({ id: `d${i}`, text: `document ${i}` }));

describe('a request parameter every job shares, refused before any answer', () => {
  it('stops the run after three, fails no job and uses up no attempt, and names the enqueue flag that changes it', async () => {
    const fake = await startFake({ latencyMs: 5 });
    fake.respond(() =>
      reply.error(400, "Unsupported value: 'temperature' does not support 0.2 with this model. Only the default (1) value is supported.", {
        code: 'unsupported_value',
        param: 'temperature',
      }),
    );
    const { db } = await enqueueJsonl(tempDir(), docs, 'in.jsonl', ['--temperature', '0.2']);
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--concurrency', '2', '--progress', 'none']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain("Unsupported value: 'temperature' does not support 0.2 with this model");
    expect(r.stderr).toContain(
      "The provider refused the temperature of gpt-4o-mini's jobs for their first requests, before answering any: they all have it.",
    );
    expect(r.stderr).toContain(
      `enqueue the same documents again with another --temperature or none (llmq enqueue SOURCE... --temperature ... --db ${db})`,
    );
    expect(r.stderr).toContain('No job failed: 12 jobs are still pending.');
    const { jobs, attempts } = readDb(db);
    expect(jobs.map((j) => [j.state, j.attempts])).toEqual(Array(12).fill(['pending', 0]));
    expect(attempts.length).toBeGreaterThanOrEqual(3);
    expect(attempts.every((a) => a.outcome === 'not_counted')).toBe(true);
  });

  it('one job refused again, and no other: it fails as a 400 does, where the run stopped and every run after sent it three times', async () => {
    // a Batch line's own response_format, the last job of the queue left: the run stopped with it
    // pending ("they all have it"), exit 1, and the next run sent it three times again
    const fake = await startFake({ latencyMs: 5, record: true });
    fake.respond(() =>
      reply.error(400, "Invalid schema for response_format 'x': bad.", { code: 'invalid_value', param: 'response_format' }),
    );
    const { db } = await enqueueJsonl(tempDir(), docs.slice(0, 1));
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--retry-delay', '0.05', '--progress', 'none']);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).not.toContain('they all have it');
    expect(fake.requests).toHaveLength(2);
    const { jobs } = readDb(db);
    expect(jobs.map((j) => [j.state, j.attempts, j.error])).toEqual([
      ['failed', 1, "HTTP 400: Invalid schema for response_format 'x': bad."],
    ]);
  });

  it("says a model that takes max_completion_tokens under a name llmq does not know as a reasoning model's", async () => {
    const fake = await startFake({ latencyMs: 5 });
    fake.respond(() =>
      reply.error(400, "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.", {
        code: 'unsupported_parameter',
        param: 'max_tokens',
      }),
    );
    const { db } = await enqueueJsonl(tempDir(), docs, 'in.jsonl', ['--model', 'my-reasoning-deployment']);
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(
      "my-reasoning-deployment takes max_completion_tokens instead, which llmq writes for OpenAI's reasoning models by their names",
    );
    expect(readDb(db).jobs.every((j) => j.state === 'pending' && j.attempts === 0)).toBe(true);
  });

  it('a refusal of the document itself (messages), or of a parameter once answers came, fails that job alone', async () => {
    const fake = await startFake({ latencyMs: 5 });
    fake.respond((req) =>
      String(req.json?.messages?.[0]?.content).endsWith('document 0')
        ? reply.error(400, "Invalid 'messages[0].content': string too long.", {
            code: 'string_above_max_length',
            param: 'messages[0].content',
          })
        : String(req.json?.messages?.[0]?.content).endsWith('document 7')
          ? reply.error(400, "Invalid 'max_tokens': integer below minimum value.", { code: 'integer_below_min_value', param: 'max_tokens' })
          : reply.ok(),
    );
    const { db } = await enqueueJsonl(tempDir(), docs);
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--concurrency', '1', '--progress', 'none']);
    expect(r.code, r.stderr).toBe(2);
    // the first request, before any answer, refused for its document: failed, not taken for the request's shape
    const { jobs } = readDb(db);
    const failed = jobs.filter((j) => j.state === 'failed');
    expect(failed.map((j) => [JSON.parse(j.request).messages[0].content.slice(-10), j.attempts])).toEqual([
      ['document 0', 1],
      ['document 7', 1],
    ]);
    expect(jobs.filter((j) => j.state === 'done')).toHaveLength(10);
  });
});

describe('refusals of shared parameters with several models in the queue', () => {
  const refuse = (param: string) =>
    reply.error(400, `Unsupported value: '${param}' is not supported with this model.`, { code: 'unsupported_value', param });

  it('count by model and parameter: two models refusing two parameters in turn still stop, after at most five requests', async () => {
    const fake = await startFake({ latencyMs: 5 });
    fake.respond((req) => refuse(req.json?.model === 'model-a' ? 'temperature' : 'top_p'));
    const dir = tempDir();
    const { db } = await enqueueJsonl(dir, docs.slice(0, 6), 'a.jsonl', ['--model', 'model-a']);
    await enqueueJsonl(dir, docs.slice(6), 'b.jsonl', ['--model', 'model-b']);
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--concurrency', '2', '--progress', 'none']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(/The provider refused the (temperature of model-a|top_p of model-b)'s jobs/);
    expect(readDb(db).jobs.every((j) => j.state === 'pending' && j.attempts === 0)).toBe(true);
    expect(fake.received).toBeLessThanOrEqual(5 + 2); // and those already on the wire at the stop
  });

  it("once another model has answered, a model's refusals fail its own jobs and the run goes on", async () => {
    const fake = await startFake({ latencyMs: 5 });
    fake.respond((req) => (req.json?.model === 'model-a' ? refuse('temperature') : reply.ok()));
    const dir = tempDir();
    const { db } = await enqueueJsonl(dir, docs.slice(0, 4), 'b.jsonl', ['--model', 'model-b', '--priority', '-1']);
    await enqueueJsonl(dir, docs.slice(4, 8), 'a.jsonl', ['--model', 'model-a']);
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--concurrency', '1', '--progress', 'none']);
    expect(r.code, r.stderr).toBe(2);
    const states = readDb(db).jobs.map((j) => [j.model, j.state]);
    expect(states.filter(([m, s]) => m === 'model-b' && s === 'done')).toHaveLength(4);
    expect(states.filter(([m, s]) => m === 'model-a' && s === 'failed')).toHaveLength(4);
  });
});

describe('refusesSharedParameter', () => {
  const refusal = (status: number, param: string | null) =>
    classifyHttpError(
      status,
      JSON.stringify(errorBody('refused', 'invalid_request_error', 'invalid_value', param)),
      new Headers(),
      null,
      undefined,
    );
  it('is a 4xx naming a parameter other than the document, never a 404 or one naming none', () => {
    expect(refusal(400, 'max_tokens').param).toBe('max_tokens');
    expect(refusesSharedParameter(refusal(400, 'max_tokens'))).toBe(true);
    expect(refusesSharedParameter(refusal(422, 'response_format'))).toBe(true);
    expect(refusesSharedParameter(refusal(400, 'messages[0].content'))).toBe(false);
    expect(refusesSharedParameter(refusal(400, 'messages'))).toBe(false);
    expect(refusesSharedParameter(refusal(400, null))).toBe(false);
    expect(refusesSharedParameter(refusal(404, 'model'))).toBe(false);
    expect(refusesSharedParameter(refusal(429, 'max_tokens'))).toBe(false);
  });
});
