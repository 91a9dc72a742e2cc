/** A second of a lane's sends: how many requests left in it, and how those ended so far. */
interface Second {
  sent: number;
  answered: number;
  refused: number;
}

/**
 * A lane's requests by the second they were sent in, for the last KEEP_S seconds: its send rate,
 * and what the provider took. A second whose requests were all answered shows that the provider
 * takes that many within a second; a 429 for a request sent in a second holding no more than that
 * (with answers around it) is no limit per second speaking (such a limit would have refused that
 * second too), but an overloaded upstream's or a gateway's random refusal. Taken for a limit, such
 * 429s from a provider saying 300 a minute, 5 in 100 of them, held a lane at 120-180 a minute
 * (`Lane.rateLimitedBy` asks this only of a provider whose answers say its limits).
 */
export class SendSeconds {
  /** Seconds kept: a limit lowered meanwhile (another client on the key) is believed this long at most. */
  static readonly KEEP_S = 10;
  readonly #seconds = new Map<number, Second>();

  /** A request left at `at` (ms epoch). */
  sent(at: number): void {
    const s = Math.floor(at / 1000);
    const second = this.#seconds.get(s);
    if (second) second.sent++;
    else {
      this.#seconds.set(s, { sent: 1, answered: 0, refused: 0 });
      // by range, not insertion order: after the clock is set back the oldest key is a "future" second
      for (const old of this.#seconds.keys()) if (old < s - SendSeconds.KEEP_S || old > s) this.#seconds.delete(old);
    }
  }

  /** The request sent at `sentAt` was answered. */
  answered(sentAt: number): void {
    const second = this.#seconds.get(Math.floor(sentAt / 1000));
    if (second) second.answered++;
  }

  /** The request sent at `sentAt` was refused with a 429. */
  refused(sentAt: number): void {
    const second = this.#seconds.get(Math.floor(sentAt / 1000));
    if (second) second.refused++;
  }

  /** Requests sent in the seconds from `from` to `to` (whole seconds since the epoch, both included). */
  sentIn(from: number, to: number): number {
    let n = 0;
    for (let s = from; s <= to; s++) n += this.#seconds.get(s)?.sent ?? 0;
    return n;
  }

  /**
   * Whether the request sent at `sentAt` left in a second holding no more requests than another
   * recent second whose requests were all answered.
   */
  withinTaken(sentAt: number): boolean {
    const at = Math.floor(sentAt / 1000);
    const sent = this.#seconds.get(at)?.sent;
    if (sent === undefined) return false;
    for (const [s, second] of this.#seconds) {
      if (s !== at && second.refused === 0 && second.answered === second.sent && second.sent >= sent) return true;
    }
    return false;
  }
}
