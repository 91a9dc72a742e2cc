import { SetBackWatch } from './set-back.js';
/**
 * The pace of one lane, kept in this process: how long a request must wait so that the provider,
 * counting over short windows, never sees more than its limit.
 *
 * Providers quantize a per-minute limit into 1-second windows (600 rpm: at most 10 requests in
 * any second). Two rules keep us inside them:
 * - a sliding log of what was sent: within any `WINDOW_MS + GUARD_MS` there are never more requests
 *   or tokens than one window's share. The guard absorbs the jitter between our send and the
 *   provider's receipt, so no fixed window of the provider can see more than its share either.
 *   Once the lane is warm (connections open, code compiled) that jitter is a few ms, and the
 *   guard shrinks to WARM_GUARD_MS: the guard is paid on every window, 2% of the limit at 20 ms.
 *   A 429 at a limit the provider said means the jitter was larger: the lane widens it again.
 *   A request bigger than a whole window's share goes alone and stays in the log for as many
 *   windows as it is big, so it goes at the average rate.
 * - even spacing (GCRA, a leaky bucket) at the same rate, so a window's share is spread over the
 *   window instead of leaving in one burst at its start.
 *
 * Pure arithmetic over an injected clock: the caller hands in `now`.
 */

/** The limits a lane paces at, per minute; null means no limit of that kind. */
export interface PaceLimits {
  readonly rpm: number | null;
  readonly tpm: number | null;
}

/** The provider's counting window. */
export const WINDOW_MS = 1000;
/** Added to the window in our own count: the most jitter between our send and the provider's clock. */
export const GUARD_MS = 20;
/** The guard once the lane is warm. */
export const WARM_GUARD_MS = 5;

/**
 * A request that was let through: its place in the logs, so its token count can be corrected when
 * its usage is known, and its time moved when it is known to have arrived later than it left.
 */
export interface PaceTicket {
  tokens: number;
  /** When its tokens leave the log. */
  until: number;
  /** Its entry in the request log (null without a request limit). */
  request: { until: number } | null;
  /** When it was taken (or known to have left, `stretch`): a raised limit measures its place from here (`setLimits`). */
  at?: number;
}

/** A request's place in the log: when it leaves it, and when it was taken (`setLimits` measures from there). */
interface LogEntry {
  until: number;
  at: number;
}

/** What a window admits: whole requests, and tokens (fractions kept: they are sums). */
export function windowShare(limits: PaceLimits): { requests: number; tokens: number } {
  const requests = limits.rpm === null ? Infinity : (limits.rpm * WINDOW_MS) / 60_000;
  const tokens = limits.tpm === null ? Infinity : (limits.tpm * WINDOW_MS) / 60_000;
  return { requests, tokens };
}

/**
 * The most requests a second the windows admit, and which limit binds, for requests weighing
 * `weight` tokens (null: not known yet, then tokens bind nothing). Requests are taken whole: two of
 * 0.56 of a window's token share do not fit in one window, so 1,000 tokens a window admit one
 * request of 560 a second, not 1.8, and 110 requests a minute admit one a second; a request bigger
 * than the share goes alone, at the average rate.
 * Null without a limit.
 */
export function reachablePerSecond(
  limits: PaceLimits,
  weight: number | null,
): { readonly perSecond: number; readonly by: 'requests' | 'tokens' } | null {
  const share = windowShare(limits);
  const perWindow = 1000 / WINDOW_MS;
  // whole requests too: a window's share of 1.84 admits one request a window (WindowPacer.delay)
  const byRequests = (share.requests >= 1 ? Math.floor(share.requests + 1e-9) : share.requests) * perWindow;
  let byTokens = Infinity;
  if (share.tokens !== Infinity && weight !== null && weight > 0) {
    const fit = share.tokens / weight;
    byTokens = (fit >= 1 ? Math.floor(fit) : fit) * perWindow;
  }
  const perSecond = Math.min(byRequests, byTokens);
  return perSecond === Infinity ? null : { perSecond, by: byTokens < byRequests ? 'tokens' : 'requests' };
}

export class WindowPacer {
  #share = { requests: Infinity, tokens: Infinity };
  // The request log is in expiry order (stretch keeps it so) and expires from the front. The token
  // log is in send order: a big request stays longer and holds back the expiry of later ones behind
  // it, which only overcounts, the safe side.
  #requests: LogEntry[] = [];
  #tokens: PaceTicket[] = [];
  #tokenSum = 0;
  // GCRA theoretical arrival times: the next request is on time at these; and the share each was
  // last advanced at, which a raised limit measures what is ahead of now against
  #requestTat = 0;
  #tokenTat = 0;
  #requestTatShare = Infinity;
  #tokenTatShare = Infinity;
  /** WINDOW_MS plus the guard. */
  #span = WINDOW_MS + GUARD_MS;
  readonly #setBack = new SetBackWatch();

  constructor(limits: PaceLimits = { rpm: null, tpm: null }) {
    this.setLimits(limits);
  }

  /**
   * Pace at `limits` from now on. A raise (headers saying more than the limit a run remembered, 3 rpm
   * then 1,200) also moves the places already taken to the new pace, as if they had been taken at
   * it: held at the old one, the next request waited out the old spacing, 20 s at 3 rpm, with the
   * new limit known. Each place is measured from when it was taken, never lengthened, so a cut and a
   * raise in turn give back no more than the new limit allows. A cut leaves them as they are: its
   * 429s pause the lane already.
   */
  setLimits(limits: PaceLimits, now?: number): void {
    const share = windowShare(limits);
    const raised = share.requests > this.#share.requests || share.tokens > this.#share.tokens;
    this.#share = share;
    if (now === undefined || !raised || !this.limited) return;
    if (share.requests !== Infinity) {
      const life = this.#span * Math.max(1, 1 / share.requests);
      // only places held past a window (taken under a window's share) end sooner: a pace climbing
      // after 429s raises the limit on every take, and finds none
      let moved = false;
      for (const r of this.#requests) {
        if (r.at + life >= r.until) continue;
        r.until = r.at + life;
        moved = true;
      }
      // `delay` reads the k-th entry from the end: the log stays in expiry order
      if (moved) this.#requests.sort((a, b) => a.until - b.until);
      if (share.requests > this.#requestTatShare) {
        this.#requestTat = now + Math.max(0, this.#requestTat - now) * (this.#requestTatShare / share.requests);
        this.#requestTatShare = share.requests;
      }
    }
    if (share.tokens !== Infinity) {
      for (const t of this.#tokens) t.until = Math.min(t.until, (t.at ?? t.until) + this.#span * Math.max(1, t.tokens / share.tokens));
      if (share.tokens > this.#tokenTatShare) {
        this.#tokenTat = now + Math.max(0, this.#tokenTat - now) * (this.#tokenTatShare / share.tokens);
        this.#tokenTatShare = share.tokens;
      }
    }
  }

  /** Count with this guard from now on (GUARD_MS cold, WARM_GUARD_MS warm). */
  setGuard(ms: number): void {
    this.#span = WINDOW_MS + ms;
  }

  get limited(): boolean {
    return this.#share.requests !== Infinity || this.#share.tokens !== Infinity;
  }

  /** ms until a request of `tokens` may go; 0 when it may go now. */
  delay(tokens: number, now: number): number {
    this.#followSetBack(now);
    if (!this.limited) return 0;
    this.#expire(now);
    const { requests, tokens: tokenShare } = this.#share;
    let wait = 0;
    if (requests !== Infinity) {
      const perWindow = Math.max(1, Math.floor(requests + 1e-9));
      if (this.#requests.length + 1 > perWindow) wait = Math.max(wait, this.#requests[this.#requests.length - perWindow]!.until - now);
      const interval = this.#span / requests;
      // one request of tolerance: a send that came late lets the next catch up
      wait = Math.max(wait, this.#requestTat - interval - now);
    }
    if (tokenShare !== Infinity && tokens > 0) {
      if (this.#tokens.length > 0 && this.#tokenSum + tokens > tokenShare + 1e-9) {
        wait = Math.max(wait, this.#tokenRoomAt(tokens) - now);
      }
      wait = Math.max(wait, this.#tokenTat - this.#span * 0.1 - now);
    }
    return Math.max(0, Math.ceil(wait));
  }

  /** Record a request sent at `now` (after `delay` said 0). */
  take(tokens: number, now: number): PaceTicket {
    this.#followSetBack(now);
    const { requests, tokens: tokenShare } = this.#share;
    const ticket: PaceTicket = { tokens: 0, until: now, request: null, at: now };
    if (requests !== Infinity) {
      const entry = { until: now + this.#span * Math.max(1, 1 / requests), at: now };
      ticket.request = entry;
      this.#requests.push(entry);
      this.#requestTat = Math.max(this.#requestTat, now) + this.#span / requests;
      this.#requestTatShare = requests;
    }
    if (tokenShare !== Infinity && tokens > 0) {
      ticket.tokens = tokens;
      ticket.until = now + this.#span * Math.max(1, tokens / tokenShare);
      this.#tokens.push(ticket);
      this.#tokenSum += tokens;
      this.#tokenTat = Math.max(this.#tokenTat, now) + (this.#span * tokens) / tokenShare;
      this.#tokenTatShare = tokenShare;
    }
    return ticket;
  }

  /** The request's real token count is known: charge the difference while it is still counted. */
  settle(ticket: PaceTicket, actualTokens: number, now: number): void {
    if (ticket.until <= now || ticket.tokens === 0) return;
    const delta = actualTokens - ticket.tokens;
    ticket.tokens = Math.max(0, actualTokens);
    this.#tokenSum += Math.max(delta, -this.#tokenSum);
    if (this.#share.tokens !== Infinity) this.#tokenTat += (this.#span * delta) / this.#share.tokens;
  }

  /**
   * The request is known to have left no earlier than `sentAt` (a cold start: the first requests
   * of a lane wait for connections and compiled code, tens of ms the guard does not cover). Its
   * places are held as if it had been sent then.
   */
  stretch(ticket: PaceTicket, sentAt: number): void {
    const { requests, tokens } = this.#share;
    const entry = ticket.request;
    if (entry && requests !== Infinity) {
      const until = sentAt + this.#span * Math.max(1, 1 / requests);
      // the log's own entry: the ticket types it without the time it was taken
      const held = entry as LogEntry;
      const i = this.#requests.indexOf(held);
      if (until > entry.until && i >= 0) {
        // keep the log in expiry order: `delay` reads the k-th entry from the end
        this.#requests.splice(i, 1);
        held.until = until;
        held.at = Math.max(held.at, sentAt);
        let j = this.#requests.length;
        while (j > 0 && this.#requests[j - 1]!.until > until) j--;
        this.#requests.splice(j, 0, held);
      }
    }
    if (ticket.tokens > 0 && tokens !== Infinity) {
      ticket.until = Math.max(ticket.until, sentAt + this.#span * Math.max(1, ticket.tokens / tokens));
      ticket.at = Math.max(ticket.at ?? sentAt, sentAt);
    }
  }

  /**
   * A wall clock set back (by NTP, or by hand) past a window leaves every time held here in the
   * future by the step: an hour back held the lane an hour. They are moved back with it.
   */
  #followSetBack(now: number): void {
    const by = this.#setBack.by(now);
    if (by === 0) return;
    for (const r of this.#requests) {
      r.until += by;
      r.at += by;
    }
    for (const t of this.#tokens) {
      t.until += by;
      if (t.at !== undefined) t.at += by;
    }
    this.#requestTat += by;
    this.#tokenTat += by;
  }

  #expire(now: number): void {
    let r = 0;
    while (r < this.#requests.length && this.#requests[r]!.until <= now) r++;
    if (r > 0) this.#requests.splice(0, r);
    let t = 0;
    while (t < this.#tokens.length && this.#tokens[t]!.until <= now) this.#tokenSum -= this.#tokens[t++]!.tokens;
    if (t > 0) this.#tokens.splice(0, t);
    if (this.#tokens.length === 0) this.#tokenSum = 0; // no drift from float sums
  }

  /** When enough tokens will have left the log for `tokens` more (or the log is empty). */
  #tokenRoomAt(tokens: number): number {
    const byExpiry = [...this.#tokens].sort((a, b) => a.until - b.until);
    let sum = this.#tokenSum;
    for (const t of byExpiry) {
      sum -= t.tokens;
      if (sum + tokens <= this.#share.tokens + 1e-9 || sum <= 0) return t.until;
    }
    return byExpiry[byExpiry.length - 1]!.until;
  }
}
