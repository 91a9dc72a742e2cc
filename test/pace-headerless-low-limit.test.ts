import { describe, expect, it } from 'vitest';
import { Lane } from '../src/scheduler/lane.js';
import { LocalLaneBoard } from '../src/scheduler/pace/board.js';
import { ProviderError } from '../src/provider/types.js';

const T0 = 1_750_000_000_000;
const tooMany = () => new ProviderError({ message: '429', scope: 'retryable', reason: 'rate_limit', status: 429 });

/**
 * A provider that says no limit (no x-ratelimit-* headers, no retry-after) and allows `perWindow`
 * requests in each 1-second window, behind a run that can send `offered` a second (its concurrency
 * over the latency). The lane's only evidence is its 429s. Returns the 429s and answers per second
 * of the last `measureS` seconds of `seconds`.
 */
async function simulate(options: {
  perWindow: number;
  offered: number;
  seconds: number;
  measureS: number;
  latencyMs?: number;
  caps?: { rpm: number | null };
  /** The provider's counting window: 1 s, or a gateway's minute. */
  windowMs?: number;
}) {
  const clock = { now: T0 };
  const lane = new Lane('m', { rpm: options.caps?.rpm ?? null, tpm: null }, new LocalLaneBoard(() => clock.now), () => clock.now);
  const stepMs = 1000 / options.offered;
  const latencyMs = options.latencyMs ?? 200;
  // answers on their way back, oldest first: the lane hears of a 429 a latency after it sent the request
  const coming: Array<{ at: number; sentAt: number; ok: boolean }> = [];
  let window = -1,
    inWindow = 0,
    refused = 0,
    answered = 0;
  const measureFrom = T0 + (options.seconds - options.measureS) * 1000;
  for (const end = T0 + options.seconds * 1000; clock.now < end; clock.now += stepMs) {
    while (coming.length > 0 && coming[0]!.at <= clock.now) {
      const { sentAt, ok } = coming.shift()!;
      if (ok) lane.answered(null, latencyMs, 10);
      else lane.rateLimitedBy(tooMany(), sentAt);
    }
    if (lane.pauseLeft() > 0) continue;
    const got = await lane.tryTake(0);
    if (typeof got === 'number') continue;
    const w = Math.floor(clock.now / (options.windowMs ?? 1000));
    if (w !== window) {
      window = w;
      inWindow = 0;
    }
    const ok = inWindow++ < options.perWindow;
    lane.ended(got);
    coming.push({ at: clock.now + latencyMs, sentAt: clock.now, ok });
    if (clock.now >= measureFrom) {
      if (ok) answered++;
      else refused++;
    }
  }
  return { lane, refusedPerS: refused / options.measureS, answeredPerS: answered / options.measureS };
}

describe('429s with no headers, a limit far under what the run can send', () => {
  it('settles at the limit (60 a minute, a run able to send 200 a second) with a 429 now and then, not every second', async () => {
    const { lane, refusedPerS, answeredPerS } = await simulate({ perWindow: 1, offered: 200, seconds: 180, measureS: 120 });
    // Observed: the climb after each cut (shares of the first burst's rate, not of the rate the 429
    // came at) passed the limit within a second or two; 0.5 refused a second, and status said
    // "108 rpm, learned from 429s" for 60 (a pace of 1.8 a second sends one a second).
    expect(refusedPerS).toBeLessThan(0.1);
    expect(answeredPerS).toBeGreaterThan(0.8);
    expect(lane.toRemember()!.rpm!).toBeGreaterThan(45);
    expect(lane.toRemember()!.rpm!).toBeLessThanOrEqual(60);
    // and the progress's lane line says the pace it sends at, not "117 rpm learned from 429s" beside "1.0 req/s of 1.0"
    expect(lane.snapshot().rpm).toBe(60);
  });

  it('settles at 300 a minute from a burst of 64 (few 429s, near the limit)', async () => {
    const { refusedPerS, answeredPerS } = await simulate({ perWindow: 5, offered: 64, seconds: 180, measureS: 120 });
    expect(refusedPerS).toBeLessThan(0.1);
    expect(answeredPerS).toBeGreaterThan(4.25);
  });

  it("a gateway's minute window (all of a minute's requests may go at once, then none till it turns): every minute's share is used", async () => {
    // 120 a minute: a pace that falls with each 429 of a spent minute must climb back in the next,
    // where steps measured by the last 429's rate (each lower) crawled: 4 minutes for 3 minutes' work
    const { answeredPerS, refusedPerS } = await simulate({
      perWindow: 120,
      windowMs: 60_000,
      offered: 64,
      latencyMs: 50,
      seconds: 300,
      measureS: 240,
    });
    expect(answeredPerS * 60).toBeGreaterThan(110);
    // refused again with nothing answered, the lane waits twice as long each time: a 429 each refill
    // interval through the spent minute made 60 to 140 of them a minute
    expect(refusedPerS * 60).toBeLessThan(60);
  });

  it('under a --rpm 10 times the real limit, the same', async () => {
    const { refusedPerS, answeredPerS } = await simulate({ perWindow: 2, offered: 100, seconds: 180, measureS: 120, caps: { rpm: 1200 } });
    expect(refusedPerS).toBeLessThan(0.1);
    expect(answeredPerS).toBeGreaterThan(1.7);
  });
});
