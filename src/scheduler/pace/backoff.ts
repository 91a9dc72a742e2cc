/**
 * Tunes a lane's pace from 429s, for providers that do not say their limit (or whose real limit is
 * below what they say, when others share the key): multiplicative decrease on a 429, additive
 * increase in quiet time, up to the cap. So a run told twice the real limit settles near the real
 * one after a few 429s instead of meeting one every second.
 *
 * `factor` scales the lane's limits. Near the rate of the last 429 it climbs slowly, far below it
 * quickly: most of the time is spent just under the real limit.
 */
export class RateBackoff {
  /** Cut on each 429: a quarter off. */
  static readonly DECREASE = 0.75;
  /**
   * Climb per quiet second, as a share of the rate the last 429 came at: fast far below it (back to
   * 90% of it in 3 s), slow near it (the last tenth in 25 s). Shares of that rate, not of the limit
   * the factor scales: a limit learned from a first burst at -c 64 is many times the real one, and
   * steps of it climbed past a real limit of 60 a minute within a second of each cut (a 429 every
   * second or two).
   */
  static readonly FAST_INCREASE = 0.05;
  static readonly SLOW_INCREASE = 0.004;
  /** The lowest factor: low enough that a first burst 500 times the real limit still finds it. */
  static readonly FLOOR = 0.001;
  /**
   * Past the rate the last 429 came at with no 429 since (it was a passing one, or the limit rose),
   * quiet time raises the pace by this share per second, compounding: 2x in about 23 s. Open-ended
   * (no limit said or set), up to the caller's bound; under a cap or a said limit, up to it.
   */
  static readonly SEARCH = 0.03;
  /**
   * A 429 for a request sent within this long of the one whose 429 set the ceiling may have met the
   * same provider window (1 s, the window the pacer counts in), filled at that rate.
   */
  static readonly WINDOW_MS = 1000;

  #factor = 1;
  /** The factor at which the last 429 came: the real limit is about there. */
  #ceiling: number | null = null;
  #lastCutAt = -Infinity;
  /** When the request whose 429 set the ceiling was sent. */
  #ceilingSentAt = -Infinity;
  /** The lowest rate a later 429 within the ceiling's window came at, not yet taken as the ceiling. */
  #windowLow: number | null = null;
  /** Cuts since the last answer: 429s with none answered between them are one refusal. */
  #refusalCuts = 0;
  #lastTickAt: number;

  constructor(now: number) {
    this.#lastTickAt = now;
  }

  get factor(): number {
    return this.#factor;
  }

  /**
   * A factor just under the one the last 429 came at (the current one before any 429, or once the
   * pace has passed that one clearly with no 429 since: it was no limit).
   */
  get safeFactor(): number {
    // passed clearly: a cut from here would still be above where the last 429 came
    const passed = this.#ceiling !== null && this.#factor * RateBackoff.DECREASE > this.#ceiling;
    return this.#ceiling === null || passed ? this.#factor : Math.min(this.#factor, this.#ceiling * 0.9);
  }

  /** True once a 429 has cut the pace (the limit is being learned from 429s). */
  get engaged(): boolean {
    return this.#ceiling !== null;
  }

  /**
   * A 429 came for a request sent at `sentAt`. Requests that left before the last cut were paced
   * at the old rate, and their 429s say nothing new: only the first of a burst cuts.
   */
  rateLimited(sentAt: number, now: number): boolean {
    this.tick(now);
    if (sentAt < this.#lastCutAt) return false;
    // 429s with no answer between them are one refusal (a per-minute window spent, refusing everything
    // till it turns): each cuts the pace, but the rate the refusal began at stays the ceiling the
    // climb is measured by. Lowered with each cut, the climb after a minute's refusal was a crawl.
    const newRefusal = this.#refusalCuts++ === 0;
    if (this.#ceiling === null || (newRefusal && sentAt >= this.#ceilingSentAt + RateBackoff.WINDOW_MS)) {
      this.#ceiling = this.#factor;
      this.#ceilingSentAt = sentAt;
      this.#windowLow = null;
    } else if (newRefusal) {
      // Sent within a window of the request whose 429 set the ceiling, after answers that left before
      // it: likely the same provider window, which that rate filled (the rest of a first burst's
      // second). The ceiling stays that rate for now; as the rate this one came at is lower, it is
      // kept for when the refusal outlasts the window.
      this.#windowLow = Math.min(this.#windowLow ?? Infinity, this.#factor);
    } else if (this.#windowLow !== null && sentAt >= this.#ceilingSentAt + RateBackoff.WINDOW_MS) {
      // Refused past that window with nothing answered since: no window's tail, a quota spent (a
      // gateway's minute). The 429s within it were the limit speaking: the ceiling is the lowest
      // rate one of them came at, as if each had set it.
      this.#ceiling = this.#windowLow;
      this.#windowLow = null;
    }
    this.#factor = Math.max(RateBackoff.FLOOR, this.#factor * RateBackoff.DECREASE);
    this.#lastCutAt = now;
    return true;
  }

  /**
   * Let quiet time raise the pace. `open`: no limit was said or set, so the factor scales a pace the
   * 429s themselves taught, which is no ceiling: past the rate the last 429 came at it keeps
   * climbing (`SEARCH`), up to `most` (the caller's bound: twice what the lane is sending, so a lane
   * that sends little does not climb to a pace it never tried).
   */
  tick(now: number, open?: { most: number }): void {
    const seconds = Math.max(0, (now - this.#lastTickAt) / 1000);
    this.#lastTickAt = now;
    // a pace past 1 was searched for while no limit was known; one is now (a cap, headers): never above it
    if (!open && this.#factor > 1) this.#factor = 1;
    if (seconds === 0) return;
    const f = this.#factor;
    const ceiling = this.#ceiling ?? 1;
    const most = open ? Number.POSITIVE_INFINITY : 1;
    if (f < ceiling * 0.9) this.#factor = Math.min(most, ceiling * 0.9, f + RateBackoff.FAST_INCREASE * ceiling * seconds);
    else if (f < ceiling) this.#factor = Math.min(most, ceiling, f + RateBackoff.SLOW_INCREASE * ceiling * seconds);
    else if (f < most || open) {
      const top = open ? open.most : 1;
      this.#factor = Math.max(f, Math.min(top, f * (1 + RateBackoff.SEARCH) ** seconds));
    }
  }

  /** A request of the lane was answered. */
  answered(): void {
    this.#refusalCuts = 0;
  }

  /** Cuts since the last answer (0 when the last request answered). */
  get refusalCuts(): number {
    return this.#refusalCuts;
  }

  /** Start from a factor remembered from an earlier run. */
  restore(factor: number): void {
    this.#factor = Math.min(1, Math.max(RateBackoff.FLOOR, factor));
    this.#ceiling = this.#factor < 1 ? this.#factor / RateBackoff.DECREASE : null;
  }
}
