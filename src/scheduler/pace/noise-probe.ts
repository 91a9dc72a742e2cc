/**
 * Tells a provider's random refusals from its limit, for a provider that says no limit: both come
 * as 429s saying nothing, and both cut the pace (`RateBackoff`). A limit's 429s stop once the pace is
 * under it; random ones (an overloaded upstream, a gateway's shared capacity) come at the same share
 * of the requests at any pace. Cut after cut, they took a lane to what one 429 in about 25 s allows:
 * 50 a minute whatever the limit (5 in 100 refused, under a limit of 1,200 a minute).
 *
 * A limit's 429 cuts the pace under the limit, and its next comes once the pace has climbed back
 * to it, tens of seconds later. So when 429s come for requests sent while the pace was still clearly
 * under the rate of the cut before (UNDER_CUTS of the last CUTS cuts), or cuts come close together
 * (CLOSE_CUTS within CLOSE_SENDS requests and CLOSE_MS), the lane holds HOLD of the pace it sent at
 * (the probe) and counts what the provider refuses of the requests sent while it holds. A limit's
 * 429s are at most `mostShare` of the lane's recent requests when a probe starts, so the lane sent
 * at most 1/(1 - mostShare) of the limit, and HOLD of that is under it: none or next to none are
 * refused. Random refusals come as before: the share they come at is the provider's noise (`level`),
 * and as many 429s as that share brings cut no pace from then on (`absorb`).
 */
export class NoiseProbe {
  static readonly CUTS = 4;
  static readonly UNDER_CUTS = 2;
  /**
   * A limit's cuts come a climb apart, about 25 s: within 15 s, three are noise's, or a limit's on
   * the way down. In requests as well: at 60 a minute, a limit's three cuts a climb apart were within 60.
   */
  static readonly CLOSE_CUTS = 3;
  static readonly CLOSE_SENDS = 60;
  static readonly CLOSE_MS = 15_000;
  /**
   * Cuts count towards a probe once two came QUIET_MS apart with QUIET_ANSWERS answers between: on
   * the way down from a first burst a limit's 429s cut every round trip, and a probe there cost a
   * run under a limit of 120 a minute a quarter of its first two minutes, and one of 300 jobs under
   * 600 a minute a fifth of its rate (governor bench (3): 81% of the limit, against 97%).
   */
  static readonly QUIET_ANSWERS = 15;
  static readonly QUIET_MS = 2000;
  /** The pace held, as a share of the pace the lane sent at when the last 429 cut it. */
  static readonly HOLD = 0.6;
  /** A probe is over once this many of its requests ended, or PROBE_MOST_MS passed. */
  static readonly PROBE_ENDS = 80;
  static readonly PROBE_MOST_MS = 60_000;
  /** Or once this many of them were refused: the share is told well enough (4 in 80 is 5%, give or take 2.5). */
  static readonly ENOUGH_REFUSED = 4;
  /** Fewer of its requests refused than this, and the probe found a limit. */
  static readonly LEAST_REFUSED = 2;
  /** After a probe found a limit, none for this long: the cuts were a limit's. */
  static readonly LIMIT_COOL_MS = 60_000;
  /** After a probe found noise, none for this long: 429s cutting the pace again soon say it was told too low. */
  static readonly NOISE_COOL_MS = 20_000;
  /**
   * How many times the noise found a lane lets through (`absorb`), and how many 429s at once at
   * most. The more let through, the more a limit's own 429s pass with the noise (at 3 times a noise
   * of 5 in 100, a limit's another 5 to 10 in 100); the fewer, the more often a chance cluster cuts.
   */
  static readonly MARGIN = 2;
  static readonly SLACK = 0.03;
  static readonly CREDIT_MOST = 6;

  readonly #mostShare: number;
  /** The last cuts since armed: the pace factor before each, and whether its request was sent clearly under the one before. */
  #cuts: Array<{ readonly factor: number; readonly under: boolean; readonly sends: number; readonly at: number }> = [];
  #probe: { readonly from: number; readonly resume: number; ends: number; refused: number } | null = null;
  #coolUntil = Number.NEGATIVE_INFINITY;
  /** Two cuts came QUIET_MS and QUIET_ANSWERS apart once: the way down from a first burst is behind. */
  #armed = false;
  #answersSinceCut = 0;
  #lastCutAt: number | null = null;
  /** The requests of the probes that found noise, and of them the refused. */
  #noiseEnds = 0;
  #noiseRefused = 0;
  #level: number | null = null;
  /** 429s the noise may still bring before the next is taken for a limit's (`absorb`). */
  #credit = 0;

  /** `mostShare`: past this share of a lane's recent requests, 429s are never taken for noise. */
  constructor(mostShare: number) {
    this.#mostShare = mostShare;
  }

  /** The share of requests the provider refuses whatever the pace, once a probe found one. */
  get level(): number | null {
    return this.#level;
  }

  get probing(): boolean {
    return this.#probe !== null;
  }

  /**
   * A 429 cut the pace from `factor` (of what the lane sent at), for a request sent clearly `under`
   * the rate of the cut before (`RateBackoff.sentClearlyUnder`), `sends` requests into the lane, its
   * recent share of 429s `share`. Returns the factor to hold when a probe starts now, else null.
   */
  cut(o: { factor: number; under: boolean; sends: number; share: number; now: number }): number | null {
    const quiet = this.#lastCutAt !== null && o.now - this.#lastCutAt >= NoiseProbe.QUIET_MS;
    if (quiet && this.#answersSinceCut >= NoiseProbe.QUIET_ANSWERS) this.#armed = true;
    this.#answersSinceCut = 0;
    this.#lastCutAt = o.now;
    if (!this.#armed) return null;
    this.#cuts.push({ factor: o.factor, under: o.under, sends: o.sends, at: o.now });
    if (this.#cuts.length > NoiseProbe.CUTS) this.#cuts.shift();
    if (this.#probe !== null || o.now < this.#coolUntil || o.share > this.#mostShare) return null;
    const first = this.#cuts[0]!;
    const close = this.#cuts.slice(-NoiseProbe.CLOSE_CUTS)[0]!;
    const closeTogether =
      this.#cuts.length >= NoiseProbe.CLOSE_CUTS &&
      o.sends - close.sends <= NoiseProbe.CLOSE_SENDS &&
      o.now - close.at <= NoiseProbe.CLOSE_MS;
    if (this.#cuts.filter((c) => c.under).length < NoiseProbe.UNDER_CUTS && !closeTogether) return null;
    // found noise, the pace goes back to where the first of these cuts found it
    this.#probe = { from: o.now, resume: first.factor, ends: 0, refused: 0 };
    this.#cuts = [];
    return NoiseProbe.HOLD * o.factor;
  }

  /**
   * A request of the lane sent at `sentAt` ended at `now`: `refused` with a 429 saying no limit,
   * `everything` when that 429 is one of a refusal of everything (many in a row: a quota spent, a
   * limit at any pace). The probe's verdict once it is over, else null.
   */
  ended(o: { sentAt: number; refused: boolean; everything?: boolean; now: number }): ProbeVerdict | null {
    if (!o.refused) {
      this.#answersSinceCut++;
      if (this.#level !== null)
        this.#credit = Math.min(NoiseProbe.CREDIT_MOST, this.#credit + NoiseProbe.MARGIN * this.#level + NoiseProbe.SLACK);
    }
    const p = this.#probe;
    if (p === null) return null;
    // what left before the probe held the pace says nothing of it
    if (o.sentAt < p.from) return null;
    if (o.everything) return this.#limit(o.now);
    p.ends++;
    if (o.refused) p.refused++;
    const enough = p.refused >= NoiseProbe.ENOUGH_REFUSED;
    if (!enough && p.ends < NoiseProbe.PROBE_ENDS && o.now - p.from < NoiseProbe.PROBE_MOST_MS) return null;
    if (p.refused < NoiseProbe.LEAST_REFUSED) return this.#limit(o.now);
    this.#probe = null;
    this.#coolUntil = o.now + NoiseProbe.NOISE_COOL_MS;
    // Stopped at a refusal, refused/ends overstates the share; (r - 1)/(n - 1) does not. Every probe
    // that found noise counts: one stopped at 4 of 27 may be 5 in 100 or 25.
    this.#noiseRefused += enough ? p.refused - 1 : p.refused;
    this.#noiseEnds += enough ? p.ends - 1 : p.ends;
    this.#level = Math.min(this.#mostShare, this.#noiseRefused / this.#noiseEnds);
    this.#credit = NoiseProbe.CREDIT_MOST;
    return { noise: true, resume: p.resume };
  }

  /**
   * Whether a 429 (not one of a probe's) is of the noise found: each answer makes room for MARGIN
   * times the share of requests it refuses, up to CREDIT_MOST, and each such 429 takes one. More of
   * them than that (a limit's on top of the noise), or one of a refusal of everything, are a limit's.
   */
  absorb(everything: boolean): boolean {
    if (this.#level === null || everything || this.#credit < 1) return false;
    this.#credit--;
    return true;
  }

  #limit(now: number): ProbeVerdict {
    // what noise an earlier probe found is not there now, or is under what a limit's 429s bring
    this.#level = null;
    this.#noiseEnds = this.#noiseRefused = this.#credit = 0;
    this.#probe = null;
    this.#coolUntil = now + NoiseProbe.LIMIT_COOL_MS;
    return { noise: false };
  }
}

/** What a probe found: random refusals (the lane resumes the pace factor `resume`), or a limit (it climbs from the pace held). */
export type ProbeVerdict = { readonly noise: true; readonly resume: number } | { readonly noise: false };
