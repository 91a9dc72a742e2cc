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

export function atMostADay(ms: number): number {
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
