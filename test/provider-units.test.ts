import { describe, expect, it } from 'vitest';
import { parseDuration, parseRateLimit, parseRetryAfter } from '../src/provider/headers.js';
import { cleanMessage, classifyHttpError, classifyNetworkError } from '../src/provider/classify.js';
import { redactSecret } from '../src/provider/redact.js';
import { endpointUrl } from '../src/provider/endpoint.js';
import { countTextTokens, loadTokenizer } from '../src/provider/tokens.js';
import { countTokens } from 'gpt-tokenizer';
import { randomBytes } from 'node:crypto';
import { createProvider, resolveBaseUrl, DEFAULT_BASE_URL } from '../src/provider/create.js';
import { LlmqError, UsageError } from '../src/errors.js';
import { MockProvider } from '../src/provider/mock.js';

const headers = (h: Record<string, string>) => new Headers(h);

describe('header parsing', () => {
  it.each([
    ['20ms', 20],
    ['1s', 1000],
    ['6m0s', 360_000],
    ['1m30.5s', 90_500],
    ['0.5s', 500],
    ['2h', 7_200_000],
    ['3', 3000],
    ['1h2m3s4ms', 3_723_004],
    ['', null],
    ['soon', null],
    ['5x', null],
    ['1s garbage', null],
  ] as const)('parseDuration(%j) = %j', (text, ms) => {
    expect(parseDuration(text)).toBe(ms);
  });

  it('prefers retry-after-ms, then retry-after seconds, then an HTTP date', () => {
    const now = Date.parse('2025-01-01T00:00:00Z');
    expect(parseRetryAfter(headers({ 'retry-after-ms': '120.4', 'retry-after': '9' }), now)).toBe(120);
    expect(parseRetryAfter(headers({ 'retry-after': '2' }), now)).toBe(2000);
    expect(parseRetryAfter(headers({ 'retry-after': 'Wed, 01 Jan 2025 00:00:05 GMT' }), now)).toBe(5000);
    expect(parseRetryAfter(headers({ 'retry-after': 'Tue, 31 Dec 2024 23:00:00 GMT' }), now)).toBe(0);
    expect(parseRetryAfter(headers({ 'retry-after': 'later' }), now)).toBeNull();
    expect(parseRetryAfter(headers({}), now)).toBeNull();
  });

  it('takes a retry-after past a day as a day: a timer past 2^31 ms fires at once, and a lane held longer holds it past any run', () => {
    const now = Date.parse('2025-01-01T00:00:00Z');
    expect(parseRetryAfter(headers({ 'retry-after': '9'.repeat(400) }), now)).toBe(86_400_000);
    expect(parseRetryAfter(headers({ 'retry-after-ms': '1e12' }), now)).toBe(86_400_000);
    expect(parseRetryAfter(headers({ 'retry-after': 'Fri, 01 Jan 2100 00:00:00 GMT' }), now)).toBe(86_400_000);
    expect(parseRetryAfter(headers({ 'retry-after-ms': 'Infinity', 'retry-after': '3' }), now)).toBe(3000);
  });

  it('reads x-ratelimit-* or returns null when there are none', () => {
    expect(parseRateLimit(headers({}))).toBeNull();
    expect(parseRateLimit(headers({ 'x-ratelimit-remaining-tokens': '10', 'x-ratelimit-reset-requests': '6m0s' }))).toEqual({
      limitRequests: null,
      limitTokens: null,
      remainingRequests: null,
      remainingTokens: 10,
      resetRequestsMs: 360_000,
      resetTokensMs: null,
    });
  });
});

describe('classification details', () => {
  it('reads the error shapes of compatible servers', () => {
    const c = (status: number, body: string) => classifyHttpError(status, body, headers({}), null, undefined);
    expect(c(400, '{"detail":"bad field"}').message).toBe('HTTP 400: bad field'); // FastAPI / vLLM
    expect(c(400, '{"error":"model required"}').message).toBe('HTTP 400: model required'); // Ollama
    expect(c(502, '<html><body>Bad Gateway</body></html>').message).toBe('HTTP 502: Bad Gateway');
    expect(c(503, '').message).toBe('HTTP 503: Service Unavailable');
    expect(c(404, '404 page not found').message).toBe('HTTP 404: 404 page not found (check --base-url: it usually ends in /v1)');
    // a web server that takes no POST there (python -m http.server: 501), and a server's own refusal
    expect(c(405, 'Method Not Allowed')).toMatchObject({ reason: 'bad_request', scope: 'job' });
    expect(c(501, '<html><body>Unsupported method</body></html>')).toMatchObject({
      reason: 'bad_request',
      message: expect.stringContaining('(check --base-url: it usually ends in /v1)'),
    });
    const llamaCpp = c(
      501,
      '{"error":{"code":501,"message":"This server does not support completions. Start it without `--embeddings`","type":"not_supported_error"}}',
    );
    expect(llamaCpp.reason).toBe('bad_request');
    expect(llamaCpp.message).not.toContain('check --base-url');
    expect(c(400, '{"error":{"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}').reason).toBe(
      'too_long',
    );
    expect(c(429, '{"error":{"message":"quota","type":"insufficient_quota","code":null}}').reason).toBe('quota');
    // one request over the key's tokens per minute: no wait lets it through
    const tooLarge = c(
      429,
      '{"error":{"message":"Request too large for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000, Requested 41234. The input or output tokens must be reduced in order to run successfully.","type":"tokens","code":"rate_limit_exceeded"}}',
    );
    expect(tooLarge).toMatchObject({ scope: 'job', reason: 'too_long' });
    expect(tooLarge.message).toMatch(/^HTTP 429: Request too large .* Limit 30000, Requested 41234\..*max_tokens/);
    expect(
      c(
        429,
        '{"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000.","type":"tokens","code":"rate_limit_exceeded"}}',
      ).reason,
    ).toBe('rate_limit');
    expect(c(401, '{}').message).toBe('HTTP 401: Unauthorized. Check LLMQ_API_KEY (or OPENAI_API_KEY) and --base-url.');
    // a 403 read the key: what it asked may not be done, and where it comes from is no matter of the key
    expect(c(403, '{"error":{"message":"This model is not available to your organization.","code":null}}').message).toBe(
      'HTTP 403: This model is not available to your organization. The key was read, and may not do this: check that it (LLMQ_API_KEY, else OPENAI_API_KEY) may use the model and its project, and --base-url.',
    );
    expect(
      c(403, '{"error":{"message":"Country, region, or territory not supported","code":"unsupported_country_region_territory"}}').message,
    ).toMatch(
      /^HTTP 403: Country, region, or territory not supported\. The provider does not serve requests from where this machine is: no key changes that/,
    );
    // Google's OpenAI-compatible endpoint: the error in a list
    const gemini = c(
      429,
      '[{\n  "error": {\n    "code": 429,\n    "message": "Resource has been exhausted (e.g. check quota).",\n    "status": "RESOURCE_EXHAUSTED"\n  }\n}\n]',
    );
    expect(gemini).toMatchObject({
      reason: 'rate_limit',
      code: '429',
      message: 'HTTP 429: Resource has been exhausted (e.g. check quota).',
    });
    expect(c(500, '[]').message).toBe('HTTP 500: Internal Server Error');
  });

  it("takes a 429's wait from its body when no header says it: Google's RetryInfo and message, OpenAI's message", () => {
    const c = (status: number, body: string, h: Record<string, string> = {}) =>
      classifyHttpError(status, body, headers(h), null, undefined);
    // as Google's OpenAI-compatible endpoint sends a minute's quota spent: no header, the wait in the body twice
    const google = JSON.stringify([
      {
        error: {
          code: 429,
          message:
            'You exceeded your current quota, please check your plan and billing details.\n* Quota exceeded for metric: ' +
            'generativelanguage.googleapis.com/generate_content_paid_tier_requests, limit: 120, model: gemini-x\nPlease retry in 36.429760048s.',
          status: 'RESOURCE_EXHAUSTED',
          details: [
            {
              '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
              violations: [{ quotaId: 'GenerateRequestsPerMinutePerProjectPerModel', quotaValue: '120' }],
            },
            { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '36s' },
          ],
        },
      },
    ]);
    const g = c(429, google);
    expect(g).toMatchObject({ reason: 'rate_limit', retryAfterMs: 36_430, retryAfterInBody: true, rateLimit: { limitRequests: 120 } });
    // the delay, which changes with every 429, is not in the message: equal failures read alike
    expect(g.message).toBe(
      'HTTP 429: You exceeded your current quota, please check your plan and billing details. * Quota exceeded for metric: ' +
        'generativelanguage.googleapis.com/generate_content_paid_tier_requests, limit: 120, model: gemini-x',
    );
    const retryInfoOnly = (delay: string) =>
      c(
        429,
        JSON.stringify({ error: { code: 429, details: [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: delay }] } }),
      ).retryAfterMs;
    expect(retryInfoOnly('45.837906927s')).toBe(45_838);
    expect(retryInfoOnly('soon')).toBeNull();
    // OpenAI's hint is this request's tokens back, not a wait for the lane; its headers say that
    const openai = (m: string) => c(429, JSON.stringify({ error: { message: m, type: 'requests', code: 'rate_limit_exceeded' } }));
    expect(openai('Rate limit reached for x on requests per min (RPM): Limit 3. Please try again in 1m3.5s.').retryAfterMs).toBeNull();
    // a header says it first; a 400's body asks no wait
    expect(c(429, google, { 'retry-after': '2' })).toMatchObject({ retryAfterMs: 2000, retryAfterInBody: false });
    expect(c(400, google).retryAfterMs).toBeNull();
    // a day at most, as a header's
    expect(retryInfoOnly('9999999s')).toBe(86_400_000);
  });

  it("takes the requests-per-minute quota a 429's body says it spent (Google's QuotaFailure) as a limit said; not its token or daily quotas", () => {
    const quota = (...violations: object[]) =>
      classifyHttpError(
        429,
        JSON.stringify([{ error: { code: 429, details: [{ '@type': 'type.googleapis.com/google.rpc.QuotaFailure', violations }] } }]),
        headers({}),
        null,
        undefined,
      ).rateLimit;
    const said = {
      limitTokens: null,
      remainingRequests: null,
      remainingTokens: null,
      resetRequestsMs: null,
      resetTokensMs: null,
      inBody: true,
    };
    expect(quota({ quotaId: 'GenerateRequestsPerMinutePerProjectPerModel-FreeTier', quotaValue: '15' })).toEqual({
      ...said,
      limitRequests: 15,
    });
    // the lowest of several
    expect(
      quota(
        { quotaId: 'GenerateRequestsPerMinutePerProjectPerModel', quotaValue: '1000' },
        { quotaId: 'GenerateRequestsPerMinutePerProject', quotaValue: '300' },
      ),
    ).toEqual({ ...said, limitRequests: 300 });
    // input tokens (a lane weighs max_tokens too), a day's quota, a value that is no number: none
    expect(quota({ quotaId: 'GenerateContentPaidTierInputTokensPerModelPerMinute', quotaValue: '4000000' })).toBeNull();
    expect(quota({ quotaId: 'GenerateRequestsPerDayPerProjectPerModel-FreeTier', quotaValue: '20' })).toBeNull();
    expect(quota({ quotaId: 'GenerateRequestsPerMinutePerProjectPerModel', quotaValue: 'many' })).toBeNull();
    // a quota per day spent, and no other: the model takes nothing more in this run (a wait of seconds, asked again all day, gets nothing through)
    const daily = classifyHttpError(
      429,
      JSON.stringify([
        {
          error: {
            code: 429,
            message: 'You exceeded your current quota.\nPlease retry in 36.4s.',
            details: [
              {
                '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
                violations: [{ quotaId: 'GenerateRequestsPerDayPerProjectPerModel-FreeTier', quotaValue: '20' }],
              },
              { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '36s' },
            ],
          },
        },
      ]),
      headers({}),
      null,
      undefined,
    );
    expect(daily).toMatchObject({ scope: 'model', reason: 'quota', rateLimit: null });
    expect(daily.message).toBe(
      'HTTP 429: You exceeded your current quota. The quota per day is spent (GenerateRequestsPerDayPerProjectPerModel-FreeTier: 20): ' +
        "it comes back when the provider's day turns, or raise it with the provider.",
    );
    // a quota of 0 a day (a model with no free tier) never comes back with the day
    const none = classifyHttpError(
      429,
      JSON.stringify({
        error: {
          details: [
            {
              '@type': 'google.rpc.QuotaFailure',
              violations: [{ quotaId: 'GenerateRequestsPerDayPerProjectPerModel-FreeTier', quotaValue: '0' }],
            },
          ],
        },
      }),
      headers({}),
      null,
      undefined,
    );
    expect(none).toMatchObject({ scope: 'model', reason: 'quota' });
    expect(none.message).toContain(
      "The quota per day is 0 (GenerateRequestsPerDayPerProjectPerModel-FreeTier: 0): the key's project may not use the model",
    );
    // per day beside per minute: the minute's, waited out
    expect(
      classifyHttpError(
        429,
        JSON.stringify({
          error: {
            details: [
              {
                '@type': 'google.rpc.QuotaFailure',
                violations: [
                  { quotaId: 'GenerateRequestsPerDayPerProjectPerModel', quotaValue: '1000' },
                  { quotaId: 'GenerateRequestsPerMinutePerProjectPerModel', quotaValue: '60' },
                ],
              },
            ],
          },
        }),
        headers({}),
        null,
        undefined,
      ),
    ).toMatchObject({ scope: 'retryable', reason: 'rate_limit', rateLimit: { limitRequests: 60 } });
    // headers say it first
    const h = {
      limitRequests: 500,
      limitTokens: null,
      remainingRequests: 0,
      remainingTokens: null,
      resetRequestsMs: 100,
      resetTokensMs: null,
    };
    const body = JSON.stringify({
      error: {
        details: [
          { '@type': 'google.rpc.QuotaFailure', violations: [{ quotaId: 'GenerateRequestsPerMinutePerProjectPerModel', quotaValue: '9' }] },
        ],
      },
    });
    expect(classifyHttpError(429, body, headers({}), h, undefined).rateLimit).toEqual(h);
  });

  it('keeps messages stable and short', () => {
    const a = cleanMessage(
      'Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000. Please try again in 20ms.',
      undefined,
    );
    const b = cleanMessage(
      'Rate limit reached for gpt-4o in organization org-x on tokens per min (TPM): Limit 30000. Please try again in 1.5s.',
      undefined,
    );
    expect(a).toBe(b);
    expect(cleanMessage('Limit 3. Please try again in 1m3.5s. Visit the docs.', undefined)).toBe('Limit 3. Visit the docs.');
    expect(cleanMessage('Quota exceeded.\nPlease retry in 36.429760048s.', undefined)).toBe('Quota exceeded.');
    // a unit spelled out is no duration of theirs: left whole
    expect(cleanMessage('Busy. Please try again in 5 minutes.', undefined)).toBe('Busy. Please try again in 5 minutes.');
    expect(cleanMessage('x'.repeat(1000), undefined).length).toBeLessThanOrEqual(300);
    expect(cleanMessage('line one\n  line two', undefined)).toBe('line one line two');
  });

  it('names the code of a network error', () => {
    const err = classifyNetworkError(
      new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' }) }),
      undefined,
    );
    expect(err.message).toBe('Network error: connect ECONNREFUSED 127.0.0.1:9');
    const sock = classifyNetworkError(
      new TypeError('fetch failed', { cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }) }),
      undefined,
    );
    expect(sock.message).toBe('Network error: other side closed (UND_ERR_SOCKET)');
  });

  it('redacts the configured secret and anything shaped like a key', () => {
    expect(redactSecret('key=abc12345 and abc12345', 'abc12345')).toBe('key=[REDACTED] and [REDACTED]');
    expect(redactSecret('Incorrect API key provided: sk-proj-AAAAAAAAAAAAAAAAAAAAAAAA', undefined)).toBe(
      'Incorrect API key provided: [REDACTED]',
    );
  });
});

describe('createProvider', () => {
  const env = (e: Record<string, string>) => e;

  it('resolves the base URL from the flag, then LLMQ_BASE_URL, then OPENAI_BASE_URL, then OpenAI', () => {
    const all = env({ LLMQ_BASE_URL: 'http://a:1/v1', OPENAI_BASE_URL: 'http://b:2/v1' });
    expect(resolveBaseUrl('http://flag:3/v1/', all).url).toBe('http://flag:3/v1');
    expect(resolveBaseUrl(undefined, all).url).toBe('http://a:1/v1');
    expect(resolveBaseUrl(undefined, env({ OPENAI_BASE_URL: 'http://b:2/v1/chat/completions' })).url).toBe('http://b:2/v1');
    expect(resolveBaseUrl(undefined, env({}))).toEqual({ url: DEFAULT_BASE_URL, source: 'default' });
  });

  it('rejects a bad base URL naming --base-url and the value', () => {
    expect(() => resolveBaseUrl('localhost:8080', env({}))).toThrow(UsageError);
    expect(() => resolveBaseUrl('not a url', env({}))).toThrow(
      "Expected --base-url to be an http(s) URL like https://api.openai.com/v1 or http://127.0.0.1:11434/v1, got 'not a url'.",
    );
    expect(() => resolveBaseUrl(undefined, env({ LLMQ_BASE_URL: 'ftp://x' }))).toThrow('--base-url (from LLMQ_BASE_URL)');
  });

  it('refuses a user name or password in the base URL without echoing it, from the flag or either env variable', () => {
    const withPassword = 'http://user:pw-SECRET@127.0.0.1:11434/v1';
    for (const [flag, e, name] of [
      [withPassword, {}, '--base-url'],
      [undefined, { LLMQ_BASE_URL: withPassword }, '--base-url (from LLMQ_BASE_URL)'],
      [undefined, { OPENAI_BASE_URL: 'http://only-a-user@127.0.0.1/v1' }, '--base-url (from OPENAI_BASE_URL)'],
    ] as const) {
      const error = (() => {
        try {
          createProvider({ baseUrl: flag }, env(e));
        } catch (caught) {
          return caught as Error;
        }
        throw new Error('expected createProvider to throw');
      })();
      expect(error).toBeInstanceOf(UsageError);
      expect(error.message).toBe(`${name} contains a user name or password; put the key in LLMQ_API_KEY instead.`);
    }
    // A URL that does not parse is quoted, password masked.
    expect(() => resolveBaseUrl('ftp://u:pw-SECRET@h', env({}))).toThrow("got 'ftp://u:***@h'");
  });

  it('needs a key for the OpenAI API but not for other servers', () => {
    expect(() => createProvider({}, env({}))).toThrow(LlmqError);
    expect(() => createProvider({}, env({}))).toThrow(/LLMQ_API_KEY.*--provider mock/);
    expect(createProvider({}, env({ OPENAI_API_KEY: 'sk-x' })).name).toBe('openai-compatible (https://api.openai.com/v1)');
    expect(createProvider({ baseUrl: 'http://127.0.0.1:11434/v1?api-key=x' }, env({})).name).toBe(
      'openai-compatible (http://127.0.0.1:11434/v1)',
    );
    expect(() => createProvider({}, env({ LLMQ_API_KEY: 'two words' }))).toThrow(/LLMQ_API_KEY contains spaces/);
    expect(createProvider({ provider: 'mock' }, env({}))).toBeInstanceOf(MockProvider);
  });
});

describe('endpointUrl', () => {
  it.each([
    ['https://api.openai.com/v1', '/chat/completions', 'https://api.openai.com/v1/chat/completions'],
    ['https://api.openai.com/v1/', '/batches?limit=100', 'https://api.openai.com/v1/batches?limit=100'],
    [
      'https://x.example/openai?api-version=2024-06-01',
      '/files/f-1/content',
      'https://x.example/openai/files/f-1/content?api-version=2024-06-01',
    ],
    [
      'https://x.example/openai/?api-version=1',
      '/batches?limit=100&after=b_1',
      'https://x.example/openai/batches?api-version=1&limit=100&after=b_1',
    ],
  ])('%s + %s', (base, path, url) => {
    expect(endpointUrl(base, path).href).toBe(url);
  });
});

describe('token counts', () => {
  // The BPE's merges are quadratic in a word's length: whole, this word took over a minute, with
  // the run's heartbeats stopped meanwhile (a hang guard, not a speed figure: that is the bench's).
  it('count a 200 KB word in pieces, without stalling the event loop for minutes', { timeout: 60_000 }, () => {
    // base64 of an empty buffer: one letter, 200,000 times, one pre-token for the BPE
    const blob = Buffer.alloc(150_000).toString('base64');
    const started = process.cpuUsage(); // CPU, not wall: a loaded machine stretches the wall time
    const n = countTextTokens(`see ${blob} here`);
    const used = process.cpuUsage(started);
    expect((used.user + used.system) / 1000).toBeLessThan(10_000);
    expect(n).toBeGreaterThan(blob.length / 16);
    expect(n).toBeLessThan(blob.length / 4);
  });

  // Words seldom repeated (base64 in lines, hex, numbers) filled the tokenizer's merge cache, whose
  // evictions then slowed every count after: 1 MB took 0.9 s, each next 10 s (a hang guard, as above).
  // Each document's CPU time against the first's, not the wall time of all: a loaded machine stretched
  // that past its guard (11 s in CI, 6 s on a quiet one), where each count's CPU stays level.
  it('counts text of words seldom repeated, one document after another, without slowing down', { timeout: 120_000 }, () => {
    loadTokenizer(); // its load is not the first document's
    const cpuMs: number[] = [];
    for (let i = 0; i < 4; i++) {
      const text = base64Lines(750_000);
      const started = process.cpuUsage();
      expect(countTextTokens(text)).toBeGreaterThan(500_000);
      const used = process.cpuUsage(started);
      cpuMs.push((used.user + used.system) / 1000);
    }
    expect(Math.max(...cpuMs.slice(1)), `CPU ms per document: ${cpuMs.map(Math.round).join(', ')}`).toBeLessThan(2 * cpuMs[0]!);
  });

  it('a text over a MiB is counted from slices spread over it, within a few percent of the whole', () => {
    const text = base64Lines(2_400_000);
    expect(text.length).toBeGreaterThan(3_000_000);
    // the whole, counted a MiB at a time (each under the length counted whole)
    let whole = 0;
    for (let at = 0; at < text.length; at += 1 << 20) whole += countTextTokens(text.slice(at, at + (1 << 20)));
    const sampled = countTextTokens(text);
    expect(Math.abs(sampled - whole) / whole).toBeLessThan(0.03);
    // a prompt of two kinds of text: the slices take each in its share
    const prose = 'The printer on the third floor jams whenever someone prints double-sided. '.repeat(20_000);
    const mixed = prose + text.slice(0, prose.length);
    const parts = countTextTokens(prose) + countTextTokens(text.slice(0, prose.length));
    expect(Math.abs(countTextTokens(mixed) - parts) / parts).toBeLessThan(0.05);
  });

  it('a word cut into pieces counts within a token a piece of the whole', () => {
    const word = randomBytes(3_000).toString('hex');
    const whole = countTokens(word, { disallowedSpecial: new Set() });
    expect(Math.abs(countTextTokens(word) - whole)).toBeLessThanOrEqual(word.length / 1000);
    expect(countTextTokens('hello world')).toBe(countTokens('hello world'));
  });
});

/** Random bytes as base64 in lines of 76 characters, as `base64` writes a file: words seldom repeated. */
function base64Lines(bytes: number): string {
  return (
    randomBytes(bytes)
      .toString('base64')
      .match(/.{1,76}/g) ?? []
  ).join('\n');
}
