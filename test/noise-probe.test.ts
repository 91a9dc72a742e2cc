import { describe, expect, it } from 'vitest';
import { NoiseProbe } from '../src/scheduler/pace/noise-probe.js';

const T0 = 1_750_000_000_000;

function answers(probe: NoiseProbe, n: number, now = T0): void {
  for (let i = 0; i < n; i++) probe.ended({ sentAt: now, refused: false, now });
}

/** A probe armed (a stretch of answers between two cuts), then started by two cuts of requests sent clearly under the cut before. */
function started(): { probe: NoiseProbe; hold: number | null; now: number } {
  const probe = new NoiseProbe(0.3);
  probe.cut({ factor: 1, under: false, sends: 0, share: 0.1, now: T0 });
  answers(probe, NoiseProbe.QUIET_ANSWERS);
  probe.cut({ factor: 0.8, under: false, sends: 100, share: 0.1, now: T0 + 30_000 });
  answers(probe, 5);
  expect(probe.cut({ factor: 0.7, under: true, sends: 200, share: 0.1, now: T0 + 60_000 })).toBeNull();
  answers(probe, 5);
  const now = T0 + 90_000;
  const hold = probe.cut({ factor: 0.5, under: true, sends: 300, share: 0.1, now });
  return { probe, hold, now };
}

/** Ends of the probe's requests, every `every`-th refused, until its verdict. */
function until(probe: NoiseProbe, now: number, every: number) {
  for (let n = 1; ; n++) {
    const verdict = probe.ended({ sentAt: now + n, refused: n % every === 0, now: now + 100 + n });
    if (verdict) return { verdict, n };
  }
}

describe('NoiseProbe: random 429s told from a limit by holding the pace lower', () => {
  it('starts on two cuts of requests sent clearly under the cut before, holding 0.6 of the pace sent at', () => {
    const { hold } = started();
    expect(hold).toBeCloseTo(0.3, 10);
  });

  it('or on three cuts close together (within 60 requests and 15 s)', () => {
    const probe = new NoiseProbe(0.3);
    probe.cut({ factor: 1, under: false, sends: 0, share: 0.1, now: T0 });
    answers(probe, NoiseProbe.QUIET_ANSWERS);
    expect(probe.cut({ factor: 1, under: false, sends: 20, share: 0.1, now: T0 + 4000 })).toBeNull();
    expect(probe.cut({ factor: 1, under: false, sends: 40, share: 0.1, now: T0 + 8000 })).toBeNull();
    expect(probe.cut({ factor: 1, under: false, sends: 60, share: 0.1, now: T0 + 12_000 })).toBe(0.6);
  });

  it("not on a limit's cuts a climb apart, even at 60 a minute where three fall within 60 requests", () => {
    const probe = new NoiseProbe(0.3);
    for (let i = 0; i < 8; i++) {
      answers(probe, 25);
      expect(probe.cut({ factor: 1, under: false, sends: i * 28, share: 0.05, now: T0 + i * 28_000 })).toBeNull();
    }
  });

  it('not on the way down from a first burst (a cut each round trip, however many answers between), nor past the share that can be noise', () => {
    const probe = new NoiseProbe(0.3);
    for (let i = 0; i < 8; i++) {
      answers(probe, i % 2 ? 5 : 30);
      expect(probe.cut({ factor: 0.75 ** i, under: true, sends: i * 10, share: 0.2, now: T0 + i * 1000 })).toBeNull();
    }
    answers(probe, NoiseProbe.QUIET_ANSWERS);
    probe.cut({ factor: 0.1, under: true, sends: 100, share: 0.2, now: T0 + 12_000 });
    expect(probe.cut({ factor: 0.1, under: true, sends: 110, share: 0.4, now: T0 + 11_000 })).toBeNull();
  });

  it('finds a limit when the requests sent while it holds are taken: the pace climbs from there, and no probe for two minutes', () => {
    const { probe, now } = started();
    const { verdict, n } = until(probe, now, 50);
    expect(verdict).toEqual({ noise: false });
    expect(n).toBe(NoiseProbe.PROBE_ENDS);
    expect(probe.probing).toBe(false);
    expect(probe.level).toBeNull();
    expect([0, 1, 2].map((i) => probe.cut({ factor: 0.5, under: true, sends: 400 + i, share: 0.1, now: now + 60_000 + i }))).toEqual([
      null,
      null,
      null,
    ]);
  });

  it('finds noise when refusals come on: its share (counted without the one it stopped at), and the pace to resume', () => {
    const { probe, now } = started();
    const { verdict, n } = until(probe, now, 10);
    expect(n).toBe(40);
    // the factor before the first of the last four cuts since armed (the one before counted for nothing)
    expect(verdict).toEqual({ noise: true, resume: 0.8 });
    expect(probe.level).toBeCloseTo(3 / 39, 10);
  });

  it('counts only requests sent while it holds; a refusal of everything (a quota spent) among them ends it in a limit', () => {
    const { probe, now } = started();
    for (let i = 0; i < 10; i++) expect(probe.ended({ sentAt: now - 1, refused: true, everything: true, now: now + i })).toBeNull();
    expect(probe.ended({ sentAt: now + 1, refused: true, everything: true, now: now + 20 })).toEqual({ noise: false });
  });

  it('lets through as many 429s as the noise found brings, and no more: a limit on top of it cuts', () => {
    const { probe, now } = started();
    until(probe, now, 10);
    // a full credit after the verdict, then 2 x 7.7% + 3% of a 429 an answer (about 1 in 5.4)
    expect(Array.from({ length: 8 }, () => probe.absorb(false))).toEqual([true, true, true, true, true, true, false, false]);
    answers(probe, 5);
    expect(probe.absorb(false)).toBe(false);
    answers(probe, 1);
    expect(probe.absorb(false)).toBe(true);
    expect(probe.absorb(false)).toBe(false);
    answers(probe, 6);
    // one of a refusal of everything is never noise
    expect(probe.absorb(true)).toBe(false);
  });

  it('lets nothing through before a probe found noise, or after a later one found a limit', () => {
    expect(new NoiseProbe(0.3).absorb(false)).toBe(false);
    const { probe, now } = started();
    until(probe, now, 10);
    answers(probe, 200, now + 30_000);
    probe.cut({ factor: 0.5, under: true, sends: 500, share: 0.1, now: now + 30_000 });
    const next = probe.cut({ factor: 0.5, under: true, sends: 510, share: 0.1, now: now + 31_000 });
    expect(next).toBeCloseTo(0.3, 10);
    expect(until(probe, now + 31_000, 1000).verdict).toEqual({ noise: false });
    expect(probe.absorb(false)).toBe(false);
  });
});
