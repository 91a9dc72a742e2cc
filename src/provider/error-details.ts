/**
 * What a provider says in an error's body rather than in headers: Google's endpoints (the
 * OpenAI-compatible one too) send no rate-limit header and no retry-after, and put the wait and the
 * quota spent in `google.rpc` details of the 429's body.
 */
import { atMostADay, parseDuration } from './headers.js';
import type { RateLimitInfo } from './types.js';

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
  for (const d of detailsOfType(json, 'google.rpc.RetryInfo')) {
    const m = typeof d.retryDelay === 'string' ? /^\s*(\d+(?:\.\d+)?)s\s*$/.exec(d.retryDelay) : null;
    if (m) said = Number(m[1]) * 1000;
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
  const out: Array<{ quotaId: string; quotaValue: unknown }> = [];
  for (const d of detailsOfType(json, 'google.rpc.QuotaFailure')) {
    if (!Array.isArray(d.violations)) continue;
    for (const v of d.violations as Array<{ quotaId?: unknown; quotaValue?: unknown } | null>) {
      if (typeof v?.quotaId === 'string') out.push({ quotaId: v.quotaId, quotaValue: v.quotaValue });
    }
  }
  return out;
}

/** The entries of an error's `details` of one `@type` (`type.googleapis.com/google.rpc.RetryInfo`), the error alone or first in a list. */
function detailsOfType(json: unknown, type: string): Array<Record<string, unknown>> {
  const e = (Array.isArray(json) ? json[0] : json) as { error?: { details?: unknown } } | null | undefined;
  const details = e?.error?.details;
  if (!Array.isArray(details)) return [];
  return details.filter(
    (d): d is Record<string, unknown> => typeof d === 'object' && d !== null && typeof d['@type'] === 'string' && d['@type'].endsWith(type),
  );
}
