import { finishOf } from './finish.js';
import { badBodyError, classifyHttpError, classifyNetworkError, timeoutError } from './classify.js';
import type { Dispatcher, Pool } from 'undici';
import { loadUndici } from './undici.js';
import { parseRateLimit, type HeaderSource } from './headers.js';
import { answerWithoutKey } from './redact.js';
import { endpointUrl, normalizeBaseUrl, openAiProviderName } from './endpoint.js';
import { countTextTokens, estimatePromptTokens } from './tokens.js';
import type { CompletionResult, Provider, RateLimitInfo } from './types.js';
import type { Usage } from '../store/types.js';

export interface OpenAIProviderOptions {
  /** The API base including its version, e.g. `https://api.openai.com/v1`, `http://127.0.0.1:11434/v1`. */
  readonly baseUrl: string;
  /** Sent as `authorization: Bearer <key>` when set; local servers (Ollama, vLLM...) need none. */
  readonly apiKey?: string;
  /**
   * Per-request timeout in ms: for the response headers, and again for each stretch of the body
   * without data. @default 120000
   */
  readonly timeoutMs?: number;
  /** Extra headers on every request (e.g. `OpenAI-Organization`). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Keep-alive connections to the endpoint at most: the run's concurrency. @default 64 */
  readonly connections?: number;
  /**
   * Sends one request, answering through the handler (undici's `Dispatcher.dispatch` shape); a
   * connection pool to the endpoint unless given (tests inject failures here).
   */
  readonly transport?: Transport;
}

/** One HTTP request out, its answer back through `handler` (undici's `dispatch` shape). */
export type Transport = (options: Dispatcher.DispatchOptions, handler: Dispatcher.DispatchHandler) => unknown;

/** Response headers as undici parses them: names lower-cased, repeated ones as arrays. */
type IncomingHttpHeaders = Record<string, string | string[] | undefined>;

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
const ONCE = { once: true } as const;

/**
 * An OpenAI-compatible `POST {baseUrl}/chat/completions` client. The request body is sent exactly
 * as given (it is the job), and every failure is classified by classify.ts.
 *
 * Requests go through undici's own client, a keep-alive pool sized to the concurrency, rather than
 * fetch: no Request/Response/Headers objects, streams or per-request timer and AbortController,
 * which at hundreds of requests per second were most of llmq's CPU and garbage. And `dispatch`, not
 * `request()`: one handler object per request (an Exchange) collects the body, where `request()`
 * built a Readable body stream, its events and promises for every answer (about 0.01 ms of CPU per
 * request, 6% of the provider's, on a zero-latency fake). The timeout is the pool's headers and body
 * timeouts; the caller's signal aborts.
 */
export class OpenAIProvider implements Provider {
  readonly name: string;
  readonly #path: string;
  readonly #headers: Record<string, string>;
  readonly #apiKey: string | undefined;
  readonly #timeoutMs: number;
  readonly #pool: Pool | null;
  readonly #transport: Transport;

  constructor(options: OpenAIProviderOptions) {
    const base = normalizeBaseUrl(options.baseUrl);
    const endpoint = endpointUrl(base, '/chat/completions');
    this.#path = endpoint.pathname + endpoint.search;
    this.name = openAiProviderName(base);
    this.#apiKey = options.apiKey || undefined;
    this.#timeoutMs = options.timeoutMs ?? 120_000;
    this.#headers = { 'content-type': 'application/json', accept: 'application/json', ...options.headers };
    if (this.#apiKey) this.#headers.authorization = `Bearer ${this.#apiKey}`;
    this.#pool = options.transport
      ? null
      : new (loadUndici().Pool)(endpoint.origin, {
          connections: options.connections ?? 64,
          headersTimeout: this.#timeoutMs,
          bodyTimeout: this.#timeoutMs,
          keepAliveTimeout: 30_000,
        });
    this.#transport = options.transport ?? ((o, h) => this.#pool!.dispatch(o, h));
  }

  complete(requestJson: string, options: { readonly signal: AbortSignal }): Promise<CompletionResult> {
    const { signal } = options;
    if (signal.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const exchange = new Exchange(requestJson, signal, this.#apiKey, this.#timeoutMs, resolve, reject);
      signal.addEventListener('abort', exchange, ONCE);
      try {
        this.#transport({ path: this.#path, method: 'POST', headers: this.#headers, body: requestJson }, exchange);
      } catch (err) {
        exchange.onResponseError(null, err as Error);
      }
    });
  }

  /** Close the keep-alive connections. */
  async close(): Promise<void> {
    await this.#pool?.close();
  }
}

/**
 * One request's answer as undici hands it over: status and headers, the body's chunks, then the
 * end or an error; settles the caller's promise once. It is also the listener on the caller's
 * signal (an EventTarget takes an object with `handleEvent`) and the parsers' HeaderSource, so a
 * request costs this one object and no closures.
 */
class Exchange implements Dispatcher.DispatchHandler, HeaderSource {
  #controller: Dispatcher.DispatchController | null = null;
  #status = 0;
  #headers: IncomingHttpHeaders | null = null;
  #chunks: Buffer[] = [];
  #settled = false;

  constructor(
    private readonly requestJson: string,
    private readonly signal: AbortSignal,
    private readonly apiKey: string | undefined,
    private readonly timeoutMs: number,
    private readonly resolve: (result: CompletionResult) => void,
    private readonly reject: (err: unknown) => void,
  ) {}

  /** The caller's signal fired: answer now, and stop the request (at once, or when it leaves the pool's queue). */
  handleEvent(): void {
    if (this.#settled) return;
    this.#fail(this.signal.reason);
    this.#controller?.abort(this.signal.reason);
    this.#forget();
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    // A request aborted while queued in the pool is dropped here, before it is written.
    if (this.#settled) controller.abort(this.signal.reason);
    else this.#controller = controller;
  }

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number, headers: IncomingHttpHeaders): void {
    this.#status = statusCode;
    this.#headers = headers;
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    this.#chunks.push(chunk);
  }

  onResponseEnd(): void {
    if (this.#settled) return;
    this.#settle();
    // Everything after the settle is caught: a throw here (a body too long for one string) would go
    // back into undici, whose onResponseError then finds us settled, and the promise would never end.
    try {
      const status = this.#status;
      const rateLimit = this.#rateLimit();
      // Decoded once at the end: a character split across two chunks reads whole.
      const chunks = this.#chunks;
      let text: string;
      try {
        text = chunks.length === 1 ? chunks[0].toString('utf8') : Buffer.concat(chunks).toString('utf8');
      } catch (err) {
        throw badBodyError('the body could not be read as text', status, rateLimit, this.apiKey, err);
      }
      if (status < 200 || status >= 300) throw classifyHttpError(status, text, this, rateLimit, this.apiKey);
      this.resolve(parseCompletion(text, status, rateLimit, this.requestJson, this.apiKey));
    } catch (err) {
      this.reject(err);
    } finally {
      this.#forget();
    }
  }

  onResponseError(_c: Dispatcher.DispatchController | null, err: Error): void {
    if (this.#settled) return;
    this.#settle();
    try {
      this.reject(this.#whyItFailed(err));
    } catch (error) {
      this.reject(error);
    } finally {
      this.#forget();
    }
  }

  /** The error a request that undici gave up on ends with. */
  #whyItFailed(err: Error): unknown {
    if (this.signal.aborted) return this.signal.reason;
    if (TIMEOUT_CODES.has((err as { code?: string }).code ?? '')) return timeoutError(this.timeoutMs);
    if (this.#headers === null) return classifyNetworkError(err, this.apiKey);
    // The answer began and then broke off.
    const status = this.#status;
    const rateLimit = this.#rateLimit();
    if (status < 200 || status >= 300) return classifyHttpError(status, '', this, rateLimit, this.apiKey);
    return badBodyError('the body was cut short', status, rateLimit, this.apiKey, err);
  }

  /** A response header, for the parsers (undici gives the names lower-cased, repeated ones as arrays). */
  get(name: string): string | null {
    const v = this.#headers?.[name.toLowerCase()];
    return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
  }

  /**
   * The rate-limit headers, read only when one came: a server that sends none (most local ones)
   * would otherwise cost a dozen lookups per answer.
   */
  #rateLimit(): RateLimitInfo | null {
    for (const name in this.#headers) {
      if (name.startsWith('x-ratelimit-') || name.startsWith('anthropic-ratelimit-')) return parseRateLimit(this);
    }
    return null;
  }

  #fail(err: unknown): void {
    this.#settle();
    this.reject(err);
  }

  /**
   * Once answered, let go of undici's controller, the headers and the body: they are views into the
   * connection's read buffers, and an exchange still referenced after its answer kept those alive.
   * Measured: peak RSS of a run at -c 64 was 145-170 MB without this, 142-143 MB with it (as with
   * request()).
   */
  #forget(): void {
    this.#controller = null;
    this.#headers = null;
    this.#chunks = [];
  }

  /** Settled once: later events from undici or the signal are ignored, and the signal forgets us. */
  #settle(): void {
    this.#settled = true;
    this.signal.removeEventListener('abort', this);
  }
}

/**
 * A 2xx body as a completion. Valid when `choices[0].message` is an object; the output is its
 * `content`, else (none, or empty) its `tool_calls` as JSON, else its `refusal`, else '' (e.g. all
 * tokens spent on reasoning): each of those is the model's answer, and sending the request again would pay again for
 * the same. Without `usage` (some local servers omit it) the tokens are counted with the tokenizer.
 */
export function parseCompletion(
  text: string,
  status: number,
  rateLimit: RateLimitInfo | null,
  requestJson: string,
  secret?: string,
): CompletionResult {
  let json: any;
  try {
    json = JSON.parse(text);
  } catch (err) {
    // the first bytes say what answered instead (a proxy's HTML error page, a load balancer's text)
    const head = text.trim().replace(/\s+/g, ' ');
    const detail =
      head === '' ? 'empty body' : `not JSON (it begins: ${JSON.stringify(head.length > 60 ? `${head.slice(0, 60)}…` : head)})`;
    // an HTML page is something in front of the model answering (a maintenance page, a login): nothing was worked on
    throw badBodyError(detail, status, rateLimit, secret, err, head.startsWith('<'));
  }
  // a proxy or server that echoes the Authorization header into an answer: never stored or shown
  const clean = answerWithoutKey(text, json, secret);
  if (clean) json = clean.json;
  const body = clean?.text ?? text;
  const message = json?.choices?.[0]?.message;
  if (message === null || typeof message !== 'object') {
    const said = typeof json?.error?.message === 'string' ? `: ${json.error.message}` : '';
    // an error object in place of the completion is an error answer sent at 200 (a gateway's), not billed as a 4xx or 5xx is not
    const errorAnswer = json?.error !== null && typeof json?.error === 'object';
    throw badBodyError(`no choices[0].message${said}`, status, rateLimit, secret, undefined, errorAnswer);
  }
  const content = message.content;
  if (content !== null && content !== undefined && typeof content !== 'string') {
    throw badBodyError('choices[0].message.content is not a string', status, rateLimit, secret);
  }
  let output: string;
  // some OpenAI-compatible servers send `content: ""` beside the tool calls or the refusal: those are the answer
  if (typeof content === 'string' && content !== '') output = content;
  else if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) output = JSON.stringify(message.tool_calls);
  else if (typeof message.refusal === 'string') output = message.refusal;
  else output = '';
  return { status, output, body, usage: readUsage(json.usage, requestJson, output), rateLimit, finishReason: finishOf(json) };
}

function readUsage(usage: any, requestJson: string, output: string): Usage {
  const p = usage?.prompt_tokens;
  const c = usage?.completion_tokens;
  // Prompt tokens read from the provider's cache are billed at a lower price.
  const cached = usage?.prompt_tokens_details?.cached_tokens;
  if (Number.isFinite(p) && Number.isFinite(c)) {
    return Number.isFinite(cached) && cached > 0
      ? { promptTokens: p, completionTokens: c, cachedTokens: cached }
      : { promptTokens: p, completionTokens: c };
  }
  let request: unknown = {};
  try {
    request = JSON.parse(requestJson);
  } catch {
    /* not JSON: count nothing for the prompt */
  }
  return {
    promptTokens: Number.isFinite(p) ? p : estimatePromptTokens(request as object),
    completionTokens: Number.isFinite(c) ? c : countTextTokens(output),
  };
}
