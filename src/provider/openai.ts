import { badBodyError, classifyHttpError, classifyNetworkError, timeoutError } from './classify.js';
import { parseRateLimit } from './headers.js';
import { countTextTokens, estimatePromptTokens } from './tokens.js';
import type { CompletionResult, Provider, RateLimitInfo } from './types.js';
import type { Usage } from '../store/types.js';

export interface OpenAIProviderOptions {
  /** The API base including its version, e.g. `https://api.openai.com/v1`, `http://127.0.0.1:11434/v1`. */
  readonly baseUrl: string;
  /** Sent as `authorization: Bearer <key>` when set; local servers (Ollama, vLLM...) need none. */
  readonly apiKey?: string;
  /** Per-request timeout in ms, covering connect, headers and the whole body. @default 120000 */
  readonly timeoutMs?: number;
  /** Extra headers on every request (e.g. `OpenAI-Organization`). */
  readonly headers?: Readonly<Record<string, string>>;
  /** A fetch to use instead of the global one. @default globalThis.fetch */
  readonly fetch?: typeof fetch;
}

/** Thrown inside `complete` to tell our own timeout apart from the caller's abort. */
const TIMEOUT = Symbol('llmq.timeout');

/** Trailing slashes and a pasted `/chat/completions` removed: the base the endpoint path is added to. */
export function normalizeBaseUrl(baseUrl: string): string {
  return baseUrl.trim().replace(/\/+$/, '').replace(/\/chat\/completions$/, '');
}

/**
 * An OpenAI-compatible `POST {baseUrl}/chat/completions` client. The request body is sent exactly
 * as given (it is the job), and every failure is classified by classify.ts.
 */
export class OpenAIProvider implements Provider {
  readonly name: string;
  readonly #endpoint: string;
  readonly #headers: Record<string, string>;
  readonly #apiKey: string | undefined;
  readonly #timeoutMs: number;
  readonly #fetch: typeof fetch;

  constructor(options: OpenAIProviderOptions) {
    const base = normalizeBaseUrl(options.baseUrl);
    this.#endpoint = `${base}/chat/completions`;
    const shown = new URL(base);
    shown.username = shown.password = '';
    shown.search = ''; // a key passed as ?api-key=... must not reach runs.options or the screen
    this.name = `openai-compatible (${shown.href.replace(/\/$/, '')})`;
    this.#apiKey = options.apiKey || undefined;
    this.#timeoutMs = options.timeoutMs ?? 120_000;
    this.#fetch = options.fetch ?? globalThis.fetch;
    this.#headers = { 'content-type': 'application/json', accept: 'application/json', ...options.headers };
    if (this.#apiKey) this.#headers.authorization = `Bearer ${this.#apiKey}`;
  }

  async complete(requestJson: string, options: { readonly signal: AbortSignal }): Promise<CompletionResult> {
    const { signal } = options;
    signal.throwIfAborted();
    // One controller per request, aborted by our timer or by the caller. A cleared setTimeout and a
    // removed listener, rather than AbortSignal.timeout + AbortSignal.any, so that a finished request
    // leaves no live timer or signal behind: at thousands of requests per second with a 120 s
    // timeout those would pile up by the hundred thousand.
    const controller = new AbortController();
    const onAbort = () => controller.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    const timer = setTimeout(() => controller.abort(TIMEOUT), this.#timeoutMs);
    try {
      return await this.#send(requestJson, controller.signal);
    } catch (err) {
      if (signal.aborted) throw signal.reason;
      if (controller.signal.aborted && controller.signal.reason === TIMEOUT) throw timeoutError(this.#timeoutMs);
      throw err;
    } finally {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    }
  }

  async #send(requestJson: string, signal: AbortSignal): Promise<CompletionResult> {
    let res: Response;
    try {
      res = await this.#fetch(this.#endpoint, { method: 'POST', headers: this.#headers, body: requestJson, signal });
    } catch (err) {
      if (signal.aborted) throw err;
      throw classifyNetworkError(err, this.#apiKey);
    }
    const rateLimit = parseRateLimit(res.headers);
    let text: string;
    try {
      text = await res.text();
    } catch (err) {
      if (signal.aborted) throw err;
      if (!res.ok) throw classifyHttpError(res.status, '', res.headers, rateLimit, this.#apiKey);
      throw badBodyError('the body was cut short', res.status, rateLimit, this.#apiKey, err);
    }
    if (!res.ok) throw classifyHttpError(res.status, text, res.headers, rateLimit, this.#apiKey);
    return parseCompletion(text, res.status, rateLimit, requestJson, this.#apiKey);
  }
}

/**
 * A 2xx body as a completion. Valid when `choices[0].message` is an object; the output is its
 * `content`, else its `tool_calls` as JSON, else its `refusal`, else '' (e.g. all tokens spent on
 * reasoning): each of those is the model's answer, and sending the request again would pay again for
 * the same. Without `usage` (some local servers omit it) the tokens are counted with the tokenizer.
 */
export function parseCompletion(text: string, status: number, rateLimit: RateLimitInfo | null, requestJson: string, secret?: string): CompletionResult {
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
    return Number.isFinite(cached) && cached > 0 ? { promptTokens: p, completionTokens: c, cachedTokens: cached } : { promptTokens: p, completionTokens: c };
  }
  let request: unknown = {};
  try {
    request = JSON.parse(requestJson);
  } catch { /* not JSON: count nothing for the prompt */ }
  return {
    promptTokens: Number.isFinite(p) ? p : estimatePromptTokens(request as object),
    completionTokens: Number.isFinite(c) ? c : countTextTokens(output),
  };
}
