import type { RateLimitInfo } from './types.js';

/** The one method of fetch's `Headers` we need, so plain objects work in tests. */
export interface HeaderSource {
  get(name: string): string | null;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/**
 * An OpenAI-style duration in ms: `20ms`, `1s`, `6m0s`, `1m30.5s`, `2h`. A bare number is seconds
 * (some compatible servers send `x-ratelimit-reset-*` that way). Null when it cannot be read.
 */
export function parseDuration(text: string | null | undefined): number | null {
  if (text == null) return null;
  const s = text.trim();
  if (s === '') return null;
  if (/^\d+(\.\d+)?$/.test(s)) return Math.round(Number(s) * 1000);
  const re = /(\d+(?:\.\d+)?)(ms|h|m|s)/gy;
  let total = 0;
  let end = 0;
  for (let m = re.exec(s); m; m = re.exec(s)) {
    total += Number(m[1]) * UNIT_MS[m[2]];
    end = re.lastIndex;
  }
  return end === s.length && end > 0 ? Math.round(total) : null;
}

/**
 * The longest wait a server's `retry-after` is taken at: a day. A longer one (a misconfigured proxy,
 * 400 digits) would hold a lane past any run, and past 2^31 ms a timer fires at once instead.
 */
export const MAX_RETRY_AFTER_MS = 86_400_000;

/**
 * How long the server asked us to wait, in ms: `retry-after-ms` (OpenAI's, precise) first, then
 * `retry-after` as seconds or as an HTTP date; at most MAX_RETRY_AFTER_MS. Null when neither is
 * there or readable.
 */
export function parseRetryAfter(headers: HeaderSource, now: number = Date.now()): number | null {
  const ms = headers.get('retry-after-ms');
  if (ms !== null && ms.trim() !== '' && Number.isFinite(Number(ms)) && Number(ms) >= 0) return atMostADay(Number(ms));
  const ra = headers.get('retry-after');
  if (ra === null || ra.trim() === '') return null;
  if (/^\s*\d+(\.\d+)?\s*$/.test(ra)) return atMostADay(Number(ra) * 1000);
  const date = Date.parse(ra);
  return Number.isNaN(date) ? null : atMostADay(Math.max(0, date - now));
}

/**
 * How long a 429's body asks to wait, for servers that say it there and not in a header: Google's
 * (its OpenAI-compatible endpoint too) as `google.rpc.RetryInfo`'s `retryDelay` (`"36s"`,
 * `"45.837906927s"`) and in its message (`Please retry in 36.429760048s.`); the longer where both
 * say it (`retryDelay` is the message's delay cut to whole seconds). Null when the body says none.
 * Not OpenAI's "Please try again in 20ms": it sends headers, and its hint is the time until this
 * request's tokens are back, not a wait for the whole lane (relayed by a proxy without headers, a
 * lane was refused every 20 ms).
 */
export function retryDelayInBody(json: unknown, message: string | null): number | null {
  let said: number | null = null;
  const e = (Array.isArray(json) ? json[0] : json) as { error?: { details?: unknown } } | null | undefined;
  const details = e?.error?.details;
  if (Array.isArray(details)) {
    for (const d of details as Array<{ '@type'?: unknown; retryDelay?: unknown } | null>) {
      if (typeof d?.['@type'] === 'string' && d['@type'].endsWith('google.rpc.RetryInfo') && typeof d.retryDelay === 'string') {
        const m = /^\s*(\d+(?:\.\d+)?)s\s*$/.exec(d.retryDelay);
        if (m) said = Number(m[1]) * 1000;
      }
    }
  }
  const inMessage = message === null ? null : /\bPlease retry in ((?:\d+(?:\.\d+)?(?:ms|h|m|s))+)(?![a-z])/i.exec(message);
  const fromMessage = inMessage ? parseDuration(inMessage[1]) : null;
  if (fromMessage !== null) said = Math.max(said ?? 0, fromMessage);
  return said === null ? null : atMostADay(said);
}

/**
 * The requests-per-minute quota a 429's body says was spent, for servers that say it there and not in
 * headers: Google's `google.rpc.QuotaFailure` (`quotaId` `GenerateRequestsPerMinutePerProjectPerModel`,
 * `quotaValue` `"120"`), the lowest where it names several. As a limit said in headers, so the lane
 * paces under it. Token quotas are left out: Google's count input tokens only, where a lane's weigh a
 * request's `max_tokens` too (paced at them, a run would use a fraction); per-day quotas are no pace.
 */
export function quotaInBody(json: unknown): RateLimitInfo | null {
  let rpm: number | null = null;
  for (const v of quotaViolations(json)) {
    const value = Number(v.quotaValue);
    if (!/Requests/.test(v.quotaId) || !/PerMinute/.test(v.quotaId)) continue;
    if (Number.isFinite(value) && value > 0) rpm = Math.min(rpm ?? value, value);
  }
  return rpm === null
    ? null
    : {
        limitRequests: rpm,
        limitTokens: null,
        remainingRequests: null,
        remainingTokens: null,
        resetRequestsMs: null,
        resetTokensMs: null,
        inBody: true,
      };
}

/** The quotas a 429's body says were spent (Google's `google.rpc.QuotaFailure` violations); none when it names none. */
export function quotaViolations(json: unknown): Array<{ readonly quotaId: string; readonly quotaValue: unknown }> {
  const e = (Array.isArray(json) ? json[0] : json) as { error?: { details?: unknown } } | null | undefined;
  const details = e?.error?.details;
  if (!Array.isArray(details)) return [];
  const out: Array<{ quotaId: string; quotaValue: unknown }> = [];
  for (const d of details as Array<{ '@type'?: unknown; violations?: unknown } | null>) {
    if (typeof d?.['@type'] !== 'string' || !d['@type'].endsWith('google.rpc.QuotaFailure') || !Array.isArray(d.violations)) continue;
    for (const v of d.violations as Array<{ quotaId?: unknown; quotaValue?: unknown } | null>) {
      if (typeof v?.quotaId === 'string') out.push({ quotaId: v.quotaId, quotaValue: v.quotaValue });
    }
  }
  return out;
}

function atMostADay(ms: number): number {
  return Math.round(Math.min(ms, MAX_RETRY_AFTER_MS));
}

function count(text: string | null): number | null {
  if (text === null || text.trim() === '') return null;
  const n = Number(text);
  return Number.isFinite(n) && n >= 0 ? n : null;
}

/**
 * The rate-limit headers, or null when the server sent none: OpenAI's `x-ratelimit-*` (resets as
 * durations), else Anthropic's `anthropic-ratelimit-*` (resets as RFC 3339 times; the combined
 * `tokens` budget, else `input-tokens`).
 */
export function parseRateLimit(headers: HeaderSource, now: number = Date.now()): RateLimitInfo | null {
  const openai: RateLimitInfo = {
    limitRequests: count(headers.get('x-ratelimit-limit-requests')),
    limitTokens: count(headers.get('x-ratelimit-limit-tokens')),
    remainingRequests: count(headers.get('x-ratelimit-remaining-requests')),
    remainingTokens: count(headers.get('x-ratelimit-remaining-tokens')),
    resetRequestsMs: parseDuration(headers.get('x-ratelimit-reset-requests')),
    resetTokensMs: parseDuration(headers.get('x-ratelimit-reset-tokens')),
  };
  if (!Object.values(openai).every((v) => v === null)) return openai;
  const a = (name: string): string | null => headers.get(`anthropic-ratelimit-${name}`);
  const tokens = a('tokens-limit') !== null ? 'tokens' : 'input-tokens';
  const anthropic: RateLimitInfo = {
    limitRequests: count(a('requests-limit')),
    limitTokens: count(a(`${tokens}-limit`)),
    remainingRequests: count(a('requests-remaining')),
    remainingTokens: count(a(`${tokens}-remaining`)),
    resetRequestsMs: untilTime(a('requests-reset'), now),
    resetTokensMs: untilTime(a(`${tokens}-reset`), now),
  };
  return Object.values(anthropic).every((v) => v === null) ? null : anthropic;
}

/** ms from `now` until an RFC 3339 time (never negative), null when unreadable. */
function untilTime(text: string | null, now: number): number | null {
  if (text === null || text.trim() === '') return null;
  const t = Date.parse(text);
  return Number.isNaN(t) ? null : Math.max(0, t - now);
}
