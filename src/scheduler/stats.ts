import type { RunStats } from '../store/types.js';
import type { ProgressSnapshot, SharedProgress } from './events.js';
import type { LaneSnapshot } from './lane.js';

const WINDOW_SECONDS = 30;
/** No ETA before the run has this long a pace to go on. */
const ETA_AFTER_MS = 3000;

/** Counters of one run and a sliding window of finished jobs for its rate and ETA. */
export class RunCounters {
  done = 0;
  failed = 0;
  retried = 0;
  requests = 0;
  /** Of `requests`, the outage's probes (`OutageBreaker.gate`): one at a time while the provider was down; a failed one is no retry. */
  probes = 0;
  rateLimited = 0;
  /** Of them, stray 429s: saying no limit, from a provider whose answers say theirs, taken for its noise (`Lane.rateLimitedBy`). */
  strayRateLimited = 0;
  /** Answers of a model without a price: the run's cost is then unknown, never the sum of the others. */
  unpricedAnswers = 0;
  /** 404s seen before the first answer (a wrong endpoint shows as a run of them). */
  early404s = 0;
  /**
   * Before the first answer, the jobs refused for a request parameter a model's jobs share
   * (`refusesSharedParameter`), by model and parameter: each is counted on its own, so two models
   * refusing two parameters in turn still add up. Jobs, not refusals: one job refused again is no
   * sign that the others share its parameter (a Batch line's own `response_format`).
   */
  readonly earlyRefusals = new Map<string, Set<string>>();
  /** 401/403 answers with no success between them of a request sent after the last of them (answers to requests out before a key was revoked say nothing of it now). */
  authInARow = 0;
  /** When the last request refused with a 401/403 was sent (ms epoch). */
  lastAuthRefusedSentAt = -Infinity;
  /** When the last request answered was sent (ms epoch). */
  lastAnsweredSentAt = -Infinity;
  /** Some HTTP response came in this run, an error's too: something listens where the run sends. */
  heardFromProvider = false;
  /** What the last 429 of the run said (its message), for the word on a run refused all along (`Run.#tellOnlyRefused`). */
  lastRateLimited: string | null = null;
  promptTokens = 0;
  completionTokens = 0;
  /** Answers cut off at max_tokens (finish_reason `length`). */
  cutOff = 0;
  /** The --max-tokens that asks them again with room: the most of twice what each had (at least 1,024). */
  cutOffRoom = 0;
  /** Answers that are a refusal or were stopped by the provider's content filter. */
  refused = 0;
  /** Answers that ended by themselves with no text at all (`answerKind`). */
  empty = 0;
  /** Answers paid for and not stored: their job answered by another run meanwhile (this run frozen past its leases), or forgotten. */
  answersNotStored = 0;
  inFlight = 0;
  waiting = 0;
  backingOff = 0;
  total = 0;
  alreadyDone = 0;
  #paused: ProgressSnapshot['paused'] = null;
  /**
   * When the run was paused (a rate limit's pause, an outage) within the rate's window: seconds of
   * them in which nothing finished are left out of its pace. Counted in, the pace stayed low for the
   * 30 s after a pause ended, and the ETA with it, though the run was back at its pace at once.
   */
  readonly #pauses: Array<{ from: number; to: number | null }> = [];
  /** The queue and the other runs working it, as last read; null while this run works it alone. */
  shared: SharedRead | null = null;
  readonly startedAt: number;
  readonly #now: () => number;
  // per-second buckets of [jobs finished, tokens used]
  readonly #buckets = new Map<number, [number, number]>();

  /** `now`: the run's clock, for when a pause begins and ends. */
  constructor(startedAt: number, now: () => number = Date.now) {
    this.startedAt = startedAt;
    this.#now = now;
  }

  get paused(): ProgressSnapshot['paused'] {
    return this.#paused;
  }

  set paused(pause: ProgressSnapshot['paused']) {
    const t = this.#now();
    if (pause && !this.#paused) this.#pauses.push({ from: t, to: null });
    else if (!pause && this.#paused) this.#pauses.at(-1)!.to = t;
    this.#paused = pause;
    while (this.#pauses.length && this.#pauses[0]!.to !== null && this.#pauses[0]!.to < t - WINDOW_SECONDS * 1000) this.#pauses.shift();
  }

  finished(now: number, tokens: number): void {
    const second = Math.floor(now / 1000);
    const b = this.#buckets.get(second) ?? [0, 0];
    b[0]++;
    b[1] += tokens;
    this.#buckets.set(second, b);
    for (const s of this.#buckets.keys()) if (s < second - WINDOW_SECONDS) this.#buckets.delete(s);
  }

  /**
   * Jobs/s (done and failed) and tokens/s over the last 30 s, or since the start if shorter. Not
   * over a whole second at least: a run of 0.1 s showed 2 jobs/s on its last line where its summary
   * said 21 (snapshots come every half second; the 50 ms floor only keeps a first one sane).
   */
  rates(now: number): { jobs: number; tokens: number } {
    // The window starts where its first bucket does: the jobs of that whole second are counted, so its
    // whole time is too. From mid-second, a pause's idle seconds left out, the time shrank towards
    // nothing while that bucket's jobs stayed: 30 s into an outage a run of 12 jobs/s said 49.
    const from = Math.floor(Math.max(this.startedAt, now - WINDOW_SECONDS * 1000) / 1000);
    const since = Math.max(this.startedAt, from * 1000);
    const seconds = Math.max(0.05, (now - since - this.#idlePausedMs(since, now)) / 1000);
    let jobs = 0,
      tokens = 0;
    for (const [s, [j, t]] of this.#buckets)
      if (s >= from) {
        jobs += j;
        tokens += t;
      }
    return { jobs: jobs / seconds, tokens: tokens / seconds };
  }

  /**
   * Of [since, now], the time the run was paused in seconds that finished nothing. A second with
   * finishes counts whole: one lane paused while another answered is no pause of the run's pace.
   */
  #idlePausedMs(since: number, now: number): number {
    let ms = 0;
    for (const pause of this.#pauses) {
      const to = Math.min(pause.to ?? now, now);
      for (let t = Math.max(pause.from, since); t < to; ) {
        const second = Math.floor(t / 1000);
        const end = Math.min(to, (second + 1) * 1000);
        if (!this.#buckets.has(second)) ms += end - t;
        t = end;
      }
    }
    return ms;
  }

  snapshot(now: number, lanes: readonly LaneSnapshot[] = [], concurrency = 0): ProgressSnapshot {
    const { jobs, tokens } = this.rates(now);
    const shared = this.#sharedNow(now, jobs);
    const left = shared ? shared.left : Math.max(0, this.total - this.done - this.failed);
    const perSecond = shared ? shared.jobsPerSecond : jobs;
    return {
      startedAt: this.startedAt,
      now,
      total: this.total,
      alreadyDone: this.alreadyDone,
      done: this.done,
      failed: this.failed,
      retried: this.retried,
      inFlight: this.inFlight,
      waiting: this.waiting,
      backingOff: this.backingOff,
      requests: this.requests,
      rateLimited: this.rateLimited,
      promptTokens: this.promptTokens,
      completionTokens: this.completionTokens,
      jobsPerSecond: jobs,
      tokensPerSecond: tokens,
      // the first second's pace is a ramp (one answer in: 80,000 jobs looked like 22 hours); wait for a few
      // and none while the provider is down: the pace before the outage says nothing of when it ends
      // a rate limit's pause (a retry-after of an hour) is waited out before the pace goes on
      etaSeconds:
        left === 0
          ? 0
          : perSecond > 0 && now - this.startedAt >= ETA_AFTER_MS && this.paused?.reason !== 'outage'
            ? Math.max(0, (this.paused?.until ?? now) - now) / 1000 + left / perSecond
            : null,
      shared,
      paused: this.paused,
      lanes,
      concurrency,
    };
  }

  /**
   * The shared read carried forward to `now`: what this run finished since, and what the others
   * did at their pace, move from left to finished. What this run holds is left whatever the others' pace.
   */
  #sharedNow(now: number, ownPerSecond: number): SharedProgress | null {
    const s = this.shared;
    if (!s) return null;
    const held = this.inFlight + this.waiting + this.backingOff;
    const since = this.done + this.failed - s.ownFinished + (s.othersPerSecond * Math.max(0, now - s.at)) / 1000;
    const moved = Math.max(0, Math.min(Math.max(0, s.left - held), Math.round(since)));
    return { runs: s.otherRuns + 1, finished: s.finished + moved, left: s.left - moved, jobsPerSecond: ownPerSecond + s.othersPerSecond };
  }

  forStore(now: number, lanes: readonly LaneSnapshot[] = [], concurrency = 0): RunStats {
    return {
      done: this.done,
      failed: this.failed,
      retried: this.retried,
      requests: this.requests,
      rateLimited: this.rateLimited,
      strayRateLimited: this.strayRateLimited,
      promptTokens: this.promptTokens,
      completionTokens: this.completionTokens,
      jobsPerSecond: this.rates(now).jobs,
      concurrency,
      inFlight: this.inFlight,
      backingOff: this.backingOff,
      paused: this.paused,
      lanes: lanes.map((l) => ({
        model: l.model,
        rpm: l.rpm,
        tpm: l.tpm,
        requestsPerSecond: l.requestsPerSecond,
        inFlight: l.inFlight,
        pausedUntil: l.pausedUntil,
        rateLimited: l.rateLimited,
        boardDownSince: l.boardDownSince ?? null,
      })),
    };
  }
}

/** What a read of the queue and the runs' heartbeats said, while other runs work the queue too. */
export interface SharedRead {
  /** When it was read (ms epoch). */
  readonly at: number;
  /** Live runs working the queue besides this one. */
  readonly otherRuns: number;
  /** Their jobs per second together, as their last heartbeats said. */
  readonly othersPerSecond: number;
  /** Jobs the queue finished (done or failed) since this run started. */
  readonly finished: number;
  /** Pending and running jobs. */
  readonly left: number;
  /** This run's finished jobs then. */
  readonly ownFinished: number;
}
