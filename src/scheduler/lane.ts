import type { ProviderError, RateLimitInfo } from '../provider/types.js';
import { RateBackoff } from './pace/backoff.js';
import { SendSeconds } from './pace/send-seconds.js';
import { RecentShare } from './pace/recent-share.js';
import type { LaneBoard, LearnedLimits } from './pace/board.js';
import { stillRemembered } from '../remembered-pace.js';
import { LatencyStats } from './pace/latency.js';
import { limitsFromHeaders, lowerOf, refillIntervalMs } from './pace/learned.js';
import { GUARD_MS, WARM_GUARD_MS, reachablePerSecond, type PaceLimits, type PaceTicket } from './pace/window-pacer.js';

/** A lane as progress and `status` show it. */
export interface LaneSnapshot {
  readonly model: string;
  /** The limits paced at now (caps, learned limits and 429 backoff together), per minute. */
  readonly rpm: number | null;
  readonly tpm: number | null;
  readonly learned: LearnedLimits | null;
  /** Requests per second sent over the last few seconds. */
  readonly requestsPerSecond: number;
  /** The most requests a second the limits allow, and which limit binds (`Lane.ceiling`). */
  readonly ceiling?: { readonly perSecond: number; readonly by: 'requests' | 'tokens' } | null;
  readonly inFlight: number;
  readonly pausedUntil: number | null;
  readonly rateLimited: number;
  /** Since when the shared board (Redis) has not answered, sending waiting for it; null while it answers. */
  readonly boardDownSince?: number | null;
}

/**
 * How far ahead of its pace a lane holds jobs: about this long of its sends. The claim loop tops up
 * at least once a second (run.ts), so two seconds keep a paced lane busy between top-ups.
 */
const PACE_AHEAD_MS = 2000;
/** A lane paced at a known limit never holds fewer jobs waiting to be sent than this. */
const MIN_PACE_AHEAD = 2;

/** How many of a lane's last requests the share of 429s saying no limit is taken over, about. */
const UNSAID_429S_SPAN = 50;
/**
 * Up to this share of a lane's recent requests, 429s saying no limit from a provider whose answers
 * say their limits are its noise, and cut no pace: 1 in 10 is a rate about 11% over a limit
 * nobody said, and random refusals of 3 in 100 reach it now and then (a cut, climbed back from).
 */
const UNSAID_429S_NOISE = 0.1;
/**
 * Past this share of a lane's recent requests, 429s saying no limit are not noise even where the
 * seconds they were sent in show the provider took as many before (`SendSeconds`): random refusals
 * of a third of everything are an upstream in trouble, or a limit lowered since.
 */
const UNSAID_429S_MOST_NOISE = 0.3;
/**
 * Past this share of a lane's recent requests, 429s that say the limit, for requests sent while the
 * lane paced at it, are something else spending the same key (another client, a run without
 * --redis): the limit said is more than the lane gets, and the pace is cut as a limit nobody said
 * cuts it. Below it they are the edge of the provider's windows, and only their requests wait.
 */
const SAID_429S_SHARED = 0.1;
/**
 * A pace of `rpm` in the whole requests a window admits (reachablePerSecond): 110 a minute sends one
 * a second, and the factor climbs through 1.1 to 1.9 a second with no 429 to stop it, where status
 * said "114 rpm, learned from 429s" for a real 60.
 */
function wholeRequests(rpm: number | null): number | null {
  return rpm === null ? null : (reachablePerSecond({ rpm, tpm: null }, null)?.perSecond ?? 0) * 60;
}

/** The longest a lane waits between tries while 429s with no retry-after keep coming and nothing is answered. */
const REFUSAL_MOST_PAUSE_MS = 8000;
/** A 429 asking for a longer wait is no passing refusal: the lane pauses for it, as for any other. */
const STRAY_MOST_WAIT_MS = 5000;

/**
 * One (base URL, model): its own pace, pause, learned limits, 429 backoff and latencies. The
 * user's --rpm/--tpm are caps; the provider's headers (or its 429s) say the real limit, and the
 * lane paces at the lower of the two.
 */
export class Lane {
  readonly model: string;
  readonly latency = new LatencyStats();
  readonly board: LaneBoard;
  readonly #caps: PaceLimits;
  readonly #backoff: RateBackoff;
  readonly #now: () => number;
  /** Jobs of this lane the run holds (claimed, not finished). */
  inHand = 0;
  /** Jobs of this lane sleeping on its pace or pause (holding no slot). */
  waitingOnPace = 0;
  /** Jobs of this lane sleeping before a retry of a failed try (not a 429: that is the lane's pause). */
  backingOff = 0;
  inFlight = 0;
  rateLimited = 0;
  /** Sends by the second they left in: the send rate (for display, and a first guess at a limit), and what the provider took. */
  readonly #seconds = new SendSeconds();
  #firstSendAt = 0;
  // tokens of the requests sent: a tokens-per-minute limit in requests per second
  #tokensSent = 0;
  #requestsSent = 0;
  /** Requests of this lane that ended. */
  #ended = 0;
  #probing = false;
  /** When the first request of a cold lane went; `#probeOut`: a cold lane's request is out now. */
  #probeAt: number | null = null;
  #probeOut = false;
  /** When the lane's first answer came. */
  #firstAnswerAt: number | null = null;
  /** 429s taught the pace before anything was answered (`toRemember`). */
  #learnedUnanswered = false;
  /** A 429 came at a limit the provider said: the wide guard for the rest of the run. */
  #jittery = false;
  /** The limit said last was said in a 429's body, not in headers (`RateLimitInfo.inBody`). */
  #saidOnRefusal = false;
  /** When the lane first sent paced at a limit (a cap, one remembered or said); null before. */
  #pacedSince: number | null = null;
  /** An answer (or a 429, in headers) of this run's lane said the provider's limits (not only another run's, or an earlier one's). */
  #headersSeen = false;
  /** Of the lane's recent answers and 429s, the share that were 429s saying no limit. */
  readonly #unsaid429s = new RecentShare(UNSAID_429S_SPAN);
  /** The share of the lane's recent requests refused by a 429 saying the limit (`SAID_429S_SHARED`). */
  readonly #said429s = new RecentShare(UNSAID_429S_SPAN);
  /** A request bigger than the tokens-per-minute limit was said (`firstOversize`). */
  #oversizeSaid = false;
  /** Why this run sends no more to the model (its quota per day is spent), or null. */
  #closedBy: ProviderError | null = null;
  /** Aborted when the lane closes: jobs backing off before a retry (a minute or two) go back at once. */
  readonly #closing = new AbortController();
  static readonly SLOW_START_MS = 2000;
  static readonly COLD_REQUESTS = 3;
  static readonly BOARD_RETRY_MS = 500;

  /** Its provider enforces no limit (the offline mock): nothing to learn, no first request alone. */
  readonly #unlimited: boolean;

  constructor(model: string, caps: PaceLimits, board: LaneBoard, now: () => number, options: { unlimited?: boolean } = {}) {
    this.model = model;
    this.#unlimited = options.unlimited ?? false;
    this.#caps = caps;
    this.board = board;
    this.#now = now;
    this.#backoff = new RateBackoff(now());
  }

  /** Why the lane sends nothing more in this run, or null while it is open. */
  get closedBy(): ProviderError | null {
    return this.#closedBy;
  }

  /** Aborted once the lane is closed. */
  get closing(): AbortSignal {
    return this.#closing.signal;
  }

  /** Send nothing more to the model in this run: its jobs wait (a quota per day spent). True the first time. */
  close(error: ProviderError): boolean {
    if (this.#closedBy) return false;
    this.#closedBy = error;
    this.#closing.abort(error);
    return true;
  }

  /** Start from limits remembered from an earlier run. */
  restore(learned: LearnedLimits): void {
    if (this.board.learned()) return;
    if (!stillRemembered(learned, this.#now())) return;
    // A pace found by backing off under a cap is a factor of that cap: it may climb back.
    if (learned.source === '429s' && learned.rpm !== null && this.#caps.rpm !== null) {
      this.#backoff.restore(learned.rpm / this.#caps.rpm);
    } else {
      this.board.learn(learned);
    }
  }

  /**
   * What to remember for the next run: the header limits as said, or, when 429s taught the pace,
   * the pace they settled at. Null when nothing was learned.
   */
  toRemember(): LearnedLimits | null {
    // 429s and nothing answered: what was sent was all refused, at any rate (a key with no quota, an
    // endpoint refusing everything). The pace they taught slows this run's tries; kept, it said
    // "240 rpm, learned from 429s" to status, and estimate timed runs by it
    const learned = this.board.learned();
    if (this.#firstAnswerAt === null && this.#learnedUnanswered && learned?.source === '429s') return null;
    // A limit said only on 429s (Google's quota) is kept as a pace 429s taught, for 15 minutes: a run
    // paced under it is never refused, so never told a raised one (a key moved to a paid tier).
    if (!this.#fromBackoff()) return learned?.source === 'headers' && this.#saidOnRefusal ? { ...learned, source: '429s' } : learned;
    // Not the pace of this moment, which may be climbing past the limit: under the rate the
    // last 429 came at.
    const l = this.limits();
    const safe = this.#backoff.safeFactor / Math.max(this.#backoff.factor, 1e-9);
    const scale = (x: number | null): number | null => (x === null ? null : x * Math.min(1, safe));
    return { rpm: wholeRequests(scale(l.rpm)), tpm: scale(l.tpm), source: '429s', at: this.#now() };
  }

  /**
   * Whether 429s set the pace now: they cut it, and it has not climbed back to a limit the headers
   * say (then it paces at that limit, told and remembered as said: "300 rpm, learned from 429s"
   * stood beside a pace back at the 300 the headers said, and the next run began at 240).
   */
  #fromBackoff(): boolean {
    if (!this.#backoff.engaged) return false;
    return !(this.board.learned()?.source === 'headers' && this.#backoff.factor >= 1);
  }

  /** The limits paced at now: the lower of caps and learned limits, scaled down after 429s. */
  limits(): PaceLimits {
    const learned = this.board.learned();
    const base = lowerOf(this.#caps, learned);
    this.#backoff.tick(this.#now(), this.#openEnded(base, learned) ?? undefined);
    const f = this.#backoff.factor;
    if (f === 1) return base;
    const scale = (x: number | null): number | null => (x === null ? null : Math.max(1, x * f));
    return { rpm: scale(base.rpm), tpm: scale(base.tpm) };
  }

  /**
   * The tokens-per-minute limit a request of `tokens` is bigger than, the first time one is (null
   * otherwise, and ever after): such a request goes alone, one per `tokens / tpm` minutes, which a
   * run at a --tpm smaller than one request showed as a stall.
   */
  firstOversize(tokens: number): number | null {
    if (this.#oversizeSaid) return null;
    // asked once a request: the lower of the two limits without lowerOf's object
    const cap = this.#caps.tpm;
    const learned = this.board.learned()?.tpm ?? null;
    const tpm = cap === null ? learned : learned === null ? cap : Math.min(cap, learned);
    if (tpm === null || tokens <= tpm) return null;
    this.#oversizeSaid = true;
    return tpm;
  }

  /**
   * A pace only 429s taught (no cap, no limit said): the rate the lane sent at when one came, which
   * may have been a passing one, so it may be passed (`RateBackoff.tick`), up to twice what the lane
   * sends now. Null otherwise.
   */
  #openEnded(base: PaceLimits, learned: LearnedLimits | null): { most: number } | null {
    if (this.#caps.rpm !== null || this.#caps.tpm !== null || learned?.source !== '429s' || base.rpm === null) return null;
    const sending = this.#observedRate();
    return { most: sending === null ? 1 : Math.max(1, (2 * sending * 60) / base.rpm) };
  }

  /**
   * Take a place for a request now, or the ms to wait. A lane that knows none of the provider's
   * limits (none said, none remembered), and has no cap for one of them, sends one request at a
   * time until an answer comes (for up to SLOW_START_MS from the first): its headers say the limits
   * before a burst can trip them. A --rpm alone paces requests, not tokens: a burst at it met ten
   * 429s of a key allowing 20,000 tokens a minute. A first request refused (a stray 429, a 5xx) says nothing
   * of the limit: the next goes alone too (after a 429's pause), where the whole concurrency had
   * gone at once into a window of a tenth of it. A provider with no limit at all (the offline
   * mock) has nothing to learn: no such start.
   */
  async tryTake(tokens: number): Promise<PaceTicket | number> {
    const limits = this.limits();
    // With both caps, or a remembered limit, the pace already spreads the start.
    const cold =
      this.#firstAnswerAt === null &&
      !this.#unlimited &&
      this.board.learned() === null &&
      (this.#caps.rpm === null || this.#caps.tpm === null);
    if (cold) {
      if (this.#probeOut && this.#probeAt !== null && this.#now() - this.#probeAt < Lane.SLOW_START_MS) return 20;
      if (this.#probing) return 20;
      this.#probing = true; // taken before the await: two callers must not both be the first
    }
    let got: PaceTicket | number;
    try {
      got = await this.board.tryTake(tokens, limits);
      this.#boardDownSince = null;
    } catch {
      // The shared board (Redis) did not answer: wait and ask again rather than end the run or
      // send unpaced. Its client reconnects by itself. Said in the progress and `status`, which
      // otherwise showed a run sending nothing for no reason.
      this.#boardDownSince ??= this.#now();
      got = Lane.BOARD_RETRY_MS;
    } finally {
      if (cold) this.#probing = false;
    }
    if (typeof got !== 'number') {
      this.#sent(tokens);
      if (cold) {
        this.#probeAt ??= this.#now();
        this.#probeOut = true;
      }
    }
    return got;
  }

  /**
   * A request of this lane ended (answered, failed or aborted). The first few of a lane are held in
   * the pace as if sent when they ended: a cold request can reach the provider tens of ms after it
   * left, past what the guard covers. After them the lane is warm and the guard narrows, unless
   * a 429 already showed that sends reach the provider later than it covers.
   */
  ended(ticket: PaceTicket): void {
    this.#probeOut = false;
    if (this.#ended < Lane.COLD_REQUESTS) this.board.stretch(ticket, this.#now());
    if (++this.#ended === Lane.COLD_REQUESTS && !this.#jittery) this.board.setGuard?.(WARM_GUARD_MS);
  }

  /** Jobs in hand not sent and not backing off: waiting on the pace, a pause, the outage gate or a slot. */
  unsent(): number {
    return this.inHand - this.inFlight - this.backingOff;
  }

  /**
   * How many jobs this lane needs waiting to be sent to keep its pace busy: PACE_AHEAD_MS of sends
   * at the limit it paces at. More would only wait here, counted as running in `status` and out of
   * reach of other runs (at 60 a minute, -c 64 held a minute of work). Infinity while no limit is
   * known: then concurrency alone bounds what the lane holds.
   */
  paceAhead(): number {
    // what a request weighs is known once one is sent; until then, the least
    if (this.limits().tpm !== null && this.#requestsSent === 0) return MIN_PACE_AHEAD;
    const ceiling = this.ceiling();
    if (ceiling === null) return Infinity;
    return Math.max(MIN_PACE_AHEAD, Math.ceil((ceiling.perSecond * PACE_AHEAD_MS) / 1000));
  }

  /**
   * The most requests a second the limits paced at allow (`reachablePerSecond`), requests weighing
   * what they have so far; `by` says which limit binds. Null while no limit is known, or only a token
   * limit and no request sent yet.
   */
  ceiling(): { readonly perSecond: number; readonly by: 'requests' | 'tokens' } | null {
    return reachablePerSecond(this.limits(), this.#requestsSent === 0 ? null : this.#tokensSent / this.#requestsSent);
  }

  /** ms until the lane is not paused (0 when it is not). */
  pauseLeft(): number {
    return Math.max(0, this.board.pausedUntil() - this.#now());
  }

  /** An answer came: learn from its headers and latency (null: not a measure of the provider). */
  answered(rateLimit: RateLimitInfo | null, latencyMs: number | null, completionTokens: number): void {
    const now = this.#now();
    this.#unsaid429s.add(false);
    this.#said429s.add(false);
    this.#backoff.answered();
    this.#seconds.answered(now - (latencyMs ?? 0));
    this.#firstAnswerAt ??= now;
    this.#learnFromHeaders(rateLimit);
    if (latencyMs === null) return;
    // The first answers of a lane, and every request sent before its first answer came (with -c 16,
    // sixteen at once), carry connection set-up and cold code: left out of the latencies
    // --timeout auto reads, where a few of them would set the p99 for the next 256.
    const warm = this.#ended > Lane.COLD_REQUESTS && now - latencyMs >= this.#firstAnswerAt;
    if (warm) this.latency.record(latencyMs, completionTokens);
  }

  /**
   * A 429 came for a request sent at `sentAt`: how long to wait, and whether the whole lane waits.
   * The lane pauses for as long as the provider asked, else one refill interval; a 429 saying no
   * limit also cuts the pace. Except the provider's noise: from a provider whose answers say their
   * limits, a 429 saying none is not its rate limiter speaking (that one says them too) but an
   * overloaded upstream or a proxy's passing refusal, as long as such 429s stay a small share of the
   * lane's recent requests (`UNSAID_429S_NOISE`) and ask for a short wait. Then only its request
   * waits: a cut for each of them made one in a hundred cost a third of the rate, three in a hundred
   * two thirds. More of them say a limit nobody said (a proxy's), and cut the pace as without
   * headers. The share alone decides, never an earlier cut: a chance cluster of strays cut once, and
   * then every later stray cut again, back to the third of the rate.
   */
  rateLimitedBy(error: ProviderError, sentAt: number): { readonly waitMs: number; readonly lanePaused: boolean } {
    const now = this.#now();
    this.rateLimited++;
    const rl = error.rateLimit;
    this.#learnFromHeaders(rl);
    const saidLimit = rl !== null && (rl.limitRequests !== null || rl.limitTokens !== null);
    if (saidLimit && this.#pacedSince !== null && sentAt >= this.#pacedSince && !this.#jittery) {
      // Paced at a known limit when it was sent, yet over the one it says: our sends reach it with
      // more jitter than the warm guard covers. Not the 429s of a burst sent before any limit was
      // known (Google's endpoint says its quota on 429s only): the wide guard then cost 2% of its pace.
      this.#jittery = true;
      this.board.setGuard?.(GUARD_MS);
    }
    this.#seconds.refused(sentAt);
    if (saidLimit) {
      this.#said429s.add(true);
      // paced at the limit said, and refused more than its windows' edges explain: a key shared.
      // Each 429 paused the lane and it went on at the same pace, its refusals (which count against
      // the limit too) filling the provider's second: nearly nothing answered while another client ran.
      const paced = this.#pacedSince !== null && sentAt >= this.#pacedSince;
      if (paced && this.#said429s.value > SAID_429S_SHARED) this.#backoff.rateLimited(sentAt, now);
    } else {
      this.#unsaid429s.add(true);
      const asksLittle = (error.retryAfterMs ?? 0) <= STRAY_MOST_WAIT_MS;
      // A 429 for a request sent in a second holding no more sends than a recent second the provider
      // took whole is no limit per second (it would have refused that second too): noise, past the
      // share that makes one "rare". Only where the answers say the limit, which the lane paces
      // under (the provider's own limiter says it on its 429s): paced at a limit 429s taught, a lane's
      // seconds hold as many as that limit allows, and a real limit's 429 at a window's edge (the
      // provider's windows are not ours) looks the same (governor bench (11): 15 429s a minute, not
      // 3). Up to UNSAID_429S_MOST_NOISE of the lane's requests: past it, a limit lowered meanwhile
      // (a proxy's) is likelier than bad luck.
      const unrelatedToPace = this.#headersSeen && this.#unsaid429s.value <= UNSAID_429S_MOST_NOISE && this.#seconds.withinTaken(sentAt);
      const rare = this.#headersSeen && this.#unsaid429s.value <= UNSAID_429S_NOISE;
      const noise = asksLittle && (rare || unrelatedToPace);
      if (noise) return { waitMs: this.#pauseFor(error), lanePaused: false };
      // From a provider whose answers say their limits, one asking for a long wait (a retry-after of an
      // hour: a quota's window, maintenance) is waited out by the lane below, and teaches no pace: it
      // replaced "600 rpm, from headers" with "540 rpm, learned from 429s", which the next run began at.
      if (!this.#headersSeen || asksLittle) this.#learnFrom429(sentAt, now);
    }
    const pause = this.#pauseFor(error);
    this.board.pause(now + pause);
    return { waitMs: pause, lanePaused: true };
  }

  /**
   * A 429 saying no limit teaches one. With nothing to scale, start from what we were sending (when
   * enough was sent to say; else the pause alone must do: a cut of nothing would still count as a
   * limit found, and every later stray 429 would cut the limit headers say next).
   */
  #learnFrom429(sentAt: number, now: number): void {
    const l = this.limits();
    const observed = this.#observedRate();
    const nothingKnown = l.rpm === null && l.tpm === null;
    if (nothingKnown && observed !== null) {
      this.board.learn({ rpm: observed * 60, tpm: null, source: '429s', at: now });
      this.#learnedUnanswered ||= this.#firstAnswerAt === null;
    }
    if (!nothingKnown || observed !== null) this.#backoff.rateLimited(sentAt, now);
  }

  /** What a 429 asked to wait; `retry-after: 0`, or an HTTP date already past on this clock, is no wait at all: one refill interval. */
  #pauseFor(error: ProviderError): number {
    const asked = error.retryAfterMs;
    // a retry at once would go into the same full window
    if (asked !== null && asked > 0) return asked;
    const rpm = this.limits().rpm;
    const interval = rpm ? Math.ceil(60_000 / rpm) : 1000;
    // Refused again with nothing answered since (a gateway's minute spent, refusing all till it
    // turns): each pause twice the last, up to REFUSAL_MOST_PAUSE_MS, rather than a 429 per refill
    // interval (dozens of them a minute) until the pace's cuts made the interval long.
    const again = Math.max(0, this.#backoff.refusalCuts - 1);
    return again === 0 ? interval : Math.max(interval, Math.min(REFUSAL_MOST_PAUSE_MS, 250 * 2 ** again));
  }

  snapshot(): LaneSnapshot {
    const l = this.limits();
    const paused = this.board.pausedUntil();
    return {
      model: this.model,
      // a pace 429s cut is ours, told as what it sends (as toRemember, `learned` below); a limit said or set, as said
      rpm: this.#fromBackoff() ? wholeRequests(l.rpm) : l.rpm,
      tpm: l.tpm,
      // once 429s cut the pace, what it is learned from is them, as the run remembers it (status)
      // a limit said on 429s only is told as status tells it once remembered: learned from 429s, not headers
      learned: this.#fromBackoff() || this.#saidOnRefusal ? this.toRemember() : this.board.learned(),
      requestsPerSecond: this.requestsPerSecond(),
      ceiling: this.ceiling(),
      inFlight: this.inFlight,
      pausedUntil: paused > this.#now() ? paused : null,
      rateLimited: this.rateLimited,
      boardDownSince: this.#boardDownSince,
    };
  }

  #boardDownSince: number | null = null;

  /** Requests per second sent over the last 5 whole seconds. */
  requestsPerSecond(): number {
    const second = Math.floor(this.#now() / 1000);
    return this.#seconds.sentIn(second - 5, second - 1) / 5;
  }

  /** Requests per second sent over the last 5 s (or since the first send), null under 10 sends. */
  #observedRate(): number | null {
    const now = this.#now();
    const second = Math.floor(now / 1000);
    const n = this.#seconds.sentIn(second - 5, second);
    if (n < 10) return null;
    const span = Math.min(5000 + (now % 1000), now - this.#firstSendAt);
    return (n * 1000) / Math.max(1000, span);
  }

  #sent(tokens: number): void {
    // a cap or a learned limit paces this send (what limits() reads, without its clock work on every send)
    if (this.#pacedSince === null && (this.#caps.rpm !== null || this.#caps.tpm !== null || this.board.learned() !== null)) {
      this.#pacedSince = this.#now();
    }
    if (tokens > 0) {
      // weighed only while a token limit is known (job-runner)
      this.#tokensSent += tokens;
      this.#requestsSent++;
    }
    if (this.#firstSendAt === 0) this.#firstSendAt = this.#now();
    this.#seconds.sent(this.#now());
  }

  #learnFromHeaders(rl: RateLimitInfo | null): void {
    if (!rl) return;
    const now = this.#now();
    const said = limitsFromHeaders(rl);
    if (said) {
      // a quota said only on a 429 says nothing of what answers carry (the strays' rule, rateLimitedBy)
      if (!rl.inBody) this.#headersSeen = true;
      this.#saidOnRefusal = rl.inBody === true;
      const before = this.board.learned();
      const changed = before?.source !== 'headers' || before.rpm !== said.rpm || before.tpm !== said.tpm;
      if (changed || now - before.at > 60_000) this.board.learn({ ...said, source: 'headers', at: now });
    }
    // remaining 0: wait for the next request's units to come back, not for the whole budget.
    const waitRequests = refillIntervalMs(said?.rpm ?? null, rl.remainingRequests, rl.resetRequestsMs, rl.limitRequests);
    // what a request of this lane weighs, once one was weighed (job-runner weighs them while a token limit is known)
    const weight = this.#requestsSent > 0 ? this.#tokensSent / this.#requestsSent : 1;
    const waitTokens = refillIntervalMs(said?.tpm ?? null, rl.remainingTokens, rl.resetTokensMs, rl.limitTokens, weight);
    const wait = Math.max(waitRequests ?? 0, waitTokens ?? 0);
    if (wait > 0) this.board.pause(now + wait);
  }
}
