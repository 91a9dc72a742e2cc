/**
 * After a real run of the built CLI on the HTTP fake: `status --json`, every export format and
 * `show`, each checked field by field against the SQLite file and against what the fake answered.
 */
import { hostname, tmpdir } from 'node:os';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { collect, runCli, spawnCli } from './helpers/cli.js';
import { enqueueJsonl, fakeUsage, jsonLines, readDb, sentFor } from './helpers/e2e.js';
import { FakeOpenAI, answerFor, completionBody, reply, type FakeRequest } from './helpers/fake-openai.js';
import { tempDir } from './helpers/tmp.js';
import { parseCsv } from './helpers/csv.js';
import { startFake } from './helpers/start-fake.js';

const content = (req: FakeRequest): string => String(req.json?.messages?.at(-1)?.content ?? '');
/** A real OpenAI message naming parameters: their snake_case names are not the error's code. */
const REASON_B = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.";
const PRICE = [0.15, 0.6] as const; // gpt-4o-mini, USD per million tokens in genai-prices

/**
 * 12 documents, in this order: `alpha` and `alpha-again` have the same text (one shared job);
 * `bad-1` and `bad-2` are refused with one 400 reason and `bad-3` with another; `flaky` gets a 500
 * once and then an answer. Run once with --json (exit 2: drained with failures).
 */
async function scenario(dir: string) {
  const fake = await FakeOpenAI.start({ latencyMs: 10 });
  fake.respond((req) => {
    const c = content(req);
    if (c.includes('REFUSE-A')) return reply.badRequest('Reason A: this document is refused.');
    if (c.includes('REFUSE-B')) return reply.badRequest(REASON_B);
    if (c.includes('FLAKY') && req.attempt === 1) return reply.serverError(500);
    return undefined;
  });
  const lines = [
    { id: 'alpha', text: 'Alpha: apples grow on trees.', lang: 'en' },
    { id: 'beta', text: 'Beta: bananas, "curved", yellow.', lang: 'en', tags: ['a', 'b'] },
    { id: 'bad-1', text: 'REFUSE-A first', lang: 'en' },
    { id: 'alpha-again', text: 'Alpha: apples grow on trees.', lang: 'fr' },
    { id: 'flaky', text: 'FLAKY: the first try fails with a 500.', lang: 'de' },
    { id: 'bad-2', text: 'REFUSE-A second', lang: 'en' },
    { id: 'gamma', text: 'Gamma: grapes\non two lines.', lang: 'en' },
    { id: 'bad-3', text: 'REFUSE-B third', lang: 'en' },
    { id: 'delta', text: 'Delta: dates.', lang: 'en' },
    { id: 'epsilon', text: 'Epsilon: elderberries.', lang: 'en' },
    { id: 'zeta', text: 'Zeta: zucchini.', lang: 'en' },
    { id: 'eta', text: 'Eta: eggplant.', lang: 'en' },
  ];
  const { db } = await enqueueJsonl(dir, lines);
  const child = spawnCli(['run', '--db', db, '--base-url', fake.url, '--concurrency', '4', '--retry-delay', '0.05', '--json']);
  const run = await collect(child);
  expect(run.code, run.stderr).toBe(2);
  const end = jsonLines(run.stdout).at(-1);
  expect(end.event).toBe('run:end');
  return { fake, db, dir, lines, end, pid: child.pid! };
}

describe('results after a run on the fake', () => {
  // One run, read by every test below (status, export and show only read the database).
  let ctx: Awaited<ReturnType<typeof scenario>>;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'llmq-results-'));
    ctx = await scenario(dir);
  });
  afterAll(async () => {
    await ctx?.fake.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('status --json: counts, items vs jobs, tokens as the fake counted them, failures grouped, cost, last run', async () => {
    const { fake, db, end, pid } = ctx;
    const { jobs, runs } = readDb(db);
    const r = await runCli(['status', '--json', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    const s = JSON.parse(r.stdout);

    expect(s.counts).toEqual({ pending: 0, running: 0, done: 8, failed: 3 });
    expect(s.total).toBe(11); // 12 items, alpha and alpha-again share a job
    expect(s.items).toBe(12);
    expect(s.sharedItems).toBe(1);
    expect(s.percentDone).toBe(72.7);
    expect(s.retrying).toBe(0);
    expect(s.oldestPending).toBeNull();
    expect(s.db).toBe(db);

    // tokens: exactly the usage the fake put in its 200 answers
    const answered = fake.requests.filter((q) => q.answered === 200);
    expect(answered).toHaveLength(8);
    const prompt = answered.reduce((a, q) => a + fakeUsage(q).prompt_tokens, 0);
    const completion = answered.reduce((a, q) => a + fakeUsage(q).completion_tokens, 0);
    expect(prompt).toBeGreaterThan(0);
    expect(s.tokens).toEqual({ prompt, completion });

    const usd = (prompt * PRICE[0] + completion * PRICE[1]) / 1e6;
    expect(s.cost.usd).toBeCloseTo(usd, 12);
    expect(s.cost.knownUsd).toBeCloseTo(usd, 12);
    expect(s.cost.unpriced).toEqual([]);
    expect(s.cost.remainingUsd).toBe(0);
    expect(s.cost.byModel).toEqual([
      {
        model: 'gpt-4o-mini',
        jobs: 11,
        done: 8,
        prompt,
        completion,
        dropped: 0,
        price: [...PRICE],
        priceSource: expect.stringMatching(/^genai-prices /),
        usd: s.cost.usd,
      },
    ]);
    // the run kept the same money in its ledger: every answer, nothing held, nothing that may be billed
    expect(s.cost.byRun).toHaveLength(1);
    expect(s.cost.byRun[0]).toMatchObject({ runId: end.runId, reservedUsd: 0, inFlight: 0, mayBeBilledTries: 0, unpricedTries: 0 });
    expect(s.cost.byRun[0].spentUsd).toBeCloseTo(usd, 8);
    expect(s.cost.mayBeBilled).toEqual({ tries: 0, usd: 0, unpricedTries: 0 });

    // failures grouped by reason, biggest group first, counts of jobs
    expect(s.failures).toEqual([
      { error: 'HTTP 400: Reason A: this document is refused.', count: 2 },
      { error: `HTTP 400: ${REASON_B}`, count: 1 },
    ]);
    expect(
      jobs
        .filter((j) => j.state === 'failed')
        .map((j) => j.error)
        .sort(),
    ).toEqual(['HTTP 400: Reason A: this document is refused.', 'HTTP 400: Reason A: this document is refused.', `HTTP 400: ${REASON_B}`]);

    // the run is over: no live run, no ETA; the last run is the one we started, with its figures
    expect(s.activeRuns).toEqual([]);
    expect(s.jobsPerSecond).toBeNull();
    expect(s.etaSeconds).toBeNull();
    expect(runs).toHaveLength(1);
    const last = s.lastRun;
    expect(last).toMatchObject({
      id: end.runId,
      host: hostname(),
      pid,
      exitReason: 'drained',
      live: false,
      done: 8,
      failed: 3,
      retried: 1,
      requests: fake.received,
      rateLimited: 0,
      tokens: { prompt, completion },
      startedAt: runs[0]!.started_at,
      endedAt: runs[0]!.ended_at,
    });
    expect(fake.received).toBe(12); // 11 jobs, one of them twice
    expect(last.endedAt).toBeGreaterThanOrEqual(last.startedAt);
    expect(last.wallSeconds).toBeCloseTo((last.endedAt - last.startedAt) / 1000, 6);
    // finished jobs, done and failed, as the run's progress bar and summary count them
    expect(last.averageJobsPerSecond).toBeCloseTo((8 + 3) / last.wallSeconds, 6);
    // and it agrees with what the run itself said at its end
    expect(end).toMatchObject({
      done: 8,
      failed: 3,
      retried: 1,
      requests: 12,
      promptTokens: prompt,
      completionTokens: completion,
      failedInStore: 3,
    });
  });

  it('export jsonl and csv: every item in input order, every field from the store and the fake', async () => {
    const { fake, db, lines } = ctx;
    const { jobs, items, attempts } = readDb(db);
    const r = await runCli(['export', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    const out = jsonLines(r.stdout);
    expect(out.map((l) => l.id)).toEqual(lines.map((l) => l.id));

    for (const [i, line] of out.entries()) {
      const input = lines[i]!;
      const item = items.find((it) => it.id === input.id)!;
      const job = jobs.find((j) => j.key === item.job_key)!;
      const sent = sentFor(fake, job.key);
      // the key is the hash of exactly what was sent; the text of the document is in it
      expect(sent.all.length, input.id).toBeGreaterThan(0);
      expect(content(sent.all[0]!)).toContain(input.text);
      const { id: _id, text: _text, ...meta } = input;
      expect(Object.keys(line)).toEqual([
        'id',
        'key',
        'state',
        'output',
        'error',
        'attempts',
        'model',
        'usage',
        'cost_usd',
        'latency_ms',
        'finish_reason',
        'source',
        'meta',
      ]);
      expect(line.key).toBe(job.key);
      expect(line.model).toBe('gpt-4o-mini');
      expect(line.attempts).toBe(sent.all.length); // every try reached the fake, and no other
      expect(line.source).toBe(item.source);
      expect(line.source).toMatch(/in\.jsonl/);
      expect(line.meta).toEqual(meta);
      const last = attempts.filter((a) => a.job_key === job.key).at(-1)!;
      expect(line.latency_ms).toBe(last.latency_ms);
      expect(line.latency_ms).toBeGreaterThanOrEqual(5); // the fake waits 10 ms before answering (timers may round)
      if (input.text.startsWith('REFUSE')) {
        expect(line).toMatchObject({ state: 'failed', output: null, usage: null, cost_usd: null, attempts: 1, finish_reason: null });
        expect(line.error).toBe(`HTTP 400: ${input.text.includes('REFUSE-A') ? 'Reason A: this document is refused.' : REASON_B}`);
        expect(sent.ok).toBeUndefined();
      } else {
        expect(sent.ok, input.id).toBeDefined();
        expect(line.state).toBe('done');
        expect(line.finish_reason).toBe('stop');
        expect(line.error).toBeNull();
        expect(line.output).toBe(answerFor(sent.ok!.body));
        expect(line.usage).toEqual(fakeUsage(sent.ok!));
        // its answer's cost, at the price known when it came
        expect(line.cost_usd).toBeCloseTo((line.usage.prompt_tokens * PRICE[0] + line.usage.completion_tokens * PRICE[1]) / 1e6, 15);
      }
    }
    // the shared job: two items, one call, one answer
    const [a, a2] = [out.find((l) => l.id === 'alpha'), out.find((l) => l.id === 'alpha-again')];
    expect(a2.key).toBe(a.key);
    expect(a2.output).toBe(a.output);
    expect(fake.sentCount(a.key)).toBe(1);
    expect(out.find((l) => l.id === 'flaky').attempts).toBe(2);

    // csv: the same records, as text, RFC 4180
    const csv = await runCli(['export', '--db', db, '--format', 'csv']);
    expect(csv.code).toBe(0);
    const rows = parseCsv(csv.stdout);
    expect(rows[0]).toEqual([
      'id',
      'key',
      'state',
      'model',
      'attempts',
      'prompt_tokens',
      'completion_tokens',
      'latency_ms',
      'source',
      'output',
      'error',
      'meta',
      'cost_usd',
      'finish_reason',
    ]);
    expect(rows).toHaveLength(1 + out.length);
    const text = (v: unknown) => (v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v));
    for (const [i, l] of out.entries()) {
      expect(rows[i + 1]).toEqual([
        l.id,
        l.key,
        l.state,
        l.model,
        String(l.attempts),
        text(l.usage?.prompt_tokens),
        text(l.usage?.completion_tokens),
        String(l.latency_ms),
        l.source,
        text(l.output),
        text(l.error),
        text(l.meta),
        text(l.cost_usd),
        text(l.finish_reason),
      ]);
    }
    expect(JSON.parse(rows.find((x) => x[0] === 'beta')![11]!)).toEqual({ lang: 'en', tags: ['a', 'b'] });
  });

  it("export --format openai-batch: the fake's own response bodies, errors for the failed", async () => {
    const { fake, db, lines } = ctx;
    const r = await runCli(['export', '--db', db, '--format', 'openai-batch']);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe(''); // nothing unfinished to skip
    const out = jsonLines(r.stdout);
    expect(out.map((l) => l.custom_id)).toEqual(lines.map((l) => l.id));
    expect(new Set(out.map((l) => l.id)).size).toBe(out.length);
    const { items } = readDb(db);
    for (const l of out) {
      expect(Object.keys(l)).toEqual(['id', 'custom_id', 'response', 'error', 'cost_usd']);
      expect(l.id).toMatch(/^batch_req_[0-9a-f]{24}$/);
      const key = items.find((it) => it.id === l.custom_id)!.job_key;
      const sent = sentFor(fake, key);
      if (l.custom_id.startsWith('bad-')) {
        // as the Batch API writes a refused request: its status and error body, no `error`
        expect(l.error).toBeNull();
        expect(l.response).toEqual({
          status_code: 400,
          request_id: key,
          body: { error: { message: expect.stringMatching(/^(Reason A|Unsupported parameter)/), type: null, param: null, code: null } },
        });
      } else {
        expect(l.error).toBeNull();
        expect(l.response.status_code).toBe(200);
        expect(l.response.request_id).toBe(key);
        // byte for byte the body the fake answered with (its id names the attempt: 2 for flaky)
        expect(l.response.body).toEqual(JSON.parse(JSON.stringify(completionBody(sent.ok!, {}))));
        expect(l.response.body.choices[0].message.content).toBe(answerFor(sent.ok!.body));
        expect(l.response.body.id).toBe(`chatcmpl-fake${key.slice(0, 12)}${l.custom_id === 'flaky' ? 2 : 1}`);
      }
    }
  });

  it('show <id> lists both attempts of a retried job with their statuses, then the answer', async () => {
    const { fake, db } = ctx;
    const r = await runCli(['show', 'flaky', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(/\x1b/);
    const { items } = readDb(db);
    const key = items.find((it) => it.id === 'flaky')!.job_key;
    const ok = sentFor(fake, key).ok!;
    expect(r.stdout).toMatch(/^ {2}state {5}done$/m);
    expect(r.stdout).toMatch(/^ {2}attempts {2}2$/m);
    expect(r.stdout).toMatch(/^attempts \(2\)$/m);
    expect(r.stdout).toMatch(/^ {2}#1 {2}\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ {2}HTTP 500 +[\d,]+ms {2}retry {2}run [0-9a-f]{8}$/m);
    expect(r.stdout).toMatch(/^ {6}HTTP 500: The server had an error/m);
    expect(r.stdout).toMatch(/^ {2}#2 {2}\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ {2}HTTP 200 +[\d,]+ms {2}done {2}run [0-9a-f]{8}$/m);
    expect(r.stdout.indexOf('#1 ')).toBeLessThan(r.stdout.indexOf('#2 '));
    expect(r.stdout).toContain(`answer\n  ${answerFor(ok.body)}\n`);
    const u = fakeUsage(ok);
    expect(r.stdout).toMatch(new RegExp(`^ {2}tokens {4}${u.prompt_tokens} in, ${u.completion_tokens} out$`, 'm'));

    const j = JSON.parse((await runCli(['show', 'flaky', '--json', '--db', db])).stdout);
    expect(j.attempts.map((a: { attempt: number; status: number; outcome: string }) => [a.attempt, a.status, a.outcome])).toEqual([
      [1, 500, 'retry'],
      [2, 200, 'done'],
    ]);
  });
});

describe('OpenAI Batch round trip', () => {
  it('batch input lines -> run -> export --format openai-batch: each custom_id once, the answer to its exact body', async () => {
    const fake = await startFake({ latencyMs: 5 });
    fake.respond((req) => (content(req).includes('refuse me') ? reply.badRequest('Refused by the fake.') : undefined));
    const body = (text: string, extra: object = {}) => ({
      model: 'gpt-4o-mini',
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: text },
      ],
      max_tokens: 50,
      ...extra,
    });
    const input = [
      { custom_id: 'request-1', method: 'POST', url: '/v1/chat/completions', body: body('What is 2+2?') },
      { custom_id: 'request-2', method: 'POST', url: '/v1/chat/completions', body: body('Name a colour.', { temperature: 0.2 }) },
      { custom_id: 'request-3', method: 'POST', url: '/v1/chat/completions', body: body('please refuse me') },
      { custom_id: 'request-4', method: 'POST', url: '/v1/chat/completions', body: body('What is 2+2?') }, // same body as request-1
      {
        custom_id: 'request-5',
        method: 'POST',
        url: '/v1/chat/completions',
        body: { messages: [{ role: 'user', content: 'Keys in another order.' }], model: 'gpt-4o-mini', seed: 7 },
      },
    ];
    const dir = tempDir();
    const file = join(dir, 'batch_input.jsonl');
    writeFileSync(file, input.map((l) => JSON.stringify(l)).join('\n') + '\n');
    const db = join(dir, 'q.db');
    const enq = await runCli(['enqueue', file, '--db', db]);
    expect(enq.code, enq.stderr).toBe(0);
    const run = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none']);
    expect(run.code, run.stderr).toBe(2);
    const out = join(dir, 'batch_output.jsonl');
    const exp = await runCli(['export', '--db', db, '--format', 'openai-batch', '--out', out]);
    expect(exp.code, exp.stderr).toBe(0);
    const results = jsonLines(readFileSync(out, 'utf8'));

    expect(results.map((l) => l.custom_id)).toEqual(input.map((l) => l.custom_id)); // each once, input order
    expect(fake.received).toBe(4); // request-4 shares request-1's job
    for (const line of results) {
      const sentBody = input.find((l) => l.custom_id === line.custom_id)!.body;
      // the request the fake received for this line: the batch body as given (same fields and values)
      const received = fake.requests.filter((q) => JSON.stringify(sortKeys(q.json)) === JSON.stringify(sortKeys(sentBody)));
      expect(received, line.custom_id).toHaveLength(1);
      const req = received[0]!;
      expect(line.response.request_id).toBe(req.key);
      if (line.custom_id === 'request-3') {
        expect(line.error).toBeNull();
        expect(line.response).toMatchObject({ status_code: 400, body: { error: { message: 'Refused by the fake.' } } });
      } else {
        expect(line.error).toBeNull();
        expect(line.response.status_code).toBe(200);
        expect(line.response.body.choices[0].message.content).toBe(answerFor(req.body));
        expect(line.response.body.usage).toEqual({
          ...fakeUsage(req),
          total_tokens: fakeUsage(req).prompt_tokens + fakeUsage(req).completion_tokens,
        });
      }
    }
    expect(results[3].response.body).toEqual(results[0].response.body);
    expect(results[3].id).not.toBe(results[0].id);
  });
});

/** JSON with object keys sorted, to compare bodies whatever order their keys were written in. */
function sortKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortKeys);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortKeys((v as Record<string, unknown>)[k])]),
    );
  return v;
}
