import { afterEach, describe, expect, it } from 'vitest';
import { answerFor, FakeOpenAI, reply } from './helpers/fake-openai.js';
import { OpenAIProvider } from '../src/provider/openai.js';
import { ProviderError } from '../src/provider/types.js';
import { mayBeBilled } from '../src/pricing/billing.js';
import { canonicalJson } from '../src/request.js';
import { countTokens } from 'gpt-tokenizer';
import { getEventListeners } from 'node:events';
import type { Dispatcher } from 'undici';

let fake: FakeOpenAI | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

const KEY = 'sk-test-SECRETSECRETSECRET1234567890';
const request = (text = 'Summarize this document please.', extra: Record<string, unknown> = {}) =>
  canonicalJson({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: text }], max_tokens: 50, ...extra });
const live = () => new AbortController().signal;

async function start(options: Parameters<typeof FakeOpenAI.start>[0] = {}) {
  fake = await FakeOpenAI.start(options);
  return fake;
}

function provider(f: FakeOpenAI, options: { apiKey?: string; timeoutMs?: number } = {}) {
  return new OpenAIProvider({
    baseUrl: `${f.url}/`,
    apiKey: 'apiKey' in options ? options.apiKey : KEY,
    timeoutMs: options.timeoutMs ?? 5000,
  });
}

/** The ProviderError a request is rejected with (fails the test if it resolves or rejects otherwise). */
async function failure(p: OpenAIProvider, body = request(), signal = live()): Promise<ProviderError> {
  const err = await p.complete(body, { signal }).then(
    () => {
      throw new Error('expected the request to fail');
    },
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ProviderError);
  return err as ProviderError;
}

describe('OpenAIProvider: success', () => {
  it('sends the body exactly as given with the bearer key and parses the completion', async () => {
    const f = await start();
    const body = request();
    const result = await provider(f).complete(body, { signal: live() });
    expect(result.status).toBe(200);
    expect(result.output).toBe(answerFor(body));
    const json = JSON.parse(result.body);
    expect(json.object).toBe('chat.completion');
    expect(result.usage).toEqual({ promptTokens: json.usage.prompt_tokens, completionTokens: json.usage.completion_tokens });
    expect(result.usage.promptTokens).toBe(countTokens('Summarize this document please.'));
    expect(f.requests[0].body).toBe(body);
    expect(f.requests[0].path).toBe('/v1/chat/completions');
    expect(f.requests[0].headers.authorization).toBe(`Bearer ${KEY}`);
    expect(f.requests[0].headers['content-type']).toBe('application/json');
  });

  it.each([
    ['a query', '/v1?api-version=2024-06-01'],
    ['a pasted endpoint and a query', '/v1/chat/completions/?api-version=2024-06-01'],
  ])("a base URL with %s (Azure's ?api-version=) keeps its query after the endpoint's path", async (_, tail) => {
    const f = await start();
    const p = new OpenAIProvider({ baseUrl: `${f.url.replace(/\/v1$/, '')}${tail}`, apiKey: KEY, timeoutMs: 5000 });
    expect((await p.complete(request(), { signal: live() })).status).toBe(200);
    expect(f.requests[0].path).toBe('/v1/chat/completions?api-version=2024-06-01');
    expect(p.name).toBe(`openai-compatible (${f.url})`);
  });

  it('sends no authorization header when no key is set (local servers)', async () => {
    const f = await start();
    await provider(f, { apiKey: undefined }).complete(request(), { signal: live() });
    expect(f.requests[0].headers.authorization).toBeUndefined();
  });

  it('takes empty content, tool calls and refusals as answers; counts tokens when usage is missing', async () => {
    const f = await start();
    const p = provider(f);
    f.script(reply.ok({ content: '' }));
    expect((await p.complete(request('a'), { signal: live() })).output).toBe('');
    const toolCalls = [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{}' } }];
    const completion = {
      choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: toolCalls } }],
      usage: { prompt_tokens: 3, completion_tokens: 4 },
    };
    f.script(reply.raw(200, completion));
    expect(JSON.parse((await p.complete(request('b'), { signal: live() })).output)).toEqual(toolCalls);
    // an empty content beside them (some OpenAI-compatible servers send it so): the calls are still the answer
    f.script(
      reply.raw(200, { ...completion, choices: [{ index: 0, message: { role: 'assistant', content: '', tool_calls: toolCalls } }] }),
    );
    expect(JSON.parse((await p.complete(request('c'), { signal: live() })).output)).toEqual(toolCalls);
    f.script(reply.raw(200, { choices: [{ message: { role: 'assistant', content: '', refusal: 'Not that.' } }] }));
    expect((await p.complete(request('d'), { signal: live() })).output).toBe('Not that.');
    f.script(reply.raw(200, { choices: [{ message: { role: 'assistant', content: null, refusal: 'I cannot help with that.' } }] }));
    const refused = await p.complete(request('hello world'), { signal: live() });
    expect(refused.output).toBe('I cannot help with that.');
    expect(refused.usage).toEqual({ promptTokens: 2, completionTokens: 6 });
  });

  it('reads the cached part of the prompt, which is billed lower', async () => {
    const f = await start();
    const body = {
      choices: [{ message: { role: 'assistant', content: 'ok' } }],
      usage: { prompt_tokens: 2000, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 1536 } },
    };
    f.script(
      reply.raw(200, body),
      reply.raw(200, { ...body, usage: { prompt_tokens: 20, completion_tokens: 5, prompt_tokens_details: { cached_tokens: 0 } } }),
    );
    expect((await provider(f).complete(request(), { signal: live() })).usage).toEqual({
      promptTokens: 2000,
      completionTokens: 5,
      cachedTokens: 1536,
    });
    expect((await provider(f).complete(request(), { signal: live() })).usage).toEqual({ promptTokens: 20, completionTokens: 5 });
  });

  it('reads x-ratelimit-* headers of a success', async () => {
    const f = await start();
    f.script(
      reply.ok({
        headers: {
          'x-ratelimit-remaining-requests': '59',
          'x-ratelimit-remaining-tokens': '149000',
          'x-ratelimit-reset-requests': '1m30.5s',
          'x-ratelimit-reset-tokens': '20ms',
        },
      }),
    );
    const result = await provider(f).complete(request(), { signal: live() });
    expect(result.rateLimit).toEqual({
      limitRequests: null,
      limitTokens: null,
      remainingRequests: 59,
      remainingTokens: 149000,
      resetRequestsMs: 90_500,
      resetTokensMs: 20,
    });
  });
});

describe('OpenAIProvider: classification over HTTP', () => {
  it.each([
    [reply.serverError(500), 'retryable', 'server', 500],
    [reply.serverError(503, 'Service Unavailable'), 'retryable', 'server', 503],
    [reply.error(408, 'Request Timeout'), 'retryable', 'server', 408],
    [reply.error(409, 'Conflict'), 'retryable', 'server', 409],
    [reply.rateLimited(1500), 'retryable', 'rate_limit', 429],
    [reply.quota(), 'run', 'quota', 429],
    [reply.unauthorized(), 'run', 'auth', 401],
    [reply.error(403, 'Country not supported'), 'run', 'auth', 403],
    [reply.badRequest(), 'job', 'bad_request', 400],
    [reply.error(404, 'The model `gpt-9` does not exist', { code: 'model_not_found' }), 'job', 'bad_request', 404],
    [reply.error(413, 'Request entity too large'), 'job', 'bad_request', 413],
    [reply.error(422, 'Unprocessable'), 'job', 'bad_request', 422],
    [reply.error(418, "I'm a teapot"), 'job', 'bad_request', 418],
    [reply.contextTooLong(), 'job', 'too_long', 400],
  ] as const)('%#: %o -> %s/%s', async (answer, scope, reason, status) => {
    const f = await start();
    f.script(answer);
    const err = await failure(provider(f));
    expect({ scope: err.scope, reason: err.reason, status: err.status }).toEqual({ scope, reason, status });
    expect(err.message.startsWith(`HTTP ${status}: `)).toBe(true);
  });

  it("puts the provider's own message in a stable message", async () => {
    const f = await start();
    f.script(reply.badRequest("Invalid value for 'temperature': must be between 0 and 2."));
    expect((await failure(provider(f))).message).toBe("HTTP 400: Invalid value for 'temperature': must be between 0 and 2.");
    const noisy = 'The server had an error while processing your request. (Please include the request ID req_8f2a9c1d3e in your message.)';
    f.script(reply.serverError(500, noisy), reply.serverError(500, noisy.replace('8f2a9c1d3e', '77aa00bb11')));
    const [a, b] = [await failure(provider(f)), await failure(provider(f))];
    expect(a.message).toBe('HTTP 500: The server had an error while processing your request.');
    expect(b.message).toBe(a.message);
  });

  it('reads retry-after-ms, retry-after seconds and retry-after dates of a 429', async () => {
    const f = await start();
    f.script(
      reply.raw(
        429,
        { error: { message: 'slow down', type: 'requests', code: 'rate_limit_exceeded' } },
        { 'retry-after-ms': '250', 'retry-after': '1' },
      ),
      reply.raw(429, { error: { message: 'slow down' } }, { 'retry-after': '7' }),
      reply.raw(
        429,
        { error: { message: 'slow down' } },
        {
          'retry-after': new Date(Date.now() + 30_000).toUTCString(),
          'x-ratelimit-remaining-tokens': '0',
          'x-ratelimit-reset-tokens': '6m0s',
        },
      ),
    );
    const p = provider(f);
    expect((await failure(p)).retryAfterMs).toBe(250);
    expect((await failure(p)).retryAfterMs).toBe(7000);
    const dated = await failure(p);
    expect(dated.retryAfterMs).toBeGreaterThan(27_000);
    expect(dated.retryAfterMs).toBeLessThanOrEqual(30_000);
    expect(dated.rateLimit).toEqual({
      limitRequests: null,
      limitTokens: null,
      remainingRequests: null,
      remainingTokens: 0,
      resetRequestsMs: null,
      resetTokensMs: 360_000,
    });
  });

  it('gets the 429 headers of the fake RPM limiter', async () => {
    const f = await start({ rpm: 60 }); // 1 per second
    const p = provider(f);
    await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 5));
    await p.complete(request('one'), { signal: live() });
    const err = await failure(p, request('two'));
    expect(err.reason).toBe('rate_limit');
    expect(err.retryAfterMs).toBeGreaterThan(0);
    expect(err.retryAfterMs).toBeLessThanOrEqual(1000);
    // OpenAI-style headers: the minute's budget (60, one used), not the spent 1-second window
    expect(err.rateLimit?.remainingRequests).toBe(59);
    expect(err.rateLimit?.resetRequestsMs).toBeGreaterThan(0);
    expect(err.rateLimit?.resetRequestsMs).toBeLessThanOrEqual(1000);
  });

  it('turns a hang into a retryable timeout that frees the request quickly', async () => {
    const f = await start();
    f.script(reply.hang());
    const started = Date.now();
    const err = await failure(provider(f, { timeoutMs: 200 }));
    expect(err).toMatchObject({
      scope: 'retryable',
      reason: 'timeout',
      message: 'Timed out after 200 ms (--timeout; if the provider is only slow, raise it)',
    });
    expect(Date.now() - started).toBeLessThan(2000);
  });

  it('times out a body that starts but never finishes', async () => {
    const f = await start();
    // A body that never ends: headers and half the body, then silence (the socket stays open).
    f.script(reply.raw(200, '{"choices":[', { 'content-length': '100' }));
    const err = await failure(provider(f, { timeoutMs: 300 }));
    expect(err.reason).toBe('timeout');
  });

  it('classifies a connection reset and a refused connection as retryable network errors', async () => {
    const f = await start();
    f.script(reply.reset());
    const reset = await failure(provider(f));
    expect(reset).toMatchObject({ scope: 'retryable', reason: 'network', status: null });
    expect(reset.message).toMatch(/^Network error: /);
    await f.down();
    const refused = await failure(provider(f));
    expect(refused).toMatchObject({ scope: 'retryable', reason: 'network' });
    expect(refused.message).toContain('ECONNREFUSED');
  });

  it('classifies a truncated body and a non-completion 200 as retryable bad_body', async () => {
    const f = await start();
    f.script(reply.truncate(), reply.raw(200, 'not json at all'), reply.raw(200, { object: 'list', data: [] }));
    for (let i = 0; i < 3; i++) {
      const err = await failure(provider(f));
      expect(err).toMatchObject({ scope: 'retryable', reason: 'bad_body', status: 200 });
      expect(err.message).toMatch(/^HTTP 200: invalid completion body: /);
    }
  });

  it('tells a 200 no model worked on (an HTML page, an error object) from one that may be billed (cut short, not a completion)', async () => {
    const f = await start();
    f.script(
      reply.raw(200, '<html><body>Service temporarily unavailable</body></html>', { 'content-type': 'text/html' }),
      reply.raw(200, { error: { message: 'upstream provider error', code: 502 } }),
      reply.truncate(),
      reply.raw(200, '{"id":"chatcmpl-1","choices":[{"message":'),
      reply.raw(200, { object: 'list', data: [] }),
      reply.raw(200, ''),
    );
    const kinds = [];
    for (let i = 0; i < 6; i++) {
      const err = await failure(provider(f));
      kinds.push([err.reason, err.unbilled, mayBeBilled(err)]);
    }
    expect(kinds).toEqual([
      ['bad_body', true, false],
      ['bad_body', true, false],
      ['bad_body', false, true],
      ['bad_body', false, true],
      ['bad_body', false, true],
      ['bad_body', false, true],
    ]);
  });

  it("says how a 200 that is not JSON begins: what answered instead (a proxy's page), with the key left out", async () => {
    const f = await start();
    const page = `<html><head><title>502 Bad Gateway</title></head><body>upstream ${'x'.repeat(100)} sk-test-secret</body></html>`;
    f.script(reply.raw(200, page), reply.raw(200, `Bearer ${KEY} rejected`));
    const err = await failure(provider(f));
    expect(err.message).toBe(
      'HTTP 200: invalid completion body: not JSON (it begins: "<html><head><title>502 Bad Gateway</title></head><body>upstr…")',
    );
    expect((await failure(provider(f))).message).not.toContain(KEY);
  });

  it('rejects with the signal reason, not a ProviderError, when the caller aborts', async () => {
    const f = await start();
    f.script(reply.hang());
    const controller = new AbortController();
    const reason = new Error('stop requested');
    const pending = provider(f).complete(request(), { signal: controller.signal });
    await f.waitForRequests(1);
    controller.abort(reason);
    await expect(pending).rejects.toBe(reason);
    const already = AbortSignal.abort(reason);
    await expect(provider(f).complete(request(), { signal: already })).rejects.toBe(reason);
    expect(f.received).toBe(1);
  });
});

describe('OpenAIProvider: the key never leaks', () => {
  it('redacts the key from messages and causes even when the server echoes it', async () => {
    const f = await start();
    const echo = (status: number) => f.respond((r) => reply.error(status, `bad auth header: ${String(r.headers.authorization)}`));
    for (const status of [400, 401, 500, 429]) {
      echo(status);
      const err = await failure(provider(f));
      expect(err.message).toContain('bad auth header: Bearer [REDACTED]');
      expect(err.message).not.toContain('SECRETSECRET');
      expect(JSON.stringify(err)).not.toContain('SECRETSECRET');
    }
    // A key that is not shaped like an OpenAI key is redacted too, and so are causes of network errors.
    const odd = 'my-local-token-xyz';
    f.respond((r) => reply.error(400, `got ${String(r.headers.authorization)}`));
    const err = await failure(provider(f, { apiKey: odd }));
    expect(err.message).toBe('HTTP 400: got Bearer [REDACTED]');
    const throwing = new OpenAIProvider({
      baseUrl: f.url,
      apiKey: odd,
      transport: (_options, handler) => {
        handler.onResponseError?.(null as never, new TypeError('fetch failed', { cause: new Error(`bad header ${odd}`) }));
      },
    });
    const netErr = await failure(throwing as OpenAIProvider);
    expect(netErr.reason).toBe('network');
    const chain = [netErr.message, (netErr.cause as Error).message, ((netErr.cause as Error).cause as Error).message].join(' ');
    expect(chain).toContain('[REDACTED]');
    expect(chain).not.toContain(odd);
  });
});

describe('OpenAIProvider: the dispatch handler', () => {
  it('decodes a UTF-8 character cut between two body chunks', async () => {
    const f = await start();
    const content = 'naïve café, 日本語 🙂 the end';
    const body = JSON.stringify({
      choices: [{ message: { role: 'assistant', content } }],
      usage: { prompt_tokens: 1, completion_tokens: 2 },
    });
    // cut inside the emoji's four bytes, and inside a three-byte character of an error message
    const inEmoji = Buffer.byteLength(body.slice(0, body.indexOf('🙂'))) + 2;
    const error = JSON.stringify({ error: { message: 'Ungültige Anfrage: 日本語', type: 'invalid_request_error' } });
    const inKanji = Buffer.byteLength(error.slice(0, error.indexOf('本'))) + 1;
    f.script(reply.split(200, body, inEmoji), reply.split(400, error, inKanji));
    expect((await provider(f).complete(request(), { signal: live() })).output).toBe(content);
    expect((await failure(provider(f))).message).toBe('HTTP 400: Ungültige Anfrage: 日本語');
  });

  it('leaves no abort listener on a long-lived signal, however each request ends', async () => {
    const f = await start();
    const p = provider(f, { timeoutMs: 300 });
    const signal = new AbortController().signal;
    f.script(reply.serverError(500), reply.reset(), reply.truncate(), reply.hang(), reply.split(200, '{"choices":[]}', 3));
    for (let i = 0; i < 5; i++) await failure(p, request(`fails ${i}`), signal);
    for (let i = 0; i < 20; i++) await p.complete(request(`ok ${i}`), { signal });
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });

  it('reads rate-limit and retry-after headers whatever the case of their names', async () => {
    const f = await start();
    f.script(
      reply.raw(
        429,
        { error: { message: 'slow down' } },
        { 'Retry-After-Ms': '250', 'X-RateLimit-Remaining-Tokens': '0', 'X-RATELIMIT-RESET-TOKENS': '6m0s' },
      ),
      reply.ok({ headers: { 'Anthropic-RateLimit-Requests-Remaining': '7' } }),
    );
    const err = await failure(provider(f));
    expect(err.retryAfterMs).toBe(250);
    expect(err.rateLimit).toMatchObject({ remainingTokens: 0, resetTokensMs: 360_000 });
    expect((await provider(f).complete(request(), { signal: live() })).rateLimit?.remainingRequests).toBe(7);
  });

  it('answers an abort at once and never sends a request aborted while it waited for a connection', async () => {
    const f = await start();
    const p = new OpenAIProvider({ baseUrl: f.url, connections: 1, timeoutMs: 5000 });
    f.script(reply.ok({ latencyMs: 1000 }));
    const first = p.complete(request('first'), { signal: live() });
    await f.waitForRequests(1);
    const controller = new AbortController();
    const queued = p.complete(request('queued'), { signal: controller.signal });
    const reason = new Error('stop requested');
    const abortedAt = Date.now();
    controller.abort(reason);
    await expect(queued).rejects.toBe(reason);
    expect(Date.now() - abortedAt).toBeLessThan(500); // not when the connection frees up
    await first;
    await new Promise((r) => setTimeout(r, 100));
    expect(f.received).toBe(1);
    await p.close();
  });

  it('classifies a transport that throws before sending as a network error', async () => {
    const p = new OpenAIProvider({
      baseUrl: 'http://127.0.0.1:9/v1',
      transport: () => {
        throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED 127.0.0.1:9') });
      },
    });
    expect(await failure(p)).toMatchObject({ reason: 'network', scope: 'retryable' });
  });

  it('settles when reading the finished body throws (a body too long for one string): undici then reports an error to a settled handler', async () => {
    // What undici does with a handler whose onResponseEnd throws: it calls onResponseError. The chunk
    // stands in for a body past the longest string V8 makes (about 512 MB), which is not sent in a test.
    const unreadable = {
      toString: () => {
        throw new Error('Cannot create a string longer than 0x1fffffe8 characters');
      },
    };
    const p = new OpenAIProvider({
      baseUrl: 'http://127.0.0.1:9/v1',
      transport: (_options, handler) => {
        const controller = { abort() {}, pause() {}, resume() {}, aborted: false, paused: false, reason: null, rawHeaders: [] };
        const h = handler as Required<Dispatcher.DispatchHandler>;
        h.onRequestStart(controller as never, {});
        h.onResponseStart(controller as never, 200, {}, 'OK');
        h.onResponseData(controller as never, unreadable as never);
        try {
          h.onResponseEnd(controller as never, {});
        } catch (err) {
          h.onResponseError(controller as never, err as Error);
        }
        return true;
      },
    });
    const settled = await Promise.race([failure(p), new Promise((r) => setTimeout(() => r('still pending after 2 s'), 2000))]);
    expect(settled).toMatchObject({ reason: 'bad_body' });
  });
});
