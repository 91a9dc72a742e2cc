import { describe, expect, it } from 'vitest';
import { RateBackoff } from '../src/scheduler/pace/backoff.js';
import { SendSeconds } from '../src/scheduler/pace/send-seconds.js';
import { LatencyStats } from '../src/scheduler/pace/latency.js';
import { limitsFromHeaders, refillIntervalMs } from '../src/scheduler/pace/learned.js';
import { GUARD_MS, WARM_GUARD_MS, WindowPacer, reachablePerSecond, type PaceLimits } from '../src/scheduler/pace/window-pacer.js';
import { paceSeconds } from '../src/report/estimate-time.js';
import { LocalLaneBoard } from '../src/scheduler/pace/board.js';
import { LEARNED_FROM_429S_KEPT_MS } from '../src/remembered-pace.js';
import { Lanes, localBoards } from '../src/scheduler/lanes.js';
import type { LaneLimitRow } from '../src/store/types.js';
import { Lane } from '../src/scheduler/lane.js';
import { laneText } from '../src/cli/progress/lines.js';
import { ProviderError } from '../src/provider/types.js';
import { parseRateLimit } from '../src/provider/headers.js';

const T0 = 1_750_000_000_000;

/** A greedy caller: send whenever the pacer allows, for `ms`, each request `tokens` big. Returns send times. */
function drive(limits: PaceLimits, ms: number, tokens = 0, warm = false): number[] {
  const pacer = new WindowPacer(limits);
  if (warm) pacer.setGuard(WARM_GUARD_MS);
  const sent: number[] = [];
  for (let now = T0; now < T0 + ms; ) {
    const wait = pacer.delay(tokens, now);
    if (wait > 0) {
      now += wait;
      continue;
    }
    pacer.take(tokens, now);
    sent.push(now);
  }
  return sent;
}

/** The most sends (or tokens) any fixed 1-second window, at any alignment, receives. */
function worstWindow(times: number[], weight = (_i: number) => 1): number {
  let worst = 0;
  for (let i = 0; i < times.length; i++) {
    let sum = 0;
    for (let j = i; j < times.length && times[j]! < times[i]! + 1000; j++) sum += weight(j);
    worst = Math.max(worst, sum);
  }
  return worst;
}

describe('WindowPacer: no 1-second window above its share', () => {
  it('600 rpm: never 11 in any second, and close to 10 per second over time', () => {
    const sent = drive({ rpm: 600, tpm: null }, 20_000);
    expect(worstWindow(sent)).toBeLessThanOrEqual(10);
    expect(sent.length / 20).toBeGreaterThanOrEqual(9.7); // 98% of the limit: the guard costs 2%
  });

  it('a warm lane pays only the narrow guard: 6000 rpm at over 99% of the limit, never 101 in any second', () => {
    const sent = drive({ rpm: 6000, tpm: null }, 20_000, 0, true);
    expect(worstWindow(sent)).toBeLessThanOrEqual(100);
    // receipts up to WARM_GUARD_MS later than the send still never put 101 in a window of the provider
    const jittered = sent.map((t, i) => t + ((i * 7919) % (WARM_GUARD_MS + 1))).sort((a, b) => a - b);
    expect(worstWindow(jittered)).toBeLessThanOrEqual(100);
    expect(sent.length / 20).toBeGreaterThanOrEqual(99);
  });

  it("a 429 saying the limit for a request sent before any limit was known is no jitter: the narrow guard stays (Google's quota on 429s only)", async () => {
    let now = T0;
    const board = new LocalLaneBoard(() => now);
    const guards: number[] = [];
    const setGuard = board.setGuard.bind(board);
    board.setGuard = (ms: number) => {
      guards.push(ms);
      setGuard(ms);
    };
    const lane = new Lane('m', { rpm: null, tpm: null }, board, () => now);
    const said = {
      limitRequests: 600,
      limitTokens: null,
      remainingRequests: null,
      remainingTokens: null,
      resetRequestsMs: null,
      resetTokensMs: null,
    };
    const refused = () =>
      new ProviderError({ message: '429', scope: 'retryable', reason: 'rate_limit', status: 429, retryAfterMs: 100, rateLimit: said });
    expect(typeof (await lane.tryTake(0))).not.toBe('number');
    const burstSentAt = now;
    now += 50;
    // the first 429 teaches the limit; the second, of the same burst, came as the lane knew it
    lane.rateLimitedBy(refused(), burstSentAt);
    lane.rateLimitedBy(refused(), burstSentAt);
    expect(lane.limits().rpm).toBe(600);
    expect(guards).toEqual([]);
    // one sent paced at the limit and still refused: the sends reach the provider later than the guard covers
    now += 1000;
    const ticket = await lane.tryTake(0);
    expect(typeof ticket).not.toBe('number');
    const pacedSentAt = now;
    now += 50;
    lane.rateLimitedBy(refused(), pacedSentAt);
    expect(guards).toEqual([GUARD_MS]);
  });

  it("a quota said in a 429's body is not an answer's headers: a later 429 saying none still pauses the lane (no stray)", async () => {
    let now = T0;
    const lane = new Lane('m', { rpm: null, tpm: null }, new LocalLaneBoard(() => now), () => now);
    const inBody = {
      limitRequests: 600,
      limitTokens: null,
      remainingRequests: null,
      remainingTokens: null,
      resetRequestsMs: null,
      resetTokensMs: null,
      inBody: true,
    };
    const refused = (rateLimit: typeof inBody | null) =>
      new ProviderError({ message: '429', scope: 'retryable', reason: 'rate_limit', status: 429, retryAfterMs: 1000, rateLimit });
    lane.rateLimitedBy(refused(inBody), now);
    expect(lane.limits().rpm).toBe(600);
    // remembered as a pace 429s taught: a raised quota is never said to a run paced under the old
    expect(lane.toRemember()).toMatchObject({ rpm: 600, source: '429s' });
    // answers without headers (Google's), then a 429 of another quota (input tokens), said nowhere
    for (let i = 0; i < 30; i++) lane.answered(null, 100, 10);
    now += 2000;
    expect(lane.rateLimitedBy(refused(null), now - 100).lanePaused).toBe(true);
  });

  it("no tokens left: the lane pauses until a request's weight is back, not one token", async () => {
    const now = T0;
    const lane = new Lane('m', { rpm: null, tpm: 600_000 }, new LocalLaneBoard(() => now), () => now);
    const ticket = await lane.tryTake(2000);
    expect(typeof ticket).not.toBe('number');
    // another program spent the rest of the key's minute: no tokens left, full again in 60 s
    const rateLimit = {
      limitRequests: null,
      limitTokens: 600_000,
      remainingRequests: null,
      remainingTokens: 0,
      resetRequestsMs: null,
      resetTokensMs: 60_000,
    };
    lane.answered(rateLimit, 100, 10);
    expect(lane.pauseLeft()).toBe(200);
  });

  it('fewer tokens left than a request weighs: the lane pauses too, until what is short is back', async () => {
    const now = T0;
    const lane = new Lane('m', { rpm: null, tpm: 600_000 }, new LocalLaneBoard(() => now), () => now);
    expect(typeof (await lane.tryTake(5000))).not.toBe('number');
    const rateLimit = {
      limitRequests: null,
      limitTokens: 600_000,
      remainingRequests: null,
      remainingTokens: 1000,
      resetRequestsMs: null,
      resetTokensMs: 59_900,
    };
    lane.answered(rateLimit, 100, 10);
    // the provider refuses a request of 5,000 with 1,000 left: 4,000 short, 10 a ms
    expect(lane.pauseLeft()).toBe(400);
  });

  it('its ceiling is the lower of the request limit and the token limit over what a request weighs, and the lane line says which binds', async () => {
    let now = T0;
    const lane = new Lane('gpt-4o', { rpm: 7200, tpm: 100_000 }, new LocalLaneBoard(() => now), () => now);
    // no request sent yet: what one weighs is unknown, so only the request limit is a ceiling
    expect(lane.ceiling()).toEqual({ perSecond: 120, by: 'requests' });
    expect(typeof (await lane.tryTake(530))).not.toBe('number');
    // 100,000 tokens a minute is 1,667 a window: three requests of 530 fit in one, not 3.1; far under 120
    expect(lane.ceiling()).toEqual({ perSecond: 3, by: 'tokens' });
    now += 1000;
    expect(laneText(lane.snapshot(), now)).toMatch(/^gpt-4o \d+(\.\d+)? req\/s of 3\.0 by tokens \(7,200 rpm, 100k tpm\)$/);
    const light = new Lane('mini', { rpm: 600, tpm: 1_000_000 }, new LocalLaneBoard(() => now), () => now);
    expect(typeof (await light.tryTake(50))).not.toBe('number');
    expect(light.ceiling()).toEqual({ perSecond: 10, by: 'requests' });
    expect(laneText(light.snapshot(), now)).toMatch(/req\/s of 10\.0 \(600 rpm, 1\.0M tpm\)$/);
    expect(laneText(new Lane('free', { rpm: null, tpm: null }, new LocalLaneBoard(() => now), () => now).snapshot(), now)).toBeNull();
    // a pause is said from a second on: a shorter one is the pace's own wait, not a stall ("paused 0s")
    const board = new LocalLaneBoard(() => now);
    const paused = new Lane('m', { rpm: 600, tpm: null }, board, () => now);
    board.pause(now + 400);
    expect(laneText(paused.snapshot(), now)).toMatch(/\(600 rpm\)$/);
    board.pause(now + 12_000);
    expect(laneText(paused.snapshot(), now)).toMatch(/\(600 rpm\) · paused 12s$/);
    // the user's --rpm under what the headers say: not said to come from them
    const capped = new Lane('m', { rpm: 300, tpm: null }, new LocalLaneBoard(() => now), () => now);
    capped.answered(parseRateLimit(headers({ 'x-ratelimit-limit-requests': '600', 'x-ratelimit-limit-tokens': '1000000' })), 100, 10);
    expect(laneText(capped.snapshot(), now)).toMatch(/\(300 rpm, 1\.0M tpm; the headers say 600 rpm, 1\.0M tpm\)$/);
    const atTheirs = new Lane('m', { rpm: null, tpm: null }, new LocalLaneBoard(() => now), () => now);
    atTheirs.answered(parseRateLimit(headers({ 'x-ratelimit-limit-requests': '600' })), 100, 10);
    expect(laneText(atTheirs.snapshot(), now)).toMatch(/\(600 rpm from headers\)$/);
  });

  it('the windows admit whole requests: a token share fits as many as it holds whole, a bigger request goes alone at the average rate', () => {
    const share1000 = { rpm: 600, tpm: 60_000 };
    expect(reachablePerSecond(share1000, 560)).toEqual({ perSecond: 1, by: 'tokens' });
    // and whole requests: a window's share of 1.83 requests admits one a second (WindowPacer.delay),
    // under one a window the average
    expect(reachablePerSecond({ rpm: 110, tpm: null }, null)).toEqual({ perSecond: 1, by: 'requests' });
    expect(reachablePerSecond({ rpm: 30, tpm: null }, null)).toEqual({ perSecond: 0.5, by: 'requests' });
    expect(reachablePerSecond(share1000, 400)).toEqual({ perSecond: 2, by: 'tokens' });
    expect(reachablePerSecond(share1000, 1500)!.perSecond).toBeCloseTo(2 / 3, 9);
    expect(reachablePerSecond(share1000, 50)).toEqual({ perSecond: 10, by: 'requests' });
    // a request's weight not known yet: only the request limit says anything
    expect(reachablePerSecond(share1000, null)).toEqual({ perSecond: 10, by: 'requests' });
    expect(reachablePerSecond({ rpm: null, tpm: 60_000 }, null)).toBeNull();
    expect(reachablePerSecond({ rpm: null, tpm: null }, 10)).toBeNull();
    // the estimate's time is the same pace: 30 requests of 560 tokens at 600 rpm, 60,000 tpm take 30 s, not 16.8
    expect(paceSeconds(30, 30 * 560, { rpm: 600, tpm: 60_000 })).toBe(30);
    expect(paceSeconds(30, 30 * 50, { rpm: 600, tpm: 60_000 })).toBe(3);
  });

  it('a lane is warm once its first requests have ended, and cools again after a 429 at a limit it knew', async () => {
    /** Requests a lane at 6000 rpm lets through in 10 s, each ending at once or never; optionally after a 429. */
    const sends = async (ending: boolean, limited = false) => {
      let now = T0;
      const lane = new Lane('m', { rpm: 6000, tpm: null }, new LocalLaneBoard(() => now), () => now);
      const rateLimit = {
        limitRequests: 6000,
        limitTokens: null,
        remainingRequests: 0,
        remainingTokens: null,
        resetRequestsMs: 10,
        resetTokensMs: null,
      };
      if (limited) {
        // a request sent paced at the cap, refused at the limit the provider says
        expect(typeof (await lane.tryTake(0))).not.toBe('number');
        lane.rateLimitedBy(new ProviderError({ message: '429', scope: 'retryable', reason: 'rate_limit', status: 429, rateLimit }), now);
      }
      let n = 0;
      while (now < T0 + 10_000) {
        const got = await lane.tryTake(0);
        if (typeof got === 'number') {
          now += got;
          continue;
        }
        n++;
        if (ending) lane.ended(got);
      }
      return n;
    };
    expect(await sends(false)).toBeLessThan(990); // the cold guard: 98%
    expect(await sends(true)).toBeGreaterThanOrEqual(990);
    expect(await sends(true, true)).toBeLessThan(990);
  });

  it("spreads a window's share over the window instead of one burst", () => {
    const sent = drive({ rpm: 6000, tpm: null }, 1000);
    const gaps = sent.slice(1).map((t, i) => t - sent[i]!);
    expect(Math.max(...gaps.slice(2))).toBeLessThanOrEqual(15);
    expect(sent.filter((t) => t < T0 + 100).length).toBeLessThanOrEqual(11);
  });

  it("tokens: requests of 60% of a second's share go one per window", () => {
    // 60,000 tpm = 1,000 tokens per second; each request 600 tokens
    const sent = drive({ rpm: null, tpm: 60_000 }, 30_000, 600);
    expect(worstWindow(sent, () => 600)).toBeLessThanOrEqual(1000);
    expect(sent.length).toBeGreaterThanOrEqual(27); // >= 90% of one per window
  });

  it("a request bigger than a window's share goes alone, at the average rate", () => {
    // 1,000 tokens/s; 2,500-token requests: one every 2.5 s
    const sent = drive({ rpm: null, tpm: 60_000 }, 20_000, 2500);
    const gaps = sent.slice(1).map((t, i) => t - sent[i]!);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(2500);
    expect(sent.length).toBeGreaterThanOrEqual(7);
  });

  it('a fractional per-second share (30 rpm) goes at the average rate', () => {
    const sent = drive({ rpm: 30, tpm: null }, 20_000);
    const gaps = sent.slice(1).map((t, i) => t - sent[i]!);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(2000);
  });

  it("settling a request's real tokens frees or takes room in its window", () => {
    const pacer = new WindowPacer({ rpm: null, tpm: 60_000 });
    const ticket = pacer.take(900, T0);
    const before = pacer.delay(300, T0 + 1);
    expect(before).toBeGreaterThan(0);
    pacer.settle(ticket, 500, T0 + 2);
    // 400 tokens fewer at 1,000 tokens/s: about 400 ms sooner
    expect(before - pacer.delay(300, T0 + 2)).toBeGreaterThanOrEqual(350);
    pacer.settle(ticket, 1500, T0 + 3);
    expect(pacer.delay(300, T0 + 3)).toBeGreaterThan(before);
  });

  it('a cold request is held as if sent when it ended', () => {
    const pacer = new WindowPacer({ rpm: 60, tpm: null }); // one a second
    const ticket = pacer.take(0, T0);
    expect(pacer.delay(0, T0 + 1000)).toBe(20);
    pacer.stretch(ticket, T0 + 300); // it reached the provider late, at the latest when it was answered
    expect(pacer.delay(0, T0 + 1000)).toBe(320);
  });

  it('a limit raised moves the places already taken to the new pace; a limit cut leaves them', () => {
    // 3 rpm: one request holds the lane for 20 s; then 1,200 rpm are known
    const raised = new WindowPacer({ rpm: 3, tpm: 3000 });
    raised.take(1000, T0);
    expect(raised.delay(1000, T0 + 500)).toBeGreaterThan(19_000);
    raised.setLimits({ rpm: 1200, tpm: 1_200_000 }, T0 + 500);
    expect(raised.delay(1000, T0 + 500)).toBe(0);
    // and the windows stay honest at the new pace: 20 a second at most
    const sent = [T0];
    for (let now = T0 + 500; now < T0 + 5500; ) {
      const wait = raised.delay(1000, now);
      if (wait > 0) now += wait;
      else {
        raised.take(1000, now);
        sent.push(now);
      }
    }
    expect(worstWindow(sent)).toBeLessThanOrEqual(20);
    expect(sent.length).toBeGreaterThan(90);
  });

  it('a limit cut and then raised again within a window gives back no more than the limit: never 11 in a second at 600 rpm', () => {
    for (const limits of [
      { low: { rpm: 30, tpm: null }, high: { rpm: 600, tpm: null }, tokens: 0, most: 10 },
      // tokens: 6,000 a minute is 100 a second, requests of 100; cut to 300 a minute (5 a second)
      { low: { rpm: null, tpm: 300 }, high: { rpm: null, tpm: 6000 }, tokens: 100, most: 1 },
    ]) {
      const pacer = new WindowPacer(limits.high);
      const sent: number[] = [];
      for (let now = T0; now < T0 + 3000; now++) {
        // the limit read from each answer's headers flips: cut at 300 ms, raised at 600 ms, cut at 900...
        const phase = Math.floor((now - T0) / 300) % 2;
        pacer.setLimits(phase === 1 ? limits.low : limits.high, now);
        if (pacer.delay(limits.tokens, now) > 0) continue;
        pacer.take(limits.tokens, now);
        sent.push(now);
      }
      expect(worstWindow(sent), JSON.stringify(limits.high)).toBeLessThanOrEqual(limits.most);
    }
  });

  it('no limits: never waits', () => {
    const pacer = new WindowPacer();
    for (let i = 0; i < 1000; i++) pacer.take(100, T0);
    expect(pacer.delay(100, T0)).toBe(0);
  });
});

const headers = (h: Record<string, string>) => ({ get: (n: string) => h[n.toLowerCase()] ?? null });

describe('limits learned from headers', () => {
  it("reads OpenAI's per-minute limits: reset is the time until the budget is full", () => {
    const rl = parseRateLimit(
      headers({
        'x-ratelimit-limit-requests': '600',
        'x-ratelimit-remaining-requests': '599',
        'x-ratelimit-reset-requests': '100ms',
        'x-ratelimit-limit-tokens': '200000',
        'x-ratelimit-remaining-tokens': '199000',
        'x-ratelimit-reset-tokens': '300ms',
      }),
    );
    expect(limitsFromHeaders(rl)).toEqual({ rpm: 600, tpm: 200_000 });
  });

  it('tells a per-second budget from a per-minute one by how fast it refills', () => {
    const rl = parseRateLimit(
      headers({ 'x-ratelimit-limit-requests': '10', 'x-ratelimit-remaining-requests': '9', 'x-ratelimit-reset-requests': '100ms' }),
    );
    expect(limitsFromHeaders(rl)).toEqual({ rpm: 600, tpm: null });
  });

  it('reads a budget a fraction of a request from full (599.95 said as 599, full in 5 ms) as its own period, not a faster one', () => {
    // 600 a minute refilling all the time: its remaining count leaves out the part of a request that is back
    for (const reset of ['1ms', '5ms', '8ms', '30ms', '99ms']) {
      const rl = parseRateLimit(
        headers({ 'x-ratelimit-limit-requests': '600', 'x-ratelimit-remaining-requests': '599', 'x-ratelimit-reset-requests': reset }),
      );
      expect(limitsFromHeaders(rl), reset).toEqual({ rpm: 600, tpm: null });
    }
  });

  it("reads a day's budget as a day's once its reset is longer than a fixed window of a shorter period could say", () => {
    // Groq's requests per day, 14,400: each used comes back in 6 s. A fixed window of a minute ending
    // within 6 s, or 2 min, says the same of its budget, and is read so until the reset rules it out
    const day = (remaining: number, reset: string) =>
      limitsFromHeaders(
        parseRateLimit(
          headers({
            'x-ratelimit-limit-requests': '14400',
            'x-ratelimit-remaining-requests': String(remaining),
            'x-ratelimit-reset-requests': reset,
          }),
        ),
      );
    expect(day(14_399, '5.99s')).toEqual({ rpm: 14_400, tpm: null });
    expect(day(14_380, '1m59.9s')).toEqual({ rpm: 240, tpm: null });
    expect(day(13_700, '1h10m')).toEqual({ rpm: 10, tpm: null });
  });

  it("reads a budget counted in fixed windows of a minute as a minute's, whatever little was used", () => {
    // a gateway's 1,200 a minute, 2 used, its window ending in 60 s: as OpenAI's refill that would be
    // 1,200 a day, and the run crawled at one request every 72 s
    for (const [remaining, reset] of [
      ['1198', '60s'],
      ['1199', '59.5s'],
      ['1150', '20s'],
    ] as const) {
      const rl = parseRateLimit(
        headers({ 'x-ratelimit-limit-requests': '1200', 'x-ratelimit-remaining-requests': remaining, 'x-ratelimit-reset-requests': reset }),
      );
      expect(limitsFromHeaders(rl), `${remaining} ${reset}`).toEqual({ rpm: 1200, tpm: null });
    }
  });

  it('does not take a reset rounded to whole seconds for a slow budget', () => {
    // 10,000 per minute with one used: a precise reset would be 6 ms; rounded up to `1s` it must
    // not read as 10,000 per 2.8 hours
    const rl = parseRateLimit(
      headers({ 'x-ratelimit-limit-requests': '10000', 'x-ratelimit-remaining-requests': '9999', 'x-ratelimit-reset-requests': '1s' }),
    );
    expect(limitsFromHeaders(rl)).toEqual({ rpm: 10_000, tpm: null });
  });

  it('assumes a minute when nothing has been used yet', () => {
    const rl = parseRateLimit(
      headers({ 'x-ratelimit-limit-requests': '500', 'x-ratelimit-remaining-requests': '500', 'x-ratelimit-reset-requests': '0s' }),
    );
    expect(limitsFromHeaders(rl)).toEqual({ rpm: 500, tpm: null });
  });

  it("reads Anthropic's headers (reset as a time)", () => {
    const now = T0;
    const rl = parseRateLimit(
      headers({
        'anthropic-ratelimit-requests-limit': '50',
        'anthropic-ratelimit-requests-remaining': '49',
        'anthropic-ratelimit-requests-reset': new Date(now + 1200).toISOString(),
        'anthropic-ratelimit-tokens-limit': '40000',
        'anthropic-ratelimit-tokens-remaining': '39000',
        'anthropic-ratelimit-tokens-reset': new Date(now + 1500).toISOString(),
      }),
      now,
    );
    expect(limitsFromHeaders(rl)).toEqual({ rpm: 50, tpm: 40_000 });
  });

  it('remaining 0 means one refill interval, not the full reset', () => {
    // 600 per minute, none left, full in 60 s: the next one is back in 100 ms
    expect(refillIntervalMs(600, 0, 60_000, 600)).toBe(100);
    expect(refillIntervalMs(600, 3, 60_000, 600)).toBeNull();
    // no tokens left of 600,000 a minute: a request of 2,000 tokens is back in 200 ms, not in 0.1 ms
    expect(refillIntervalMs(600_000, 0, 60_000, 600_000, 2000)).toBe(200);
    // and never more than the whole reset
    expect(refillIntervalMs(600_000, 0, 1000, 600_000, 1e9)).toBe(1000);
  });

  it('less left than a request weighs is as empty as none: the wait is for what is short', () => {
    // 1,000 tokens left of 600,000, full again in 59.9 s: 10 tokens come back a ms, so the 4,000
    // short of a 5,000-token request are back in 400 ms (the provider would refuse it now)
    expect(refillIntervalMs(600_000, 1000, 59_900, 600_000, 5000)).toBe(400);
    expect(refillIntervalMs(600_000, 5000, 59_900, 600_000, 5000)).toBeNull();
    // without a reset, from the limit a minute
    expect(refillIntervalMs(600_000, 1000, null, null, 5000)).toBe(400);
  });
});

describe('429s saying no limit from a provider whose answers say theirs', () => {
  const said = {
    limitRequests: 600,
    limitTokens: null,
    remainingRequests: 500,
    remainingTokens: null,
    resetRequestsMs: 10_000,
    resetTokensMs: null,
  };
  const unsaid = (retryAfterMs: number | null = null) =>
    new ProviderError({ message: '429', scope: 'retryable', reason: 'rate_limit', status: 429, retryAfterMs });
  const speaking = (now: number) => new Lane('m', { rpm: null, tpm: null }, new LocalLaneBoard(() => now), () => now);

  it('now and then (3 in 100 answers) are noise: no pace cut, no lane paused, only their own request waits', () => {
    const now = T0;
    const lane = speaking(now);
    for (let i = 1; i <= 1000; i++) {
      if (i % 33 === 0) {
        expect(lane.rateLimitedBy(unsaid(2000), now)).toEqual({ waitMs: 2000, lanePaused: false });
      } else lane.answered(said, 100, 10);
    }
    expect(lane.snapshot()).toMatchObject({ rpm: 600, learned: { source: 'headers' }, pausedUntil: null, rateLimited: 30 });
    // no retry-after: the request waits one refill interval of the pace
    expect(lane.rateLimitedBy(unsaid(), now)).toEqual({ waitMs: 100, lanePaused: false });
  });

  it("many of them are a limit nobody said (a proxy's): they cut the pace and pause the lane, and status says it was learned from 429s", () => {
    const now = T0;
    const lane = speaking(now);
    for (let i = 0; i < 100; i++) lane.answered(said, 100, 10);
    expect(lane.snapshot()).toMatchObject({ rpm: 600, learned: { source: 'headers' } });
    const tries = Array.from({ length: 6 }, () => lane.rateLimitedBy(unsaid(), now));
    // the first five are up to a tenth of the last fifty: the sixth is past it
    expect(tries.map((t) => t.lanePaused)).toEqual([false, false, false, false, false, true]);
    const cut = lane.snapshot();
    expect(cut.rpm).toBeLessThan(600);
    expect(cut.pausedUntil).toBeGreaterThan(now);
    expect(cut.learned?.source).toBe('429s');
    expect(lane.toRemember()?.source).toBe('429s');
    // the share alone decides, not that a cut came: once they are rare again, one more is noise (a
    // chance cluster of strays must not leave every later one cutting)
    for (let i = 0; i < 200; i++) lane.answered(said, 100, 10);
    expect(lane.rateLimitedBy(unsaid(), now + 1).lanePaused).toBe(false);
    expect(lane.snapshot().rpm).toBe(cut.rpm);
  });

  it('one asking for a long wait is no passing refusal: the lane pauses for it', () => {
    const now = T0;
    const lane = speaking(now);
    for (let i = 0; i < 100; i++) lane.answered(said, 100, 10);
    expect(lane.rateLimitedBy(unsaid(5000), now)).toEqual({ waitMs: 5000, lanePaused: false });
    expect(lane.rateLimitedBy(unsaid(60_000), now)).toEqual({ waitMs: 60_000, lanePaused: true });
    expect(lane.pauseLeft()).toBe(60_000);
    // and teaches no pace: the limit the answers say stands, for this run and the next
    expect(lane.rateLimitedBy(unsaid(3_600_000), now)).toEqual({ waitMs: 3_600_000, lanePaused: true });
    expect(lane.snapshot()).toMatchObject({ rpm: 600, learned: { source: 'headers', rpm: 600 } });
    expect(lane.toRemember()).toMatchObject({ source: 'headers', rpm: 600 });
  });

  it('limits another run or an earlier one learned are not this provider speaking now: the first one cuts', () => {
    const now = T0;
    const lane = speaking(now);
    lane.restore({ rpm: 600, tpm: null, source: 'headers', at: now - 1000 });
    for (let i = 0; i < 100; i++) lane.answered(null, 100, 10);
    expect(lane.snapshot().rpm).toBe(600);
    expect(lane.rateLimitedBy(unsaid(), now).lanePaused).toBe(true);
    expect(lane.snapshot().rpm).toBeLessThan(600);
  });

  it('from a provider that says no limits at all, the first one cuts the pace', () => {
    const now = T0;
    const lane = new Lane('m', { rpm: 600, tpm: null }, new LocalLaneBoard(() => now), () => now);
    for (let i = 0; i < 100; i++) lane.answered(null, 100, 10);
    expect(lane.rateLimitedBy(unsaid(), now).lanePaused).toBe(true);
    expect(lane.snapshot().rpm).toBeLessThan(600);
  });
});

/** An answer's headers saying 1,200 requests a minute, one of them used. */
const SAYS_1200_RPM = {
  limitRequests: 1200,
  limitTokens: null,
  remainingRequests: 1199,
  resetRequestsMs: 50,
  remainingTokens: null,
  resetTokensMs: null,
};

/** Lanes at `caps` on a clock the test moves, with the times at which each save wrote a lane's limits. */
function lanesSavingTimes(caps: PaceLimits) {
  const clock = { now: T0 };
  const saved: number[] = [];
  const memory = { saveLaneLimits: async (row: LaneLimitRow) => void saved.push(row.at) };
  const lanes = new Lanes(
    'http://127.0.0.1:1/v1',
    caps,
    localBoards(() => clock.now),
    () => clock.now,
  );
  return { clock, saved, memory, lanes };
}

describe('a pace an earlier run remembered', () => {
  const lane = (caps: PaceLimits) => new Lane('m', caps, new LocalLaneBoard(() => T0), () => T0);
  const MINUTE = 60_000;

  it('learned from 429s is kept for a run soon after, and forgotten by one later (they may have been no limit)', () => {
    const soon = lane({ rpm: 3000, tpm: null });
    soon.restore({ rpm: 600, tpm: null, source: '429s', at: T0 - 14 * MINUTE });
    expect(soon.limits().rpm).toBeCloseTo(600);
    const later = lane({ rpm: 3000, tpm: null });
    later.restore({ rpm: 600, tpm: null, source: '429s', at: T0 - 16 * MINUTE });
    expect(later.limits().rpm).toBe(3000);
    // with no cap the pace learned is the limit itself: forgotten too, so nothing is known
    const uncapped = lane({ rpm: null, tpm: null });
    uncapped.restore({ rpm: 600, tpm: null, source: '429s', at: T0 - 16 * MINUTE });
    expect(uncapped.limits().rpm).toBeNull();
  });

  it('learned from 429s is written again while 429s keep meeting it, so a run restarted after a long one finds it', async () => {
    const clock = { now: T0 };
    const saved: Array<{ rpm: number | null; at: number }> = [];
    const memory = { saveLaneLimits: async (row: LaneLimitRow) => void saved.push({ rpm: row.rpm, at: row.at }) };
    const lanes = new Lanes(
      'http://127.0.0.1:1/v1',
      { rpm: 3000, tpm: null },
      localBoards(() => clock.now),
      () => clock.now,
    );
    const tooMany = new ProviderError({ message: '429', scope: 'retryable', reason: 'rate_limit', status: 429 });
    lanes.get('m').rateLimitedBy(tooMany, clock.now);
    await lanes.save(memory);
    expect(saved).toEqual([{ rpm: 2220, at: T0 }]); // 37.5 a second: the pacer sends 37 a window
    // climbed back and settled under the rate the 429 came at (2,700): written once
    clock.now += 3 * MINUTE;
    await lanes.save(memory);
    expect(saved.at(-1)).toEqual({ rpm: 2700, at: clock.now });
    const settled = saved.length;
    clock.now += MINUTE; // unchanged since: not written
    await lanes.save(memory);
    expect(saved).toHaveLength(settled);
    // a tenth of the time it is kept after it was written, with 429s in this run: written again, the time new
    clock.now += LEARNED_FROM_429S_KEPT_MS / 10 - MINUTE;
    await lanes.save(memory);
    expect(saved).toHaveLength(settled + 1);
    expect(saved.at(-1)).toEqual({ rpm: 2700, at: clock.now });
  });

  it("learned from 429s and only started from, with no 429 in this run, is not written again: its age stays the 429s'", async () => {
    const { clock, saved, memory, lanes } = lanesSavingTimes({ rpm: 3000, tpm: null });
    await lanes.load({
      laneLimits: async () => [{ baseUrl: 'http://127.0.0.1:1/v1', model: 'm', rpm: 2850, tpm: null, source: '429s', at: T0 - MINUTE }],
    });
    lanes.get('m').limits();
    clock.now += 10_000; // back at its cap: the pace it remembers now is the cap's, once written
    await lanes.save(memory);
    const written = saved.length;
    clock.now += LEARNED_FROM_429S_KEPT_MS / 5; // long past a refresh's time, and not one 429
    await lanes.save(memory);
    expect(saved).toHaveLength(written);
  });

  it('said by the provider again and again is written again once a minute, so status says how recent it is', async () => {
    const { clock, saved, memory, lanes } = lanesSavingTimes({ rpm: null, tpm: null });
    // remembered from a run 15 minutes ago, and not said in this one yet: not written
    await lanes.load({
      laneLimits: async () => [
        { baseUrl: 'http://127.0.0.1:1/v1', model: 'm', rpm: 1200, tpm: null, source: 'headers', at: T0 - 15 * MINUTE },
      ],
    });
    const lane = lanes.get('m');
    await lanes.save(memory);
    expect(saved).toEqual([]);
    const said = SAYS_1200_RPM;
    for (let s = 0; s < 150; s += 10) {
      lane.answered(said, 100, 10);
      await lanes.save(memory);
      clock.now += 10_000;
    }
    // said at once (15 minutes after the remembered time), then each minute
    expect(saved).toEqual([T0, T0 + 70_000, T0 + 140_000]);
  });

  it('said by the provider as lower than it says now: the next request goes at the new pace, not after the old spacing', async () => {
    const clock = { now: T0 };
    const remembered = new Lane('m', { rpm: null, tpm: null }, new LocalLaneBoard(() => clock.now), () => clock.now);
    remembered.restore({ rpm: 3, tpm: null, source: 'headers', at: T0 - MINUTE });
    expect(typeof (await remembered.tryTake(0))).not.toBe('number');
    clock.now += 400;
    // the answer says 1,200 a minute (the key's tier raised since): before, the next waited 20 s
    remembered.answered(SAYS_1200_RPM, 400, 10);
    expect(remembered.limits().rpm).toBe(1200);
    expect(await remembered.tryTake(0)).not.toBeTypeOf('number');
  });

  it('said by the provider (headers) is kept however old', () => {
    const l = lane({ rpm: 3000, tpm: null });
    l.restore({ rpm: 500, tpm: 200_000, source: 'headers', at: T0 - 24 * 60 * MINUTE });
    expect(l.limits()).toEqual({ rpm: 500, tpm: 200_000 });
  });
});

describe('a pace learned from 429s with no limit said or set', () => {
  /**
   * Sends for `ms`, asking the lane every `everyMs` of the clock (10: at most 100 a second), each
   * answered at once (headers saying nothing) unless `answering` is false; returns how many went.
   */
  async function sendFor(lane: Lane, clock: { now: number }, ms: number, everyMs = 0.5, answering = true): Promise<number> {
    let sent = 0;
    for (const end = clock.now + ms; clock.now < end; clock.now += everyMs) {
      const got = await lane.tryTake(0);
      if (typeof got !== 'number') {
        sent++;
        lane.ended(got);
        if (answering) lane.answered(null, null, 0);
      }
    }
    return sent;
  }
  const tooMany = () => new ProviderError({ message: '429', scope: 'retryable', reason: 'rate_limit', status: 429 });

  it('a pace 429s taught a lane that has answered nothing is not remembered nor said: all it sent was refused, at any rate', async () => {
    const clock = { now: T0 };
    const lane = new Lane('m', { rpm: null, tpm: null }, new LocalLaneBoard(() => clock.now), () => clock.now);
    await sendFor(lane, clock, 5000, 10, false);
    lane.rateLimitedBy(tooMany(), clock.now);
    // it slows this run's tries all the same
    expect(lane.limits().rpm).toBeLessThan(6000);
    // nothing for status, estimate or the next run to start from, nor a source for the progress to say
    expect(lane.toRemember()).toBeNull();
    expect(lane.snapshot().learned).toBeNull();
    // once answers come, the pace the 429s keep is one
    clock.now += 2000;
    await sendFor(lane, clock, 1000, 10);
    expect(lane.toRemember()?.source).toBe('429s');
  });

  it('climbs past the rate the 429 came at once it stays quiet: one passing 429 is not a limit', async () => {
    const clock = { now: T0 };
    const lane = new Lane('m', { rpm: null, tpm: null }, new LocalLaneBoard(() => clock.now), () => clock.now);
    await sendFor(lane, clock, 5000, 10); // 100 a second, when a 429 comes
    lane.rateLimitedBy(tooMany(), clock.now);
    const learned = lane.limits().rpm!;
    expect(learned).toBeLessThan(6000);
    expect(lane.snapshot().learned?.source).toBe('429s');
    clock.now += 2000; // the pause
    // back up to the rate the 429 came at: slowly near it, as under a cap
    await sendFor(lane, clock, 30_000);
    const first = await sendFor(lane, clock, 10_000);
    await sendFor(lane, clock, 20_000);
    const later = await sendFor(lane, clock, 10_000);
    expect(later).toBeGreaterThan(first * 1.5);
    expect(lane.limits().rpm!).toBeGreaterThan(learned * 1.5);
    // the next run starts from what this one reached, under the last 429 (none since): above the first guess
    expect(lane.toRemember()!.rpm!).toBeGreaterThan(learned * 1.5);
    // and a 429 still cuts it
    const before = lane.limits().rpm!;
    lane.rateLimitedBy(tooMany(), clock.now);
    expect(lane.limits().rpm!).toBeLessThan(before);
  });

  it('once a limit is said in headers, a pace searched above the 429s is brought back under it', async () => {
    const clock = { now: T0 };
    const lane = new Lane('m', { rpm: null, tpm: null }, new LocalLaneBoard(() => clock.now), () => clock.now);
    await sendFor(lane, clock, 5000, 10);
    lane.rateLimitedBy(tooMany(), clock.now);
    clock.now += 2000;
    await sendFor(lane, clock, 60_000);
    const searched = lane.limits().rpm!;
    const said = {
      limitRequests: Math.round(searched / 2),
      limitTokens: null,
      remainingRequests: Math.round(searched / 2), // nothing used yet: a per-minute budget
      remainingTokens: null,
      resetRequestsMs: 0,
      resetTokensMs: null,
    };
    lane.answered(said, 100, 10);
    expect(lane.board.learned()).toMatchObject({ source: 'headers', rpm: said.limitRequests });
    clock.now += 1000;
    expect(lane.limits().rpm!).toBeLessThanOrEqual(said.limitRequests);
  });

  it('does not climb while the lane sends nothing: it looks for the limit only by sending', async () => {
    const clock = { now: T0 };
    const lane = new Lane('m', { rpm: null, tpm: null }, new LocalLaneBoard(() => clock.now), () => clock.now);
    await sendFor(lane, clock, 5000, 10);
    lane.rateLimitedBy(tooMany(), clock.now);
    const learned = lane.limits().rpm!;
    clock.now += 600_000;
    expect(lane.limits().rpm!).toBeLessThanOrEqual(learned * 2.01);
  });

  it('stays under a cap the user set', async () => {
    const clock = { now: T0 };
    const lane = new Lane('m', { rpm: 6000, tpm: null }, new LocalLaneBoard(() => clock.now), () => clock.now);
    await sendFor(lane, clock, 5000, 10);
    lane.rateLimitedBy(tooMany(), clock.now);
    clock.now += 2000;
    await sendFor(lane, clock, 120_000, 5);
    expect(lane.limits().rpm!).toBeLessThanOrEqual(6000);
  });
});

describe('RateBackoff: 429s without headers teach the pace', () => {
  it('cuts once per burst and climbs back in quiet time, slowly near the rate that failed', () => {
    const b = new RateBackoff(T0);
    expect(b.rateLimited(T0, T0 + 10)).toBe(true);
    expect(b.factor).toBeCloseTo(0.75);
    // requests that left before the cut say nothing new
    expect(b.rateLimited(T0 + 5, T0 + 20)).toBe(false);
    expect(b.factor).toBeCloseTo(0.75);
    b.tick(T0 + 10 + 10_000);
    expect(b.factor).toBeGreaterThan(0.75);
    expect(b.factor).toBeLessThan(1);
    b.tick(T0 + 10 + 120_000);
    expect(b.factor).toBe(1);
  });

  it('restored near its cap, climbs back to the cap and never past it', () => {
    const b = new RateBackoff(T0);
    b.restore(0.95); // a pace remembered at 95% of --rpm: its ceiling is above the cap (first tick 10 s on)
    for (const t of [10, 11, 20, 60]) {
      b.tick(T0 + t * 1000);
      expect(b.factor).toBeLessThanOrEqual(1);
    }
    expect(b.factor).toBe(1);
  });

  it('remembers under the rate of the last 429 until the pace has clearly passed it with none since', () => {
    const b = new RateBackoff(T0);
    b.rateLimited(T0, T0); // at factor 1: the ceiling
    for (let t = 1; t <= 40; t++) b.tick(T0 + t * 1000, { most: 1.05 }); // back up to it
    b.tick(T0 + 41_000, { most: 1.05 }); // and a hair past it
    expect(b.factor).toBeGreaterThan(1);
    expect(b.safeFactor).toBeCloseTo(0.9);
    b.tick(T0 + 400_000, { most: 2 }); // a quarter and more past it, no 429 since: it was no limit
    expect(b.safeFactor).toBe(b.factor);
  });

  it('a run told twice the real limit settles near it: the average factor stays near 0.5', () => {
    // Simulate: the real limit is half the cap; a 429 whenever the factor is above 0.5.
    const b = new RateBackoff(T0);
    let cuts = 0,
      sum = 0;
    for (let t = T0; t < T0 + 60_000; t += 100) {
      b.tick(t);
      if (b.factor <= 0.5) b.answered();
      else if (b.rateLimited(t, t)) cuts++;
      sum += Math.min(b.factor, 0.5);
    }
    expect(cuts).toBeLessThanOrEqual(10);
    expect(sum / 600 / 0.5).toBeGreaterThanOrEqual(0.85);
  });
});

describe('LatencyStats: --timeout auto', () => {
  it('uses the cap until enough answers are seen, then several times the p99 with a floor', () => {
    const s = new LatencyStats();
    expect(s.timeoutMs(0, 600_000)).toBe(600_000);
    for (let i = 0; i < 30; i++) s.record(50, 20);
    expect(s.timeoutMs(0, 600_000)).toBe(LatencyStats.FLOOR_MS); // 6 x 50 ms is under the floor
    for (let i = 0; i < 30; i++) s.record(2000, 20);
    expect(s.timeoutMs(0, 600_000)).toBe(12_000);
    expect(s.timeoutMs(0, 5000)).toBe(5000);
  });

  it('stretches for a request allowed many more tokens than the answers seen', () => {
    const s = new LatencyStats();
    for (let i = 0; i < 30; i++) s.record(1000, 100);
    expect(s.timeoutMs(0, 600_000)).toBe(6000);
    expect(s.timeoutMs(400, 600_000)).toBe(24_000);
    expect(s.timeoutMs(100_000, 600_000)).toBe(60_000); // at most 10x
  });

  it('leaves out the answers to every request a lane sent before its first answer came (a cold burst)', () => {
    let now = T0;
    const lane = new Lane('m', { rpm: null, tpm: null }, new LocalLaneBoard(() => now), () => now);
    const ticket = { tokens: 0, until: 0, request: null };
    // -c 16: sixteen requests leave at once on new connections and come back slow
    now += 300;
    for (let i = 0; i < 16; i++) {
      lane.answered(null, 300, 12);
      lane.ended(ticket);
    }
    for (let i = 0; i < 30; i++) {
      now += 50;
      lane.answered(null, 50, 12);
      lane.ended(ticket);
    }
    expect(lane.latency.timeoutMs(0, 600_000)).toBe(LatencyStats.FLOOR_MS);
  });

  it('gives a large max_tokens no extra time when latency does not grow with tokens', () => {
    const s = new LatencyStats();
    // answers of 8 to 16 tokens, all about 50 ms: the time is not spent generating
    for (let i = 0; i < 200; i++) s.record(50 + ((i * 7) % 5), 8 + (i % 9));
    expect(s.timeoutMs(0, 600_000)).toBe(LatencyStats.FLOOR_MS);
    // a proportional stretch would allow 64 / 16 = 4 x the floor
    expect(s.timeoutMs(64, 600_000)).toBeLessThan(LatencyStats.FLOOR_MS * 1.2);
  });

  it('never cuts an answer when latency grows with tokens, up to MAX_STRETCH times the tokens seen', () => {
    const cases = [
      { base: 0, perToken: 20 }, // all generation
      { base: 300, perToken: 15 }, // time to first token, then generation
      { base: 2000, perToken: 5 }, // mostly queueing
    ];
    for (const { base, perToken } of cases) {
      const s = new LatencyStats();
      const latency = (tokens: number, i: number) => base + perToken * tokens * (0.9 + (0.2 * ((i * 37) % 11)) / 10);
      for (let i = 0; i < 256; i++) s.record(latency(5 + (i % 40), i), 5 + (i % 40));
      for (const maxTokens of [50, 100, 200, 44 * LatencyStats.MAX_STRETCH]) {
        // the slowest answer that long, with the same jitter as the answers seen
        expect(s.timeoutMs(maxTokens, 3_600_000)).toBeGreaterThan(base + perToken * maxTokens * 1.1 * 2);
      }
    }
  });

  it('firstOversize: a request bigger than the lower of --tpm and the limit learned from headers is said once', () => {
    const now = 0;
    const board = new LocalLaneBoard(() => now);
    const lane = new Lane('m', { rpm: null, tpm: 10_000 }, board, () => now);
    expect(lane.firstOversize(900)).toBeNull();
    // the provider said less than the cap: its limit is the one a request is measured against
    board.learn({ rpm: null, tpm: 800, source: 'headers', at: now });
    expect(lane.firstOversize(900)).toBe(800);
    expect(lane.firstOversize(5000)).toBeNull(); // said once
    const uncapped = new Lane('m', { rpm: null, tpm: null }, new LocalLaneBoard(() => now), () => now);
    expect(uncapped.firstOversize(1e9)).toBeNull(); // no limit known: nothing is too big
  });
});

describe('a wall clock set back under a lane', () => {
  const HOUR = 3_600_000;

  it('moves the pace back with it: an hour back does not hold the lane an hour', () => {
    const pacer = new WindowPacer({ rpm: 600, tpm: null });
    const t0 = 1_000_000_000_000;
    for (let i = 0; i < 10; i++) pacer.take(0, t0);
    // ten in this window: the next waits for the window, not more
    const full = pacer.delay(0, t0 + 10);
    expect(full).toBeGreaterThan(0);
    expect(full).toBeLessThanOrEqual(1020);
    expect(pacer.delay(0, t0 + 10 - HOUR)).toBeLessThanOrEqual(1020);
    // and it goes on from there at the same pace
    expect(pacer.delay(0, t0 + 1100 - HOUR)).toBe(0);
  });

  it('moves a pause back with it', async () => {
    let now = 1_000_000_000_000;
    const board = new LocalLaneBoard(() => now);
    board.pause(now + 1000);
    now -= HOUR;
    const wait = board.tryTake(0, { rpm: 600, tpm: null });
    expect(typeof wait === 'number' && wait > 0 && wait <= 1000).toBe(true);
    expect(board.pausedUntil() - now).toBeLessThanOrEqual(1000);
    now += 1000;
    expect(typeof board.tryTake(0, { rpm: 600, tpm: null })).not.toBe('number');
  });
});

describe('a 429 whose retry-after is 0 (or a date already past here)', () => {
  it('pauses the lane one refill interval, as without one', () => {
    const now = 1_000_000_000_000;
    const lane = new Lane('m', { rpm: 600, tpm: null }, new LocalLaneBoard(() => now), () => now);
    const { waitMs: pause, lanePaused } = lane.rateLimitedBy(
      new ProviderError({ message: '429', scope: 'retryable', reason: 'rate_limit', status: 429, retryAfterMs: 0 }),
      now,
    );
    expect(lanePaused).toBe(true);
    // one interval of the pace the 429 has cut (600 rpm: 100 ms, a little more once cut)
    expect(pause).toBeGreaterThanOrEqual(100);
    expect(pause).toBeLessThan(200);
    expect(lane.pauseLeft()).toBe(pause);
  });
});

describe('SendSeconds: what the provider took within a second', () => {
  it('says a request left in a second no fuller than a recent one answered whole', () => {
    const s = new SendSeconds();
    for (let i = 0; i < 5; i++) s.sent(T0 + i * 100);
    for (let i = 0; i < 5; i++) s.answered(T0 + i * 100);
    // the next second: four sent, one refused
    for (let i = 0; i < 4; i++) s.sent(T0 + 1000 + i * 100);
    s.refused(T0 + 1000);
    expect(s.withinTaken(T0 + 1000)).toBe(true);
    // a third second of six: more than any second taken whole
    for (let i = 0; i < 6; i++) s.sent(T0 + 2000 + i * 100);
    expect(s.withinTaken(T0 + 2000)).toBe(false);
    // the send rate reads the same seconds
    expect(s.sentIn(Math.floor(T0 / 1000), Math.floor(T0 / 1000) + 2)).toBe(15);
    // forgotten after 10 s
    s.sent(T0 + 31_500);
    s.sent(T0 + 31_600);
    expect(s.withinTaken(T0 + 31_500)).toBe(false);
  });

  it('forgets the seconds "ahead" of a clock set back, which would vouch for every later 429', () => {
    const s = new SendSeconds();
    for (let i = 0; i < 5; i++) s.sent(T0 + i * 100);
    for (let i = 0; i < 5; i++) s.answered(T0 + i * 100);
    const back = T0 - 3_600_000; // the wall clock set back an hour
    s.sent(back);
    expect(s.sentIn(Math.floor(T0 / 1000), Math.floor(T0 / 1000))).toBe(0);
    s.sent(back + 1000);
    expect(s.withinTaken(back + 1000)).toBe(false);
  });
});
