/**
 * Whether slowing down makes 429s saying no limit rarer. A rate limit's 429s do: they come for the
 * share of requests over the limit, so at half the rate there are far fewer or none. An overloaded
 * upstream's or a proxy's random refusals do not: they are the same share of requests at any pace,
 * and a lane that cut its pace for each of them fell to its floor (600 jobs at -c 8 answered at 0.7
 * a second, against about 60 without them, with a quarter refused at random).
 *
 * From the rate a 429 first cut the pace to, the test waits for further 429s to halve it (under a
 * limit, the cuts mostly stop before: the test ends with no sample taken, and none of its own 429s),
 * then holds the pace there (429s saying no limit cut nothing while it does) and counts the share of
 * 429s among the next `SAMPLE` requests; then again at half that rate. Under a limit, the share at the lower rate is
 * far smaller (at most 2s - 1 for a share s at twice the rate), so it ends up with almost no 429s
 * and the test ends. When the share held instead (`HELD` of the one before, or more), the 429s do
 * not depend on the pace: they are the provider's noise, at that share, and the pace goes back to
 * the higher of the two rates. A limit and noise together come down until only the noise is left.
 * Rates are the lower of the pace's and what the lane sent, so that a cap far above a rate the
 * concurrency bounds is not taken for the rate.
 */
/** The verdict: 429s saying no limit came for `share` of the requests both at `fasterRate` and at `slowerRate` (requests a second). */
export interface NoiseFound {
  readonly share: number;
  readonly fasterRate: number;
  readonly slowerRate: number;
}

export class NoiseTest {
  /** Requests counted at each rate before the shares are compared. */
  static readonly SAMPLE = 50;
  /** The share at half the rate is this much of the one before, or more: it held. */
  static readonly HELD = 0.6;
  /**
   * A share this high is a rate far over its limit (at 3.5 times a limit 71% of requests are over
   * it, and at half that rate still 43%, which would look held): never taken for noise.
   */
  static readonly MOST_NOISE = 0.6;
  /** Fewer 429s than this among a sample: the pace is under the limit, the test ends. */
  static readonly FEWEST_HITS = 2;
  /** Requests ended waiting for the pace to halve before the test gives up: it came to rest above. */
  static readonly MOST_WAIT = 10 * NoiseTest.SAMPLE;

  /** The last rate measured (or the one the test started from) and the share of 429s there (null: not measured). */
  #from: { readonly rate: number; readonly share: number | null } | null = null;
  /** Requests ended since the pace was to halve from `#from`. */
  #waited = 0;
  /** The requests being counted at a halved rate; `skip`: those sent before it, still ending. */
  #sample: { readonly rate: number; ends: number; hits: number; skip: number } | null = null;

  /** A test runs: a cut started it, and no verdict has ended it. */
  get running(): boolean {
    return this.#from !== null;
  }

  /** A sample is being taken: the pace holds, and 429s saying no limit cut nothing. */
  get holding(): boolean {
    return this.#sample !== null;
  }

  /** A 429 saying no limit cut the pace to `rate` (requests a second): a test starts, unless one runs. */
  cut(rate: number | null): void {
    if (this.#from !== null || rate === null || !(rate > 0)) return;
    this.#from = { rate, share: null };
    this.#waited = 0;
  }

  /**
   * A request ended, `hit` if with a 429 saying no limit, while the lane's rate is `rateNow()` a
   * second with `inFlight` requests out. Returns the verdict when the 429s are found to be noise; the
   * pace may go back to its `fasterRate`.
   */
  ended(hit: boolean, rateNow: () => number | null, inFlight: number): NoiseFound | null {
    const from = this.#from;
    if (from === null) return null;
    const sample = this.#sample;
    if (sample === null) {
      const rate = rateNow();
      if (rate !== null && rate <= from.rate / 2) {
        // the requests out now left at the faster rate: their ends say nothing of this one
        this.#sample = { rate, ends: 0, hits: 0, skip: inFlight };
      } else if (++this.#waited > NoiseTest.MOST_WAIT) this.#from = null;
      return null;
    }
    if (sample.skip > 0) {
      sample.skip--;
      return null;
    }
    sample.ends++;
    if (hit) sample.hits++;
    if (sample.ends < NoiseTest.SAMPLE) return null;
    this.#sample = null;
    this.#waited = 0;
    const share = sample.hits / sample.ends;
    if (sample.hits < NoiseTest.FEWEST_HITS) {
      this.#from = null;
      return null;
    }
    if (from.share !== null && from.share <= NoiseTest.MOST_NOISE && share >= from.share * NoiseTest.HELD) {
      this.#from = null;
      return { share: (share + from.share) / 2, fasterRate: from.rate, slowerRate: sample.rate };
    }
    // the first sample, or slowing down helped and 429s still come: measure the next halving
    this.#from = { rate: sample.rate, share };
    return null;
  }
}
