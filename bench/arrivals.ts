// Rates from the arrival times of the requests a fake answered, as the provider saw them.

/** The arrivals from `skipMs` after the first one on (a governor still learning the limit is left out). */
function after(okAt: readonly number[], skipMs: number): readonly number[] {
  return skipMs && okAt.length ? okAt.filter((t) => t >= okAt[0]! + skipMs) : okAt;
}

/**
 * Answered requests per second over the busy span, first arrival to last: (n - 1) / span. A client
 * sending bursts at window starts reads a little above the limit here (both ends are bursts), which
 * is why `windowFill` is printed next to it.
 */
export function busyRate(okAt: readonly number[], skipMs = 0): number {
  const t = after(okAt, skipMs);
  if (t.length < 2 || t[t.length - 1]! <= t[0]!) return 0;
  return (t.length - 1) / ((t[t.length - 1]! - t[0]!) / 1000);
}

/**
 * Answered requests per window, on average over the windows strictly between the first and the last
 * one touched (those are full windows whatever the client's phase or burstiness); NaN when there are
 * none. Windows are aligned to the clock, as the fake's are.
 */
export function windowFill(okAt: readonly number[], windowMs: number, skipMs = 0): number {
  const t = after(okAt, skipMs);
  if (!t.length) return NaN;
  const first = Math.floor(t[0]! / windowMs);
  const last = Math.floor(t[t.length - 1]! / windowMs);
  if (last - first < 2) return NaN;
  const inside = t.filter((x) => Math.floor(x / windowMs) > first && Math.floor(x / windowMs) < last).length;
  return inside / (last - first - 1);
}
