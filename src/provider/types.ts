import type { FinishReason } from './finish.js';
import type { Usage } from '../store/types.js';

/**
 * How an error bears on the work: try the job again, give the job up, stop sending to the model
 * (its jobs wait; other models' go on: a quota per model spent for the day), or stop the whole run.
 */
export type ErrorScope = 'retryable' | 'job' | 'model' | 'run';

/** Why a request failed, finer than the scope, for counting, pausing and messages. */
export type FailureReason =
  | 'rate_limit' // 429 (not quota)
  | 'server' // 5xx, 408, 409
  | 'network' // refused, reset, DNS, socket closed
  | 'local' // this machine ran out of something (EMFILE: too many open files): not the provider
  | 'timeout' // --timeout passed
  | 'bad_body' // 200 whose body is not a valid completion
  | 'bad_output' // a completion that is not the JSON its request's response_format asks for
  | 'bad_request' // 400, 404, 413, 422
  | 'too_long' // the request does not fit the model's context
  | 'auth' // 401, 403
  | 'quota'; // 429 insufficient_quota

/**
 * What the rate-limit headers said (`x-ratelimit-*` from OpenAI and most compatible servers,
 * `anthropic-ratelimit-*` from Anthropic): the budget's size, what is left of it, and how long until
 * it is full again.
 */
export interface RateLimitInfo {
  /** The request budget (`x-ratelimit-limit-requests`), usually per minute. */
  readonly limitRequests: number | null;
  /** The token budget (`x-ratelimit-limit-tokens`), usually per minute. */
  readonly limitTokens: number | null;
  readonly remainingRequests: number | null;
  readonly remainingTokens: number | null;
  /** Milliseconds until the request budget is full again (not until the next request is allowed). */
  readonly resetRequestsMs: number | null;
  /** Milliseconds until the token budget is full again. */
  readonly resetTokensMs: number | null;
  /**
   * Said in a 429's body (Google's QuotaFailure), not in headers: a provider that says its limit only
   * when refusing never says a raised one to a run paced under the old.
   */
  readonly inBody?: boolean;
}

export interface CompletionResult {
  readonly status: number;
  /** The assistant message text. */
  readonly output: string;
  /** The raw response body (JSON text). */
  readonly body: string;
  readonly usage: Usage;
  readonly rateLimit: RateLimitInfo | null;
  /** How the answer ended (`finish.ts`): `length` when cut off at max_tokens; null when the body does not say. */
  readonly finishReason?: FinishReason | null;
}

/**
 * A failed request, classified once. `message` is safe to store and print: it never holds the key.
 */
export class ProviderError extends Error {
  readonly scope: ErrorScope;
  readonly reason: FailureReason;
  readonly status: number | null;
  /** The provider's error code, e.g. `insufficient_quota`, `context_length_exceeded`. */
  readonly code: string | null;
  /** The request parameter the provider's error names (`max_tokens`, `temperature`, `messages`), when it names one. */
  readonly param: string | null;
  /** How long the provider asked us to wait (retry-after-ms / retry-after, else the body's), if it did. */
  readonly retryAfterMs: number | null;
  /** The wait was said in the body (Google's RetryInfo), no header: told so, not as a retry-after. */
  readonly retryAfterInBody: boolean;
  readonly rateLimit: RateLimitInfo | null;
  /**
   * The answer itself says no model worked on the request: a 200 that is an HTML page (a proxy's or
   * gateway's) or a JSON error object with no completion. Such a try is not billed, where a body
   * cut short or a timeout may be (`pricing/billing.ts`).
   */
  readonly unbilled: boolean;
  /**
   * The start of an answer that came and was not what was asked (not the JSON its request asks for),
   * for its try's record: left out of the message, which is the job's error, so that `status` groups
   * such failures by what was wrong, not by each answer's text.
   */
  readonly answer: string | null;

  constructor(init: {
    message: string;
    scope: ErrorScope;
    reason: FailureReason;
    status?: number | null;
    code?: string | null;
    param?: string | null;
    retryAfterMs?: number | null;
    retryAfterInBody?: boolean;
    rateLimit?: RateLimitInfo | null;
    unbilled?: boolean;
    answer?: string | null;
    cause?: unknown;
  }) {
    super(init.message, { cause: init.cause });
    this.name = 'ProviderError';
    this.scope = init.scope;
    this.reason = init.reason;
    this.status = init.status ?? null;
    this.code = init.code ?? null;
    this.param = init.param ?? null;
    this.retryAfterMs = init.retryAfterMs ?? null;
    this.retryAfterInBody = init.retryAfterInBody ?? false;
    this.rateLimit = init.rateLimit ?? null;
    this.unbilled = init.unbilled ?? false;
    this.answer = init.answer ?? null;
  }

  get retryable(): boolean {
    return this.scope === 'retryable';
  }
}

/** What a try's record says of its error: the message, and the start of the answer when one came that was not what was asked. */
export function triedError(error: ProviderError): string {
  return error.answer === null ? error.message : `${error.message} (the answer: ${error.answer})`;
}

/** An OpenAI-compatible chat-completions endpoint, or the offline mock. */
export interface Provider {
  /** For messages and the limiter id: `openai-compatible (http://...)` or `mock`. */
  readonly name: string;
  /**
   * Send one request body exactly as given. Resolves with a valid completion or rejects with a
   * ProviderError; rejects with the signal's reason when `signal` aborts (a stop, not a failure).
   */
  complete(requestJson: string, options: { readonly signal: AbortSignal }): Promise<CompletionResult>;
  /** True when nothing it is sent is ever billed (the offline mock): no try of it "may be billed". */
  readonly free?: boolean;
  /**
   * True when it enforces no rate limit at all (the offline mock): its lanes start at full
   * concurrency, with no first request sent alone to learn a limit from its headers.
   */
  readonly unlimited?: boolean;
  /** Release connections, when the provider holds any. */
  close?(): Promise<void>;
}
