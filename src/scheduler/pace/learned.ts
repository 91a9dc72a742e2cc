import type { RateLimitInfo } from '../../provider/types.js';
import type { PaceLimits } from './window-pacer.js';

/**
 * What the provider's rate-limit headers say its limits are, per minute.
 *
 * `limit` is the budget and `reset` the time until the budget is full again, so the budget refills
 * at (limit - remaining) / reset, and its period is reset * limit / (limit - remaining): 600 with
 * 599 left and `100ms` to full is 600 per minute. The period is snapped to a second, a minute, an
 * hour or a day (what providers use); when nothing was used yet, a minute is assumed.
 */
export function limitsFromHeaders(rl: RateLimitInfo | null): PaceLimits | null {
  if (!rl) return null;
  const rpm = perMinute(rl.limitRequests, rl.remainingRequests, rl.resetRequestsMs);
  const tpm = perMinute(rl.limitTokens, rl.remainingTokens, rl.resetTokensMs);
  return rpm === null && tpm === null ? null : { rpm, tpm };
}

const PERIODS_MS = [1000, 60_000, 3_600_000, 86_400_000];

function perMinute(limit: number | null, remaining: number | null, resetMs: number | null): number | null {
  if (limit === null || !(limit > 0)) return null;
  let period = 60_000;
  if (remaining !== null && resetMs !== null && resetMs > 0 && remaining < limit) {
    const used = limit - remaining;
    const measured = (resetMs * limit) / used;
    // A reset in whole seconds (`1s`, an RFC 3339 time) may be up to a second off, and so may
    // clocks: unless the period measured that way rules a minute out, a minute it is.
    const slack = slackOf(resetMs);
    const low = (Math.max(0, resetMs - slack) * limit) / used;
    const high = ((resetMs + slack) * limit) / used;
    if (!(low <= 60_000 && 60_000 <= high)) {
      // The first known period not under the one measured: a budget refilling all the time has a
      // fraction of a request back, which `remaining` leaves out (599.95 said as 599, full in 5 ms),
      // so `used` may be more than was used, and the period measured less than it is, never more.
      // Taken to the nearest, 600 a minute with 5 ms to full read as 36,000 a minute. Under 0.9 s it
      // could be any of them (600 with 1 ms to full): a minute, as when nothing was used.
      if (measured >= 900) period = PERIODS_MS.find((p) => p >= measured * 0.9) ?? PERIODS_MS.at(-1)!;
    }
    // A budget counted in fixed windows (a gateway's, a proxy's) says in its reset when its window
    // ends, whatever was used: 2 used of 1,200 and `60s` is 1,200 a minute there, and would read
    // as 1,200 a day. A period longer than a minute is taken no longer than the shortest window its
    // reset fits in: misread the other way, a day's budget is spent sooner and its 429s and
    // `remaining: 0` hold the lane back, where a minute's read as a day's held the run at 1/1,440 of
    // its limit. As a day's budget is used its reset grows past a minute, then an hour, and it reads
    // as a day's again.
    if (period > 60_000) {
      const window = PERIODS_MS.find((p) => p >= resetMs - slackOf(resetMs)) ?? PERIODS_MS.at(-1)!;
      period = Math.min(period, Math.max(60_000, window));
    }
  }
  return (limit * 60_000) / period;
}

/** How far off a reset may be: one said in whole seconds (`1s`, an RFC 3339 time) up to a second. */
function slackOf(resetMs: number): number {
  return resetMs % 1000 === 0 ? 1000 : 50;
}

/**
 * How long a budget with less left than the next request weighs (`units`: a request, or the tokens
 * a request weighs) means waiting: until what is short comes back, never until the whole budget is
 * full. The provider refuses a request that weighs more than is left, so 1,000 tokens left of
 * 600,000 is as empty as none for requests of 5,000. Waiting for one token alone (a tenth of a
 * millisecond at 600,000 a minute) sent the next request into a 429 whenever something else spends
 * the same key.
 */
export function refillIntervalMs(
  limitPerMinute: number | null,
  remaining: number | null,
  resetMs: number | null,
  limit: number | null,
  units = 1,
): number | null {
  if (remaining === null || remaining >= units) return null;
  const short = units - remaining;
  // the budget comes back from `remaining` to `limit` in `resetMs`, at an even rate
  if (limit !== null && limit > remaining && resetMs !== null && resetMs > 0) {
    return Math.ceil(Math.min(resetMs, (resetMs / (limit - remaining)) * short));
  }
  if (limitPerMinute !== null && limitPerMinute > 0) return Math.ceil(Math.min(60_000, (60_000 / limitPerMinute) * short));
  return resetMs === null ? 1000 : Math.min(resetMs, 1000);
}

/** The lower of two limits, kind by kind (null: no limit). */
export function lowerOf(a: PaceLimits, b: PaceLimits | null): PaceLimits {
  if (!b) return a;
  const min = (x: number | null, y: number | null): number | null => (x === null ? y : y === null ? x : Math.min(x, y));
  return { rpm: min(a.rpm, b.rpm), tpm: min(a.tpm, b.tpm) };
}
