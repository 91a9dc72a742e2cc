/**
 * Finds a quota counted over a long window (a minute: Gemini's, a gateway's) from a provider that
 * says no limit. Such a provider takes everything until the window's quota is spent, then refuses
 * everything until the window turns: a refusal seconds long. A limit over 1-second windows never
 * refuses that long. Each long refusal ends a cycle, from the end of the last one (or the first
 * answer) to its own end: about one window, in which the quota was answered and then refused. The
 * answers of a cycle over its length is the rate the quota allows.
 *
 * Times are when requests were sent, not when their answers came: an answer sent before the
 * refusal began (a slower one) belongs to the cycle before it, however late it arrives.
 */
export class RefusalCycles {
  /** A refusal at least this long (from the first refused request's send to the first answered one's) is a long window's. */
  static readonly LONG_REFUSAL_MS = 3000;

  /** When the cycle began: the last long refusal's end, or the first answer. */
  #cycleFrom: number | null = null;
  /** Answers sent in this cycle before its refusal began. */
  #answers = 0;
  /** When the first request of the refusal going on now was sent; null when none is. */
  #refusedFrom: number | null = null;

  /** A request sent at `sentAt` was refused with a 429 that says no limit. */
  refused(sentAt: number): void {
    if (this.#cycleFrom === null) return; // nothing answered yet: a first burst, no cycle to measure
    this.#refusedFrom = this.#refusedFrom === null ? sentAt : Math.min(this.#refusedFrom, sentAt);
  }

  /**
   * A request sent at `sentAt` was answered. Returns the quota's rate, in requests per second, when
   * this answer ends a long refusal (null otherwise).
   */
  answered(sentAt: number): number | null {
    if (this.#cycleFrom === null) {
      this.#cycleFrom = sentAt;
      this.#answers = 1;
      return null;
    }
    const refusedFrom = this.#refusedFrom;
    if (refusedFrom === null || sentAt < refusedFrom) {
      this.#answers++;
      return null;
    }
    // the first answer sent after the refusal began: it is over
    this.#refusedFrom = null;
    if (sentAt - refusedFrom < RefusalCycles.LONG_REFUSAL_MS) {
      this.#answers++;
      return null;
    }
    const cycleMs = sentAt - this.#cycleFrom;
    const answers = this.#answers;
    this.#cycleFrom = sentAt;
    this.#answers = 1;
    return cycleMs > 0 ? (answers * 1000) / cycleMs : null;
  }
}
