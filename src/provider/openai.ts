import { badBodyError, classifyHttpError, classifyNetworkError, timeoutError } from './classify.js';
import { Pool, type Dispatcher } from 'undici';
import { parseRateLimit, type HeaderSource } from './headers.js';
import { normalizeBaseUrl } from './endpoint.js';
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
  /** Sends one request; a connection pool to the endpoint unless given (tests). */
  readonly transport?: Transport;
}

/** One HTTP request out, its response back (undici's `request` shape). */
export type Transport = (options: Dispatcher.RequestOptions) => Promise<Dispatcher.ResponseData>;

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/**
 * An OpenAI-compatible `POST {baseUrl}/chat/completions` client. The request body is sent exactly
 * as given (it is the job), and every failure is classified by classify.ts.
 *
 * Requests go through undici's own client, a keep-alive pool sized to the concurrency, rather than
 * fetch: no Request/Response/Headers objects, streams or per-request timer and AbortController,
 * which at hundreds of requests per second were most of llmq's CPU and garbage. The timeout is the
 * pool's headers and body timeouts; the caller's signal aborts.
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
    const endpoint = new URL(`${base}/chat/completions`);
    this.#path = endpoint.pathname + endpoint.search;
    const shown = new URL(base);
    shown.username = shown.password = '';
    shown.search = ''; // a key passed as ?api-key=... must not reach runs.options or the screen
    this.name = `openai-compatible (${shown.href.replace(/\/$/, '')})`;
    this.#apiKey = options.apiKey || undefined;
    this.#timeoutMs = options.timeoutMs ?? 120_000;
    this.#headers = { 'content-type': 'application/json', accept: 'application/json', ...options.headers };
    if (this.#apiKey) this.#headers.authorization = `Bearer ${this.#apiKey}`;
    this.#pool = options.transport
      ? null
      : new Pool(endpoint.origin, {
          connections: options.connections ?? 64,
          headersTimeout: this.#timeoutMs,
          bodyTimeout: this.#timeoutMs,
          keepAliveTimeout: 30_000,
        });
    this.#transport = options.transport ?? ((o) => this.#pool!.request(o));
  }

  async complete(requestJson: string, options: { readonly signal: AbortSignal }): Promise<CompletionResult> {
    const { signal } = options;
    signal.throwIfAborted();
    let res: Dispatcher.ResponseData;
    try {
      res = await this.#transport({ path: this.#path, method: 'POST', headers: this.#headers, body: requestJson, signal });
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      if (TIMEOUT_CODES.has((err as { code?: string }).code ?? '')) throw timeoutError(this.#timeoutMs);
      throw classifyNetworkError(err, this.#apiKey);
    }
    const headers = headerSource(res.headers);
    const rateLimit = parseRateLimit(headers);
    const ok = res.statusCode >= 200 && res.statusCode < 300;
    let text: string;
    try {
      text = await res.body.text();
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      if (TIMEOUT_CODES.has((err as { code?: string }).code ?? '')) throw timeoutError(this.#timeoutMs);
      if (!ok) throw classifyHttpError(res.statusCode, '', headers, rateLimit, this.#apiKey);
      throw badBodyError('the body was cut short', res.statusCode, rateLimit, this.#apiKey, err);
    }
    if (!ok) throw classifyHttpError(res.statusCode, text, headers, rateLimit, this.#apiKey);
    return parseCompletion(text, res.statusCode, rateLimit, requestJson, this.#apiKey);
  }

  /** Close the keep-alive connections. */
  async close(): Promise<void> {
    await this.#pool?.close();
  }
}

/** undici's plain header object as the `get(name)` the parsers read (names arrive lower-cased). */
function headerSource(headers: Dispatcher.ResponseData['headers']): HeaderSource {
  return {
    get(name) {
      const v = headers[name.toLowerCase()];
      return v === undefined ? null : Array.isArray(v) ? v.join(', ') : String(v);
    },
  };
}

/**
 * A 2xx body as a completion. Valid when `choices[0].message` is an object; the output is its
 * `content`, else its `tool_calls` as JSON, else its `refusal`, else '' (e.g. all tokens spent on
 * reasoning): each of those is the model's answer, and sending the request again would pay again for
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
    const detail = text.trim() === '' ? 'empty body' : 'not JSON';
    throw badBodyError(detail, status, rateLimit, secret, err);
  }
  const message = json?.choices?.[0]?.message;
  if (message === null || typeof message !== 'object') {
    const said = typeof json?.error?.message === 'string' ? `: ${json.error.message}` : '';
    throw badBodyError(`no choices[0].message${said}`, status, rateLimit, secret);
  }
  const content = message.content;
  if (content !== null && content !== undefined && typeof content !== 'string') {
    throw badBodyError('choices[0].message.content is not a string', status, rateLimit, secret);
  }
  let output: string;
  if (typeof content === 'string') output = content;
  else if (Array.isArray(message.tool_calls) && message.tool_calls.length > 0) output = JSON.stringify(message.tool_calls);
  else if (typeof message.refusal === 'string') output = message.refusal;
  else output = '';
  return { status, output, body: text, usage: readUsage(json.usage, requestJson, output), rateLimit };
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
