/**
 * What the fake OpenAI server can answer with, and helpers that build OpenAI-shaped answers.
 * See fake-openai.ts for the server and its usage doc.
 */
import { createHash } from 'node:crypto';
import { countTextTokens, estimatePromptTokens } from '../../src/provider/tokens.js';

export type FakeHeaders = Readonly<Record<string, string>>;

/** One answer of the fake. `latencyMs` on a reply overrides the server's latency for that request. */
export type FakeReply =
  /** 200 with a valid chat.completion; content defaults to `answerFor(body)`, usage to the tokenizer's count. */
  | {
      readonly kind: 'ok';
      readonly content?: string | null;
      readonly usage?: { prompt_tokens: number; completion_tokens: number } | null;
      readonly headers?: FakeHeaders;
      readonly latencyMs?: number;
    }
  /**
   * Any status with any body (an object is sent as JSON, a string as is). `heldUntil` holds the
   * answer until it settles (after any latency): for a test that needs it to wait for an event,
   * such as another client's request, not for a time a loaded machine may overrun.
   */
  | {
      readonly kind: 'raw';
      readonly status: number;
      readonly body: string | object;
      readonly headers?: FakeHeaders;
      readonly latencyMs?: number;
      readonly heldUntil?: Promise<unknown>;
    }
  /**
   * Any status with `body` written in two writes: its first `at` bytes (which may end inside a
   * UTF-8 character), then after `pauseMs` the rest, so the client reads it in two chunks.
   */
  | {
      readonly kind: 'split';
      readonly status: number;
      readonly body: string;
      readonly at: number;
      readonly pauseMs: number;
      readonly headers?: FakeHeaders;
      readonly latencyMs?: number;
    }
  /** Never answer (until the server goes down or closes). */
  | { readonly kind: 'hang' }
  /** Destroy the socket without answering: the client sees a reset / socket hang up. */
  | { readonly kind: 'reset'; readonly latencyMs?: number }
  /** 200 headers promising a full body, half of it, then the socket is destroyed. */
  | { readonly kind: 'truncate'; readonly latencyMs?: number }
  /** Not an answer: let the server decide (rate limits, then the default success). */
  | { readonly kind: 'pass' };

/** A request as the fake saw it; handed to `respond` functions and kept in `fake.requests`. */
export interface FakeRequest {
  /** 1-based order of arrival since the server started (or since `clear()`). */
  readonly index: number;
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The raw body text. */
  readonly body: string;
  /** The parsed body, or null when it is not JSON. */
  readonly json: any;
  /** SHA-256 hex of the body: the job key when the client sends the canonical request, as llmq does. */
  readonly key: string;
  /** How many times this exact body has arrived, this one included (1 on the first try). */
  readonly attempt: number;
  /** ms epoch of arrival. */
  readonly receivedAt: number;
  /** What was answered: an HTTP status, or 'hang' | 'reset' | 'truncate'; null until answered. */
  answered: number | 'hang' | 'reset' | 'truncate' | null;
}

export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The content the fake answers a request body with by default: deterministic, names its request. */
export function answerFor(requestBody: string): string {
  return `fake answer ${sha256(requestBody).slice(0, 16)}`;
}

/** An OpenAI-style error body: `{"error":{"message","type","param","code"}}`. */
export function errorBody(message: string, type: string, code: string | null = null, param: string | null = null): object {
  return { error: { message, type, param, code } };
}

export const reply = {
  ok(
    options: {
      content?: string | null;
      usage?: { prompt_tokens: number; completion_tokens: number } | null;
      headers?: FakeHeaders;
      latencyMs?: number;
    } = {},
  ): FakeReply {
    return { kind: 'ok', ...options };
  },
  raw(status: number, body: string | object, headers?: FakeHeaders): FakeReply {
    return { kind: 'raw', status, body, headers };
  },
  /** `body` in two writes `pauseMs` apart, cut at byte `at` (e.g. inside a multi-byte character). */
  split(status: number, body: string, at: number, options: { pauseMs?: number; headers?: FakeHeaders } = {}): FakeReply {
    return { kind: 'split', status, body, at, pauseMs: options.pauseMs ?? 50, headers: options.headers };
  },
  /** An OpenAI-style error (`type` defaults by status). */
  error(
    status: number,
    message: string,
    options: { type?: string; code?: string | null; param?: string | null; headers?: FakeHeaders } = {},
  ): FakeReply {
    const type = options.type ?? (status >= 500 ? 'server_error' : 'invalid_request_error');
    return { kind: 'raw', status, body: errorBody(message, type, options.code ?? null, options.param ?? null), headers: options.headers };
  },
  serverError(status = 500, message = 'The server had an error while processing your request. Sorry about that!'): FakeReply {
    return reply.error(status, message, { type: 'server_error' });
  },
  badRequest(message = "Invalid value for 'temperature': must be between 0 and 2."): FakeReply {
    return reply.error(400, message, { code: 'invalid_value' });
  },
  contextTooLong(): FakeReply {
    return reply.error(
      400,
      "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens. Please reduce the length of the messages.",
      { code: 'context_length_exceeded' },
    );
  },
  unauthorized(
    message = 'Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.',
  ): FakeReply {
    return reply.error(401, message, { code: 'invalid_api_key' });
  },
  /** 429 with `retry-after-ms` and `retry-after` (seconds, rounded up). */
  rateLimited(retryAfterMs = 1000, headers: FakeHeaders = {}): FakeReply {
    return reply.error(429, 'Rate limit reached for requests. Please try again later.', {
      type: 'requests',
      code: 'rate_limit_exceeded',
      headers: { 'retry-after-ms': String(retryAfterMs), 'retry-after': String(Math.ceil(retryAfterMs / 1000)), ...headers },
    });
  },
  /** OpenAI's 429 for one request bigger than the key's tokens per minute: it can never be sent, however long one waits. */
  requestTooLarge(limit = 10_000, requested = 40_000): FakeReply {
    return reply.error(
      429,
      `Request too large for gpt-4o-mini in organization org-test on tokens per min (TPM): Limit ${limit}, Requested ${requested}. The input or output tokens must be reduced in order to run successfully. Visit https://platform.openai.com/account/rate-limits to learn more.`,
      { type: 'tokens', code: 'rate_limit_exceeded', headers: { 'x-ratelimit-limit-tokens': String(limit) } },
    );
  },
  quota(): FakeReply {
    return reply.error(429, 'You exceeded your current quota, please check your plan and billing details.', {
      type: 'insufficient_quota',
      code: 'insufficient_quota',
    });
  },
  hang(): FakeReply {
    return { kind: 'hang' };
  },
  reset(): FakeReply {
    return { kind: 'reset' };
  },
  truncate(): FakeReply {
    return { kind: 'truncate' };
  },
  pass(): FakeReply {
    return { kind: 'pass' };
  },
};

/** The body of a successful chat.completion for `req`, shaped like OpenAI's. */
export function completionBody(
  req: FakeRequest,
  options: { content?: string | null; usage?: { prompt_tokens: number; completion_tokens: number } | null },
): object {
  const content = options.content === undefined ? answerFor(req.body) : options.content;
  const usage =
    options.usage === undefined
      ? { prompt_tokens: estimatePromptTokens(req.json ?? {}), completion_tokens: countTextTokens(content ?? '') }
      : options.usage;
  const body: Record<string, unknown> = {
    id: `chatcmpl-fake${req.key.slice(0, 12)}${req.attempt}`,
    object: 'chat.completion',
    created: Math.floor(req.receivedAt / 1000),
    model: typeof req.json?.model === 'string' ? req.json.model : 'unknown',
    choices: [{ index: 0, message: { role: 'assistant', content, refusal: null }, logprobs: null, finish_reason: 'stop' }],
  };
  if (usage) body.usage = { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens };
  return body;
}
