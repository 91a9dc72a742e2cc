import { SetBackWatch } from './set-back.js';
import { WindowPacer, type PaceLimits, type PaceTicket } from './window-pacer.js';

/** Limits a lane learned from the provider, as remembered in the store and shared through Redis. */
export interface LearnedLimits {
  /** Per minute; null when the provider did not say. */
  readonly rpm: number | null;
  readonly tpm: number | null;
  /** `headers`: the provider said so; `429s`: found by backing off from rate-limit errors. */
  readonly source: 'headers' | '429s';
  /** ms epoch when learned. */
  readonly at: number;
}

/**
 * Where one lane's pace is kept: in this process, or in Redis for every run sharing the budget.
 * The lane decides the limits; the board only counts what was sent against them.
 */
export interface LaneBoard {
  /**
   * Take a place for one request of `tokens` under `limits` now, or say how many ms to wait first
   * (a pause counts too). Taking is atomic: two callers never both take the last place.
   */
  tryTake(tokens: number, limits: PaceLimits): Promise<PaceTicket | number> | PaceTicket | number;
  /** Correct a request's token count once its usage is known. */
  settle(ticket: PaceTicket, actualTokens: number): void;
  /** Hold a request's places as if it had been sent at `sentAt` (see WindowPacer.stretch). */
  stretch(ticket: PaceTicket, sentAt: number): void;
  /**
   * Count with this guard from now on (WindowPacer.setGuard). Optional: a board shared between
   * processes keeps GUARD_MS.
   */
  setGuard?(ms: number): void;
  /** Hold every request of the lane until `until` (ms epoch); only ever moves later. */
  pause(until: number): void;
  /** ms epoch until which the lane is paused, as last known. */
  pausedUntil(): number;
  /** Limits learned by any run sharing the board, as last known. */
  learned(): LearnedLimits | null;
  learn(limits: LearnedLimits): void;
  /** Bring pause and learned limits up to date (a no-op in process). */
  refresh(): Promise<void>;
  close(): Promise<void>;
}

/** The embedded board: one lane's pace in this process. */
export class LocalLaneBoard implements LaneBoard {
  readonly #pacer = new WindowPacer();
  readonly #now: () => number;
  #pausedUntil = 0;
  readonly #setBack = new SetBackWatch();
  #learned: LearnedLimits | null = null;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  tryTake(tokens: number, limits: PaceLimits): PaceTicket | number {
    const now = this.#now();
    const pausedUntil = this.pausedUntil();
    if (pausedUntil > now) return Math.ceil(pausedUntil - now);
    this.#pacer.setLimits(limits, now);
    const wait = this.#pacer.delay(tokens, now);
    return wait > 0 ? wait : this.#pacer.take(tokens, now);
  }

  settle(ticket: PaceTicket, actualTokens: number): void {
    this.#pacer.settle(ticket, actualTokens, this.#now());
  }

  stretch(ticket: PaceTicket, sentAt: number): void {
    this.#pacer.stretch(ticket, sentAt);
  }

  setGuard(ms: number): void {
    this.#pacer.setGuard(ms);
  }

  pause(until: number): void {
    if (until > this.pausedUntil()) this.#pausedUntil = until;
  }

  pausedUntil(): number {
    // a clock set back moves the pause back with it
    this.#pausedUntil += this.#setBack.by(this.#now());
    return this.#pausedUntil;
  }

  learned(): LearnedLimits | null {
    return this.#learned;
  }

  learn(limits: LearnedLimits): void {
    this.#learned = limits;
  }

  async refresh(): Promise<void> {}
  async close(): Promise<void> {}
}
