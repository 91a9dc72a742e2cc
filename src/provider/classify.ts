/**
 * Every failure of a request becomes a ProviderError here, and only here: what went wrong
 * (`reason`), and what it means for the work (`scope`: try again, give up the job, stop the run).
 *
 * | what happened                                        | reason      | scope     |
 * |------------------------------------------------------|-------------|-----------|
 * | refused, reset, socket closed, DNS, `fetch failed`   | network     | retryable |
 * | EMFILE, ENFILE, ENOBUFS, ENOMEM: this machine's limit | local       | retryable |
 * | no answer within the timeout                         | timeout     | retryable |
 * | 408, 409, 5xx                                        | server      | retryable |
 * | 429                                                  | rate_limit  | retryable |
 * | 429 with code/type `insufficient_quota`              | quota       | run       |
 * | 429 naming only quotas per day (Google's QuotaFailure)| quota       | run       |
 * | 429 "Request too large": over the tokens per minute  | too_long    | job       |
 * | 200 whose body is cut short or not a completion      | bad_body    | retryable |
 * | 400, 404, 405, 413, 422 and any other 4xx            | bad_request | job       |
 * | 501: the server does not take this POST at all       | bad_request | job       |
 * | a 4xx saying the request exceeds the context length  | too_long    | job       |
 * | 401, 403                                             | auth        | run       |
 *
 * Messages are `HTTP <status>: <the provider's own message>`, cleaned of request ids and retry
 * hints so that equal failures read alike in `status`, and never contain the API key.
 */
import { STATUS_CODES } from 'node:http';
import { quotaInBody, quotaViolations, retryDelayInBody } from './error-details.js';
import { parseRetryAfter, type HeaderSource } from './headers.js';
import { redactError, redactSecret } from './redact.js';
import { ProviderError, type ErrorScope, type FailureReason, type RateLimitInfo } from './types.js';

const MAX_MESSAGE = 300;

/** What an error body said: OpenAI's `{error:{message,type,param,code}}` or the shapes compatible servers use. */
interface BodyError {
  readonly message: string | null;
  readonly code: string | null;
  readonly type: string | null;
  readonly param: string | null;
  /** How long the body asks to wait (`retryDelayInBody`): what a server without `retry-after` says. */
  readonly retryDelayMs: number | null;
  /** The quota the body says was spent (`quotaInBody`): what a server without rate-limit headers says. */
  readonly quota: RateLimitInfo | null;
  /** A quota per day the body says was spent, when it names no other (Google's `PerDay` quotaId, with its value). */
  readonly dailyQuota: string | null;
}

export function readErrorBody(text: string): BodyError {
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    return { message: null, code: null, type: null, param: null, retryDelayMs: null, quota: null, dailyQuota: null };
  }
  const said = readErrorJson(json);
  const spent = quotaViolations(json);
  const daily = spent.length > 0 && spent.every((v) => /PerDay/.test(v.quotaId)) ? spent[0]! : null;
  return {
    ...said,
    retryDelayMs: retryDelayInBody(json, said.message),
    quota: quotaInBody(json),
    dailyQuota: daily && `${daily.quotaId}${daily.quotaValue !== undefined ? `: ${String(daily.quotaValue)}` : ''}`,
  };
}

function readErrorJson(json: any): Omit<BodyError, 'retryDelayMs' | 'quota' | 'dailyQuota'> {
  // Google's OpenAI-compatible endpoint wraps its error in a list: [{"error":{"code":429,...}}]
  if (Array.isArray(json)) json = json[0];
  const e = json?.error;
  const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : null);
  if (e !== null && typeof e === 'object') return { message: str(e.message), code: str(e.code), type: str(e.type), param: str(e.param) };
  return {
    message: str(e) ?? str(json?.message) ?? str(json?.detail),
    code: str(json?.code),
    type: str(json?.type),
    param: str(json?.param),
  };
}

/** One line, no request ids or "try again in 20ms", at most MAX_MESSAGE characters, key removed. */
export function cleanMessage(text: string, secret: string | undefined): string {
  let s = redactSecret(text, secret)
    .replace(/\(?\s*Please include the request ID [^)]*\)?\.?/gi, '')
    .replace(/\breq_[A-Za-z0-9]+\b/g, 'req_…')
    .replace(/\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b/gi, '…')
    .replace(/\s*Please (?:try again|retry) in (?:[\d.]+\s*(?:ms|h|m|s))+(?![a-z])\.?/gi, '')
    .replace(/\s+/g, ' ')
    .trim();
  if (s.length > MAX_MESSAGE) s = `${s.slice(0, MAX_MESSAGE - 1)}…`;
  return s;
}

const CONTEXT_TOO_LONG =
  /maximum context length|context[ _-]?(length|window|size)|exceeds? the (available )?context|too many tokens|prompt is too long/i;

/** OpenAI's 429 for a request over the key's tokens per minute by itself ("Request too large for gpt-4o ... on tokens per min (TPM)"). */
const REQUEST_TOO_LARGE = /^Request too large\b/i;

/** A non-2xx answer. */
export function classifyHttpError(
  status: number,
  bodyText: string,
  headers: HeaderSource,
  rateLimit: RateLimitInfo | null,
  secret: string | undefined,
): ProviderError {
  const body = readErrorBody(bodyText);
  const code = body.code ?? body.type;
  const text = body.message ?? plainBodyText(bodyText) ?? STATUS_CODES[status] ?? 'error';
  let message = `HTTP ${status}: ${cleanMessage(text, secret)}`;
  // Google's endpoint says its wait only in the body (RetryInfo, "Please retry in 36.4s.")
  const saidInHeader = parseRetryAfter(headers);
  const retryAfterMs = saidInHeader ?? (status === 429 || status === 503 ? body.retryDelayMs : null);

  let scope: ErrorScope;
  let reason: FailureReason;
  if (status === 429) {
    const quota = body.code === 'insufficient_quota' || body.type === 'insufficient_quota';
    [scope, reason] = quota ? ['run', 'quota'] : ['retryable', 'rate_limit'];
    if (quota)
      message = sentence(message, 'Check the plan and billing of the account whose key llmq sends (LLMQ_API_KEY, else OPENAI_API_KEY).');
    else if (body.dailyQuota !== null) {
      // Google's quota per day spent: its 429 asks a wait of seconds, and a run waiting them out
      // would be refused every few seconds until the day turns. The quota is the model's: other
      // models of the queue go on.
      [scope, reason] = ['model', 'quota'];
      message = sentence(
        message,
        /: 0$/.test(body.dailyQuota)
          ? `The quota per day is 0 (${body.dailyQuota}): the key's project may not use the model (no free tier); enable billing with the provider, or enqueue with another model.`
          : `The quota per day is spent (${body.dailyQuota}): it comes back when the provider's day turns, or raise it with the provider.`,
      );
    } else if (REQUEST_TOO_LARGE.test(text)) {
      // This request alone weighs more than the key's tokens per minute: no wait lets it through.
      [scope, reason] = ['job', 'too_long'];
      message = sentence(message, 'Shorten the document or lower max_tokens, or raise the limit of the account.');
    }
  } else if (status === 408 || status === 409 || (status >= 500 && status !== 501)) {
    [scope, reason] = ['retryable', 'server'];
  } else if (status === 401 || status === 403) {
    [scope, reason] = ['run', 'auth'];
    message = sentence(message, status === 401 ? 'Check LLMQ_API_KEY (or OPENAI_API_KEY) and --base-url.' : forbiddenAdvice(code, text));
  } else if (body.code === 'context_length_exceeded' || CONTEXT_TOO_LONG.test(text)) {
    [scope, reason] = ['job', 'too_long'];
  } else {
    [scope, reason] = ['job', 'bad_request'];
    // A 404, 405 or 501 that is not a JSON error from an API is a wrong path (a web server that has
    // nothing there, or takes no POST there), not a wrong model or a server's own refusal (llama.cpp's
    // 501 says how to start it for chat completions).
    if (refusesEndpoint(status) && (body.message === null || /^Invalid URL/i.test(body.message))) {
      message += ' (check --base-url: it usually ends in /v1)';
    }
  }
  // Google's endpoint says the quota it spent only in the body (QuotaFailure): a limit said, as in headers
  const said = rateLimit ?? (reason === 'rate_limit' ? body.quota : null);
  return new ProviderError({
    message,
    scope,
    reason,
    status,
    code,
    param: body.param,
    retryAfterMs,
    retryAfterInBody: saidInHeader === null && retryAfterMs !== null,
    rateLimit: said,
  });
}

/**
 * What to check after a 403: the key was read, and what it asks may not be done. A refusal of where
 * the request comes from (OpenAI's `unsupported_country_region_territory`) is no matter of the key,
 * and a user told to check the key would rotate a good one.
 */
function forbiddenAdvice(code: string | null, text: string): string {
  if (code === 'unsupported_country_region_territory' || /\b(country|region|territory)\b.*\bnot supported\b/i.test(text))
    return 'The provider does not serve requests from where this machine is: no key changes that; an endpoint that does (--base-url) would.';
  return 'The key was read, and may not do this: check that it (LLMQ_API_KEY, else OPENAI_API_KEY) may use the model and its project, and --base-url.';
}

/**
 * Statuses that say the endpoint, not the request, is wrong when they come before any answer: 404
 * (no such path, or no such model), 405 (the path takes no POST: a static web server or a wrong
 * path) and 501 (the server does not do POST at all). A run stops on three of them in a row
 * instead of failing every job (`decide`); 501 is not a 5xx outage to wait out for --max-outage.
 */
export function refusesEndpoint(status: number | null): boolean {
  return status === 404 || status === 405 || status === 501;
}

/**
 * A run's stop that says its endpoint is wrong (not there, or no chat completions there), not its
 * model (a 404 `model_not_found`): the run proposed after it leaves a place for another endpoint.
 */
export function stopNamesWrongEndpoint(stop: { readonly status: number | null; readonly code: string | null }): boolean {
  return refusesEndpoint(stop.status) && stop.code !== 'model_not_found';
}

/**
 * A refusal of a request parameter that every job of an enqueue shares (`max_tokens`, `temperature`,
 * `response_format`), not of the document (`messages`, `input`, `prompt`): the same request shape
 * would be refused for every job, and would fail them all.
 */
export function refusesSharedParameter(error: ProviderError): boolean {
  return error.reason === 'bad_request' && error.status !== 404 && error.param !== null && !DOCUMENT_PARAMETER.test(error.param);
}

/** Parameters that hold the document itself (`messages[0].content`), whose refusal is the document's own. */
const DOCUMENT_PARAMETER = /^(?:messages|input|prompt|contents?)\b/i;

/** `message` followed by a hint, with a full stop between them when the message has none. */
function sentence(message: string, hint: string): string {
  return /[.!?]$/.test(message) ? `${message} ${hint}` : `${message}. ${hint}`;
}

/** The first line of a plain-text body; null for empty, HTML and unknown JSON bodies (the status text says more). */
function plainBodyText(text: string): string | null {
  const t = text.trim();
  if (t === '' || t.startsWith('<') || t.startsWith('{') || t.startsWith('[')) return null;
  return t.split('\n', 1)[0];
}

/** fetch threw before an answer arrived: refused, reset, DNS, TLS... */
export function classifyNetworkError(err: unknown, secret: string | undefined): ProviderError {
  const detail = networkDetail(err);
  if (LOCAL_LIMIT.test(detail)) {
    return new ProviderError({
      message: `Local limit: ${cleanMessage(detail, secret)} (this machine, not the provider)`,
      scope: 'retryable',
      reason: 'local',
      cause: redactError(err, secret),
    });
  }
  return new ProviderError({
    message: `Network error: ${cleanMessage(detail, secret)}`,
    scope: 'retryable',
    reason: 'network',
    cause: redactError(err, secret),
  });
}

/** Out of file descriptors or buffers on this machine: lower concurrency, do not blame the provider. */
const LOCAL_LIMIT = /\b(EMFILE|ENFILE|ENOBUFS|ENOMEM)\b|too many open files/i;

/** The most specific message in the cause chain, with its code: `connect ECONNREFUSED 127.0.0.1:80`. */
function networkDetail(err: unknown): string {
  let best = 'fetch failed';
  let code: string | null = null;
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 5; e = (e as Error).cause, depth++) {
    if (!(e instanceof Error)) {
      best = String(e);
      break;
    }
    // Happy-eyeballs connects fail with an AggregateError whose own message is empty.
    const inner = e instanceof AggregateError && e.errors[0] instanceof Error ? (e.errors[0] as Error) : null;
    for (const x of [e, inner]) {
      const c = (x as { code?: unknown } | null)?.code;
      if (typeof c === 'string') code = c;
    }
    const msg = inner?.message || e.message;
    if (msg && msg !== 'fetch failed') best = msg;
  }
  if (code && !best.includes(code)) best = `${best} (${code})`;
  return best;
}

export function timeoutError(timeoutMs: number, how: { auto?: boolean; model?: string; limitMs?: number } = {}): ProviderError {
  const why = how.auto
    ? `--timeout auto: the limit was ${formatMs(how.limitMs ?? timeoutMs)}, several times the p99 latency of ${how.model ?? 'this model'}`
    : // every try timing out looks like an outage (paused, probing): say what else it may be
      '--timeout; if the provider is only slow, raise it';
  return new ProviderError({
    message: `Timed out after ${formatMs(timeoutMs)} (${why})`,
    scope: 'retryable',
    reason: 'timeout',
  });
}

/** A 200 whose body is not a usable completion: truncated, not JSON, no choices. */
export function badBodyError(
  detail: string,
  status: number,
  rateLimit: RateLimitInfo | null,
  secret: string | undefined,
  cause?: unknown,
  unbilled = false,
): ProviderError {
  return new ProviderError({
    message: `HTTP ${status}: ${cleanMessage(`invalid completion body: ${detail}`, secret)}`,
    scope: 'retryable',
    reason: 'bad_body',
    status,
    rateLimit,
    unbilled,
    cause: redactError(cause, secret),
  });
}

function formatMs(ms: number): string {
  return ms % 1000 === 0 ? `${ms / 1000} s` : ms >= 1000 ? `${(ms / 1000).toFixed(1)} s` : `${ms} ms`;
}
