import { describe, expect, it } from 'vitest';
import { parseRateLimit } from '../src/provider/headers.js';
import { ProviderError } from '../src/provider/types.js';
import { Lane } from '../src/scheduler/lane.js';
import { LocalLaneBoard } from '../src/scheduler/pace/board.js';

const T0 = 1_750_000_000_000;
const LIMIT = 600; // a minute: 10 in any second

/** OpenAI's headers as a provider counting requests over a sliding second says them. */
function said(remaining: number) {
  const h: Record<string, string> = {
    'x-ratelimit-limit-requests': String(LIMIT),
    'x-ratelimit-remaining-requests': String(Math.max(0, remaining)),
    'x-ratelimit-reset-requests': '100ms',
  };
  return parseRateLimit({ get: (name: string) => h[name.toLowerCase()] ?? null });
}

/**
 * Another client spends the same key at `others` a second, evenly, and refused requests count
 * against the limit as answered ones do (OpenAI: "unsuccessful requests contribute to your limit"),
 * over a sliding second. The lane sends as it paces, -c 16 at 300 ms; every response says the limit.
 * Returns the lane's answers a minute over the last `measureS` seconds.
 */
async function simulate(o: { others: number; seconds: number; measureS: number }) {
  const clock = { now: T0 };
  const lane = new Lane('m', { rpm: null, tpm: null }, new LocalLaneBoard(() => clock.now), () => clock.now);
  const latencyMs = 300;
  const window: number[] = []; // when each request the provider counted arrived
  const count = (t: number) => {
    while (window.length > 0 && window[0]! <= t - 1000) window.shift();
    const full = window.length >= LIMIT / 60;
    window.push(t);
    return full;
  };
  const coming: Array<{ at: number; sentAt: number; refused: boolean; remaining: number }> = [];
  let answered = 0;
  let nextOther = T0;
  const measureFrom = T0 + (o.seconds - o.measureS) * 1000;
  let inFlight = 0;
  for (const end = T0 + o.seconds * 1000; clock.now < end; clock.now += 5) {
    for (; o.others > 0 && nextOther <= clock.now; nextOther += 1000 / o.others) count(nextOther);
    while (coming.length > 0 && coming[0]!.at <= clock.now) {
      const c = coming.shift()!;
      inFlight--;
      if (!c.refused) lane.answered(said(c.remaining), latencyMs, 10);
      else
        lane.rateLimitedBy(
          new ProviderError({
            message: 'HTTP 429',
            scope: 'retryable',
            reason: 'rate_limit',
            status: 429,
            retryAfterMs: 20,
            rateLimit: said(0),
          }),
          c.sentAt,
        );
    }
    if (inFlight >= 16 || lane.pauseLeft() > 0) continue;
    const got = await lane.tryTake(0);
    if (typeof got === 'number') continue;
    lane.ended(got);
    inFlight++;
    const refused = count(clock.now);
    coming.push({ at: clock.now + latencyMs, sentAt: clock.now, refused, remaining: LIMIT / 60 - window.length });
    if (!refused && clock.now >= measureFrom) answered++;
  }
  return { answeredPerMinute: (answered * 60) / o.measureS };
}

describe('a key another client spends too: 429s that say the limit', () => {
  it('alone on the key, the lane paces at the limit the headers say', async () => {
    const { answeredPerMinute } = await simulate({ others: 0, seconds: 120, measureS: 60 });
    expect(answeredPerMinute).toBeGreaterThan(0.9 * LIMIT);
  });

  it('with another client taking 4 of its 10 a second, the lane slows to what is left rather than being refused every time', async () => {
    // Before: each 429 paused the lane for its retry-after and it went on at the 600 the headers
    // say: its refused requests filled the provider's second, and nearly nothing was answered.
    const { answeredPerMinute } = await simulate({ others: 4, seconds: 180, measureS: 60 });
    expect(answeredPerMinute).toBeGreaterThan(0.6 * 360);
  });
});
