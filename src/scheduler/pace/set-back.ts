/**
 * A step back this long or shorter is left alone: it holds a pace or a pause at most as long, which
 * is within the pacing's own 1-second window.
 */
const TOLERATED_MS = 1000;

/**
 * Sees a wall clock set back (by NTP, or by hand) past a second: times held as absolute ones (a
 * pace's log, a pause's end, an outage's next probe) are then in the future by the step, and must
 * move back with it.
 */
export class SetBackWatch {
  #latest = Number.NEGATIVE_INFINITY;

  /** How far `now` is behind the latest time given, when that is more than a second; else 0. */
  by(now: number): number {
    const by = now - this.#latest;
    if (by > 0 || by < -TOLERATED_MS) this.#latest = now;
    return by < -TOLERATED_MS ? by : 0;
  }
}
