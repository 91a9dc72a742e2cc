/**
 * A real HTTP fake of OpenAI's `POST /v1/chat/completions` on 127.0.0.1 (random port), for tests and
 * benches.
 *
 * ```ts
 * const fake = await FakeOpenAI.start({ latencyMs: 20, rpm: 600 });  // fake.url = http://127.0.0.1:PORT/v1
 * fake.script(reply.serverError(503), reply.hang());   // the next two requests, then back to normal
 * fake.respond((r) => (r.attempt === 1 ? reply.reset() : undefined)); // or decide per request
 * fake.configure({ latencyMs: uniformLatency(200, 50), tpm: 60_000 });  // change anything at runtime
 * FakeOpenAI.start({ rpm: 600, headers: 'none', hangRate: 0.03 });  // a provider that says nothing, and hangs
 * await fake.down(); await fake.up();                  // refuse connections, then come back on the same port
 * fake.sentCount(job.key) === 1; fake.maxInFlight; fake.rateLimited; fake.requests  // what happened
 * await fake.close();
 * fake.batches.fate = () => 'expired';                // the Batch API: see fake-openai-batches.ts
 * ```
 *
 * Who answers a request, first match wins: the `script` queue, then the `respond` function (return
 * undefined or `reply.pass()` to decline), then RPM/TPM enforcement (429), then `hangRate` (the
 * request was admitted and is never answered), then a 200 whose content is `answerFor(body)` =
 * `fake answer <first 16 hex of sha256(body)>` and whose usage is counted with gpt-tokenizer.
 * Latency (server-wide or per reply) is waited before answering; a 429 from the limits is sent at
 * once, as real providers do. Hangs and `uniformLatency` draw from `seed` and the request's index, so
 * the same run meets the same ones.
 *
 * Limits (fake-openai-limits.ts) are enforced as real providers behave: fixed windows of `windowMs`
 * (default 1000 ms) aligned to the clock, each allowing `rpm * windowMs / 60000` requests and
 * `tpm * windowMs / 60000` tokens, and a per-minute budget refilling continuously (capacity rpm,
 * refilling rpm/60 per second; the same for tpm). A request's tokens are `estimateRequestTokens(body)`
 * from src/provider/tokens.ts (message text tokens by gpt-tokenizer plus `max_tokens`), the same
 * estimate the scheduler uses; override with `tokenCost`. Rejected requests use no budget.
 *
 * With `headers: 'openai'` (default) every answer while a limit is set carries OpenAI's headers,
 * which describe the per-minute budget, not the window: `x-ratelimit-limit-requests` = rpm,
 * `x-ratelimit-remaining-requests` = what is left of it, `x-ratelimit-reset-requests` = time until it
 * is full again (`1s`, `120ms`, `1m30.5s`), the same with `-tokens`; a 429 adds `retry-after-ms` (time
 * until the request would fit: the window's end) and `retry-after` (seconds, rounded up).
 * `headers: 'anthropic'` sends `anthropic-ratelimit-*` instead (reset as an RFC 3339 time);
 * `headers: 'none'` sends no rate-limit header and no `retry-after`.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { listen, readBody, send } from './fake-openai-http.js';
import { estimateRequestTokens } from '../../src/provider/tokens.js';
import { chance } from './fake-openai-chance.js';
import { FakeRateLimits, openAiDuration, type Admission, type HeaderStyle } from './fake-openai-limits.js';
import { FakeBatchApi } from './fake-openai-batches.js';
import { completionBody, sha256, type FakeHeaders, type FakeReply, type FakeRequest } from './fake-openai-replies.js';

export { answerFor, completionBody, errorBody, reply, sha256 } from './fake-openai-replies.js';
export type { FakeHeaders, FakeReply, FakeRequest } from './fake-openai-replies.js';
export { chance, uniformLatency } from './fake-openai-chance.js';
export { openAiDuration, type HeaderStyle } from './fake-openai-limits.js';

export interface FakeOpenAIOptions {
  /** Delay before answering, in ms, or a function of the request. @default 0 */
  readonly latencyMs?: number | ((req: FakeRequest) => number);
  /** Requests per minute, enforced per window; null for no limit. @default null */
  readonly rpm?: number | null;
  /** Tokens per minute, enforced per window; null for no limit. @default null */
  readonly tpm?: number | null;
  /** Length of the fixed enforcement windows. @default 1000 */
  readonly windowMs?: number;
  /** Which rate-limit headers to send: OpenAI's, Anthropic's, or none at all. @default 'openai' */
  readonly headers?: HeaderStyle;
  /** Fraction of admitted requests that are never answered. @default 0 */
  readonly hangRate?: number;
  /** Seed of the draws that pick hanging requests. @default 1 */
  readonly seed?: number;
  /** A request's token cost for TPM. @default estimateRequestTokens(json) */
  readonly tokenCost?: (req: FakeRequest) => number;
  /** Decide the answer per request; return undefined to let the server decide. @default none */
  readonly respond?: ((req: FakeRequest) => FakeReply | undefined) | null;
  /** Keep every request in `requests` (turn off for long benches; counts are kept anyway). @default true */
  readonly record?: boolean;
  /** Port to listen on. @default 0 (random) */
  readonly port?: number;
}

type Settings = Required<Omit<FakeOpenAIOptions, 'port'>>;

export class FakeOpenAI {
  /** Base URL including `/v1`, as llmq's `--base-url` takes it. */
  readonly url: string;
  readonly port: number;
  /** Every request received, in order (when `record` is on). */
  readonly requests: FakeRequest[] = [];
  /** Requests received per body hash (= job key for canonical bodies). */
  readonly counts = new Map<string, number>();
  /** Answers sent per status (and 'hang' | 'reset' | 'truncate'). */
  readonly answers = new Map<number | string, number>();
  /** Total requests received. */
  received = 0;
  /** 429s sent (by the limits or by a script). */
  rateLimited = 0;
  inFlight = 0;
  /** Highest number of requests in flight at once. */
  maxInFlight = 0;
  /** The Batch API (fake-openai-batches.ts); a job in a created batch counts in `sentCount` too. */
  readonly batches = new FakeBatchApi((key) => this.counts.set(key, (this.counts.get(key) ?? 0) + 1));

  #server: Server;
  #settings: Settings;
  #queue: FakeReply[] = [];
  #limits = new FakeRateLimits();
  #isUp = false;

  private constructor(server: Server, port: number, settings: Settings) {
    this.#server = server;
    this.port = port;
    this.url = `http://127.0.0.1:${port}/v1`;
    this.#settings = settings;
  }

  static async start(options: FakeOpenAIOptions = {}): Promise<FakeOpenAI> {
    const settings: Settings = {
      latencyMs: 0,
      rpm: null,
      tpm: null,
      windowMs: 1000,
      headers: 'openai',
      hangRate: 0,
      seed: 1,
      tokenCost: (r) => estimateRequestTokens(r.json ?? {}),
      respond: null,
      record: true,
    };
    const server = createServer();
    server.keepAliveTimeout = 30_000;
    await listen(server, options.port ?? 0);
    const fake = new FakeOpenAI(server, (server.address() as AddressInfo).port, settings);
    fake.configure(options);
    fake.#isUp = true;
    server.on('request', (req, res) => void fake.#handle(req, res));
    return fake;
  }

  /** Change any option at runtime; unnamed options keep their value. */
  configure(options: Omit<FakeOpenAIOptions, 'port'>): void {
    const defined = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
    const next = { ...this.#settings, ...defined } as Settings;
    for (const [name, perMinute] of [
      ['rpm', next.rpm],
      ['tpm', next.tpm],
    ] as const) {
      if (perMinute !== null && (perMinute * next.windowMs) / 60_000 < 1) {
        throw new Error(`fake: ${name} ${perMinute} allows less than 1 per ${next.windowMs} ms window; raise windowMs`);
      }
    }
    if (!(next.hangRate >= 0 && next.hangRate <= 1)) throw new Error(`fake: hangRate ${next.hangRate} is not a fraction`);
    this.#settings = next;
  }

  /** Answer the next requests with these replies, in order, before anything else decides. */
  script(...replies: FakeReply[]): void {
    this.#queue.push(...replies);
  }

  /** Set (or clear with null) the per-request answer function. */
  respond(fn: ((req: FakeRequest) => FakeReply | undefined) | null): void {
    this.#settings = { ...this.#settings, respond: fn };
  }

  /** How many times this body (or body hash / job key) was received. */
  sentCount(keyOrBody: string): number {
    const key = /^[0-9a-f]{64}$/.test(keyOrBody) ? keyOrBody : sha256(keyOrBody);
    return this.counts.get(key) ?? 0;
  }

  /** Bodies (as hashes) received more than once: empty when every job was sent exactly once. */
  duplicates(): string[] {
    return [...this.counts].filter(([, n]) => n > 1).map(([k]) => k);
  }

  /** Forget recorded requests, counts and the script queue (settings stay). */
  clear(): void {
    this.requests.length = 0;
    this.counts.clear();
    this.answers.clear();
    this.#queue.length = 0;
    this.received = this.rateLimited = this.maxInFlight = 0;
  }

  /** Refill the per-minute budgets and forget the current window, as for a fresh account. */
  resetLimits(): void {
    this.#limits.reset();
  }

  /** Resolve once `n` requests have been received in total. */
  async waitForRequests(n: number, timeoutMs = 10_000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (this.received < n) {
      if (Date.now() > until) throw new Error(`fake: waited ${timeoutMs} ms for ${n} requests, got ${this.received}`);
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  get isUp(): boolean {
    return this.#isUp;
  }

  /** Go down: stop listening (new connections are refused) and cut every open connection. */
  async down(): Promise<void> {
    if (!this.#isUp) return;
    this.#isUp = false;
    const closed = new Promise<void>((resolve) => this.#server.close(() => resolve()));
    this.#server.closeAllConnections();
    await closed;
  }

  /** Come back up on the same port. */
  async up(): Promise<void> {
    if (this.#isUp) return;
    await listen(this.#server, this.port);
    this.#isUp = true;
  }

  /** Shut down for good (call in afterEach). */
  async close(): Promise<void> {
    await this.down();
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const receivedAt = Date.now();
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    res.on('close', () => this.inFlight--);
    const body = await readBody(req).catch(() => null);
    if (body === null) return; // the client went away mid-body
    const endpoint = FakeBatchApi.endpointOf(req.method ?? 'GET', req.url ?? '/');
    if (endpoint) return this.batches.handle(endpoint, req, res, body);
    let json: any = null;
    try {
      json = JSON.parse(body);
    } catch {
      /* not JSON: answered with 400 below */
    }
    const key = sha256(body);
    const attempt = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, attempt);
    this.received++;
    const record: FakeRequest = {
      index: this.received,
      method: req.method ?? 'GET',
      path: req.url ?? '/',
      headers: req.headers,
      body,
      json,
      key,
      attempt,
      receivedAt,
      answered: null,
    };
    if (this.#settings.record) this.requests.push(record);
    const answer = (what: number | 'hang' | 'reset' | 'truncate') => {
      record.answered = what;
      this.answers.set(what, (this.answers.get(what) ?? 0) + 1);
      if (what === 429) this.rateLimited++;
    };

    if (record.method !== 'POST' || record.path.split('?')[0] !== '/v1/chat/completions') {
      answer(404);
      return send(res, 404, {
        error: { message: `Invalid URL (${record.method} ${record.path})`, type: 'invalid_request_error', param: null, code: null },
      });
    }
    if (json === null || typeof json !== 'object') {
      answer(400);
      return send(res, 400, {
        error: { message: 'We could not parse the JSON body of your request.', type: 'invalid_request_error', param: null, code: null },
      });
    }

    let chosen = this.#queue.shift() ?? this.#settings.respond?.(record) ?? { kind: 'pass' };
    let headers: FakeHeaders = {};
    if (chosen.kind === 'pass') {
      const limited = this.#admit(record, receivedAt);
      if (limited.rejected) {
        answer(429);
        return send(res, 429, limited.body!, limited.headers);
      }
      headers = limited.headers;
      const { hangRate, seed } = this.#settings;
      chosen = hangRate > 0 && chance(seed, record.index) < hangRate ? { kind: 'hang' } : { kind: 'ok' };
    }
    if (chosen.kind === 'hang') return answer('hang');

    const latency =
      'latencyMs' in chosen && chosen.latencyMs !== undefined
        ? chosen.latencyMs
        : typeof this.#settings.latencyMs === 'function'
          ? this.#settings.latencyMs(record)
          : this.#settings.latencyMs;
    if (latency > 0) await new Promise((r) => setTimeout(r, latency));
    if (chosen.kind === 'raw' && chosen.heldUntil) await chosen.heldUntil;
    if (res.destroyed) return;

    switch (chosen.kind) {
      case 'reset':
        answer('reset');
        req.socket.destroy();
        return;
      case 'truncate': {
        answer('truncate');
        const full = JSON.stringify(completionBody(record, {}));
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(full) });
        res.write(full.slice(0, Math.floor(full.length / 2)), () => req.socket.destroy());
        return;
      }
      case 'ok':
        answer(200);
        return send(res, 200, completionBody(record, chosen), { ...headers, ...chosen.headers });
      case 'raw':
        answer(chosen.status);
        return send(res, chosen.status, chosen.body, chosen.headers);
      case 'split': {
        answer(chosen.status);
        const bytes = Buffer.from(chosen.body, 'utf8');
        res.writeHead(chosen.status, { 'content-type': 'application/json', 'content-length': bytes.length, ...chosen.headers });
        res.write(bytes.subarray(0, chosen.at));
        setTimeout(() => res.destroyed || res.end(bytes.subarray(chosen.at)), chosen.pauseMs);
        return;
      }
    }
  }

  /** Count the request against the limits, or answer why not and for how long. */
  #admit(req: FakeRequest, now: number): { rejected: boolean; body?: object; headers: FakeHeaders } {
    const s = this.#settings;
    const cost = s.tpm === null ? 0 : s.tokenCost(req);
    const a = this.#limits.admit(s, cost, now);
    if (!a.rejected) return { rejected: false, headers: a.headers };
    const message =
      (a.over === 'requests'
        ? `Rate limit reached for fake on requests per min (RPM): Limit ${s.rpm}, Requested 1.`
        : `Rate limit reached for fake on tokens per min (TPM): Limit ${s.tpm}, Requested ${cost}.`) +
      // OpenAI's hint, only when the headers say it too: a provider sending none gives no timing at all
      (s.headers === 'openai' ? ` Please try again in ${openAiDuration(a.retryAfterMs)}.` : '');
    if (s.headers === 'google') return { rejected: true, headers: a.headers, body: googleQuotaBody(a, s) };
    return { rejected: true, headers: a.headers, body: { error: { message, type: a.over, param: null, code: 'rate_limit_exceeded' } } };
  }
}

/** A 429 as Google's OpenAI-compatible endpoint words a minute's quota spent: the wait only in the body. */
function googleQuotaBody(a: Admission, s: { rpm: number | null; tpm: number | null }): object {
  const unit = a.over === 'requests' ? 'requests' : 'input_token_count';
  const limit = a.over === 'requests' ? s.rpm : s.tpm;
  const message =
    'You exceeded your current quota, please check your plan and billing details.\n' +
    `* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_paid_tier_${unit}, limit: ${limit}, model: fake\n` +
    `Please retry in ${(a.retryAfterMs / 1000).toFixed(9)}s.`;
  const quotaId =
    a.over === 'requests' ? 'GenerateRequestsPerMinutePerProjectPerModel' : 'GenerateContentPaidTierInputTokensPerModelPerMinute';
  return [
    {
      error: {
        code: 429,
        message,
        status: 'RESOURCE_EXHAUSTED',
        details: [
          { '@type': 'type.googleapis.com/google.rpc.QuotaFailure', violations: [{ quotaId, quotaValue: String(limit) }] },
          { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: `${Math.floor(a.retryAfterMs / 1000)}s` },
        ],
      },
    },
  ];
}
