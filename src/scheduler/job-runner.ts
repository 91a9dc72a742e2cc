import { answerKind, type FinishReason, INCOMPLETE_WARNING } from '../provider/finish.js';
import { refusesEndpoint, refusesSharedParameter } from '../provider/classify.js';
import { ProviderError, triedError, type CompletionResult, type Provider } from '../provider/types.js';
import type { AttemptOutcome, AttemptRecord, ClaimedJob, JobQueue, Usage } from '../store/types.js';
import type { JobItems } from '../store/job-items.js';
import { decide, isOutageType, type Decision } from './decide.js';
import { type BilledAnswer, FAILED_JOBS_NAMED, type RefusedParameter, type SchedulerListener } from './events.js';
import type { InFlightRequests } from './in-flight.js';
import type { Lane } from './lane.js';
import { checkAnswer, cutOffRoom } from '../provider/structured-output.js';
import type { OutageBreaker } from './outage.js';
import type { PaceTicket } from './pace/window-pacer.js';
import type { Semaphore } from './semaphore.js';
import type { RunCounters } from './stats.js';
import { budgetedCompletionTokens, estimatePromptTokens, loadTokenizerSoon, tokenizerLoaded } from '../provider/tokens.js';
import { mayBeBilled } from '../pricing/billing.js';
import type { Hold, RunMoney, Unholdable } from './run-money.js';
import { sleep } from './wait.js';
import { neverLeft } from '../provider/unreachable.js';
import type { UnneededJobs } from './unneeded-jobs.js';
import { duration, int } from '../report/format.js';

/** Everything one job needs from its run. */
export interface JobContext {
  /** The changes one job's tries make (the run's store: each asked again after a transient failure). */
  readonly store: Pick<JobQueue, 'startRetry' | 'complete' | 'recordAttempt' | 'fail'>;
  readonly provider: Provider;
  readonly lanes: { get(model: string): Lane };
  readonly breaker: OutageBreaker;
  readonly slots: Semaphore;
  readonly inFlight: InFlightRequests;
  readonly counters: RunCounters;
  /**
   * Keys of the jobs whose counted try has not gone out, with how many of the run's claims of each
   * are so (two when it claimed a job again whose first claim lapsed): a job is in it from its claim
   * until it sends, and again once a retry is counted (`JobRun.#unsent`).
   */
  readonly heldUnsent: Map<string, number>;
  /**
   * Keys of the jobs in hand that no item needs any more (the heartbeat says: an enqueue moved their
   * items to other requests, or `forget` removed them): not sent again, handed back, and dropped.
   */
  readonly unneeded: Pick<UnneededJobs, 'has' | 'signal'>;
  /** What each try costs, and the --budget reservations. */
  readonly money: RunMoney;
  readonly emit: SchedulerListener;
  readonly runId: string;
  readonly maxAttempts: number;
  readonly leaseMs: number;
  /** First backoff between counted tries; doubles each time, randomized x1-2. */
  readonly retryDelayMs: number;
  readonly maxRetryDelayMs: number;
  /** Soft stop: no new request goes out, waits end. */
  readonly stopSignal: AbortSignal;
  readonly now: () => number;
  readonly random: () => number;
  /** Called once with a run-fatal error; the run stops. */
  readonly onFatal: (error: ProviderError, refused: RefusedParameter | null) => void;
  /** The job's lane was just closed by this error (its model's quota is spent): said once (run.ts). */
  readonly onLaneClosed: (lane: Lane, error: ProviderError) => void;
  /** A local resource ran out (EMFILE): lower concurrency. */
  readonly onLocalLimit: (error: ProviderError) => void;
  /** The next request did not fit the budget: the run stops taking jobs. */
  readonly onBudgetReached: () => void;
  /** A job starts backing off before a retry: it holds no place in hand meanwhile. */
  readonly onBackoff: () => void;
  /** A 429 paused the job's lane until then (ms epoch): a long pause is told (run.ts). */
  readonly onRateLimitPause: (untilMs: number, error: ProviderError) => void;
  /** Whether the lease of a job taken or renewed at `since` is surely still the run's (run.ts). */
  readonly holds: (since: number) => boolean;
  /** The run holds all it will get: the queue had nothing more to give its last claim, or --limit is reached (run.ts). */
  readonly nothingLeftToClaim: () => boolean;
  /** The first item of a job, and whether more share it: a failed job is named by its document. */
  readonly itemsOf: (key: string) => Promise<JobItems>;
}

/**
 * How a job left this run. `unsent`: stopped before its current try went out; it goes back to
 * pending with that try's attempt given back. `interrupted`: stopped after its last try was written
 * down; it goes back to pending as it is. `lapsed`: its lease may have run out before its try went
 * out (the run was frozen); handed back at once, its attempt given back, unless another run took it.
 * `lapsed-tried`: the same while backing off before a retry; handed back with its tries as they are.
 * `closed`: its lane was closed (`Lane.close`: the model's quota spent), or no item needs the job
 * any more (`JobContext.unneeded`); handed back at once, the attempt of a try that did not go out
 * given back (`closed-unsent`), that of one refused written down as not counted.
 */
export type JobOutcome = 'done' | 'failed' | 'unsent' | 'interrupted' | 'lapsed' | 'lapsed-tried' | 'closed' | 'closed-unsent';

/** What one job has been through in this run, across its tries. */
interface JobTally {
  /** Outage-type failures that did not use up an attempt. */
  uncountedOutages: number;
  /** When the first of them happened (ms epoch). */
  firstUncountedAt: number;
  /** 401/403 answers to its tries. */
  authRefusals: number;
  /** When the first of them was sent (ms epoch). */
  firstAuthRefusedSentAt: number;
  /** Refusals of a shared parameter before any answer (`FailureFacts.earlyParameterRefusals`). */
  parameterRefusals: number;
}

/**
 * Take one claimed job to the end of its life in this run: done, failed, or handed back. A plain
 * loop: wait for a place (lane pace, outage breaker, concurrency slot), send, and on failure apply
 * what `decide` says. The result of each try is written to the store before the next thing
 * happens. Never throws for a provider error.
 */
export async function runJob(job: ClaimedJob, ctx: JobContext): Promise<JobOutcome> {
  const lane = ctx.lanes.get(job.model);
  lane.inHand++;
  const run = new JobRun(job, lane, ctx);
  try {
    return await run.run();
  } finally {
    lane.inHand--;
    run.unsent = false;
  }
}

class JobRun {
  static #made = 0;
  /** Which job this is of those the run took: the one claimed last probes an outage first (`OutageBreaker.gate`). */
  readonly #order = JobRun.#made++;
  #attempt: number;
  readonly #tally: JobTally = {
    uncountedOutages: 0,
    firstUncountedAt: 0,
    authRefusals: 0,
    firstAuthRefusedSentAt: 0,
    parameterRefusals: 0,
  };
  #tokens: { prompt: number; weight: number } | null = null;
  /** A try of this job failed as an outage does: it probes the provider after jobs that did not (`OutageBreaker.gate`). */
  #outageFailed = false;
  /** Tries of this job cut by the timeout: a long document gets more time on each. */
  #timeouts = 0;
  /** The --budget reservation of the try in flight. */
  #hold: Hold = { usd: 0 };

  /** When the job's lease was taken (its claim, just before) or last renewed by this job (a retry). */
  #leasedAt: number;

  constructor(
    readonly job: ClaimedJob,
    readonly lane: Lane,
    readonly ctx: JobContext,
  ) {
    this.#attempt = job.attempts;
    this.#leasedAt = ctx.now();
    // the claim counted an attempt; until the request goes out, a death of the run gives it back
    this.unsent = true;
  }

  async run(): Promise<JobOutcome> {
    const { ctx, job } = this;
    // a request the budget can never hold fails before it takes a place in the pace
    const unbounded = ctx.money.unbounded(job);
    if (unbounded) {
      await this.#fail(`not sent: ${unbounded.refused}`, null, null, ctx.now());
      return 'failed';
    }
    for (;;) {
      let place: Place | null;
      try {
        place = await this.#admit();
      } catch (error) {
        if (ctx.stopSignal.aborted) return 'unsent';
        throw error;
      }
      if (place === null) return 'closed-unsent';
      // Under --budget the request's worst case is reserved in the store before it leaves.
      let hold: Hold | Unholdable | null;
      try {
        hold = await ctx.money.hold(job, ctx.stopSignal);
      } catch (error) {
        this.#giveBack(place);
        if (ctx.stopSignal.aborted) return 'unsent';
        throw error;
      }
      if (hold === null) {
        this.#giveBack(place);
        ctx.onBudgetReached();
        return 'unsent';
      }
      if ('refused' in hold) {
        this.#giveBack(place);
        // frozen past the lease while it waited for the budget: the job may be another's now
        if (!ctx.holds(this.#leasedAt)) return 'lapsed';
        await this.#fail(`not sent: ${hold.refused}`, null, null, ctx.now());
        return 'failed';
      }
      // The run was frozen past the lease (it waited for its place or its reservation meanwhile):
      // another run may have taken the job, and sent it.
      if (!ctx.holds(this.#leasedAt)) {
        this.#giveBack(place);
        await ctx.money.giveBack(hold);
        return 'lapsed';
      }
      // no item needs it since (the reservation may have waited for this run's requests to end)
      if (ctx.unneeded.has(job.key)) {
        this.#giveBack(place);
        await ctx.money.giveBack(hold);
        return 'closed-unsent';
      }
      this.#hold = hold;
      let decision: 'done' | Decision;
      try {
        decision = await this.#send(place);
      } finally {
        ctx.money.settled(hold);
      }
      if (decision === 'done') return 'done';
      if (decision.kind === 'fail') return 'failed';
      if (decision.kind === 'stop') return 'interrupted';
      if (decision.kind === 'closeLane') return 'closed';
      ctx.counters.backingOff++;
      // A 429's wait is the lane's pause: like a wait on the pace, it holds no room in hand. Any
      // other backoff holds none either (Lanes.saturated).
      if (decision.pauseLane) this.lane.waitingOnPace++;
      else this.lane.backingOff++;
      ctx.onBackoff();
      try {
        // a backoff (up to two minutes) ends when the lane closes, or no item needs the job any more:
        // the job goes back, its tries as they are
        await sleep(decision.delayMs, AbortSignal.any([ctx.stopSignal, this.lane.closing, ctx.unneeded.signal(job.key)]));
      } catch {
        return ctx.stopSignal.aborted ? 'interrupted' : 'closed';
      } finally {
        ctx.counters.backingOff--;
        if (decision.pauseLane) this.lane.waitingOnPace--;
        else this.lane.backingOff--;
      }
      // Frozen past the lease while backing off: another run, or this one's own claim loop, may hold
      // the job now and send it (the store's startRetry cannot tell this claim from a newer one of
      // the same run).
      if (!ctx.holds(this.#leasedAt)) return 'lapsed-tried';
      // its items moved to other requests meanwhile: no retry, the store drops it once handed back
      if (ctx.unneeded.has(job.key)) return 'closed';
      const renewedAt = ctx.now();
      const raised = await ctx.store.startRetry(job.key, ctx.runId, renewedAt, renewedAt + ctx.leaseMs);
      if (raised === null) return 'interrupted'; // lost the lease
      this.unsent = true;
      this.#attempt = raised;
      this.#leasedAt = renewedAt;
    }
  }

  /**
   * Wait until the request may leave: the lane's pace and pause first (a paused lane holds no slot),
   * then the outage breaker, then a concurrency slot, then the lane once more, atomically taking
   * its place. Rejects only when the run stops; null once the lane is closed (`Lane.close`).
   */
  async #admit(): Promise<Place | null> {
    const { ctx, lane } = this;
    const c = ctx.counters;
    c.waiting++;
    // the outage probe is for a job that has not failed as an outage does (OutageBreaker.gate)
    const order = this.#outageFailed ? null : this.#order;
    ctx.breaker.admitting(order);
    try {
      let wait = lane.pauseLeft();
      for (;;) {
        if (wait > 0) {
          // Waiting on the lane's pace or pause holds no slot, and does not count against the
          // room in hand: a slow lane must not keep other models from being claimed.
          lane.waitingOnPace++;
          try {
            await sleep(wait, ctx.stopSignal);
          } finally {
            lane.waitingOnPace--;
          }
        }
        if (lane.closedBy || ctx.unneeded.has(this.job.key)) return null;
        let tokens = this.#weight();
        if (tokens === null) {
          // the tokenizer, never loaded in a turn that holds answers not yet committed (loadTokenizerSoon)
          await loadTokenizerSoon();
          tokens = this.#weight(true)!;
        }
        const over = lane.firstOversize(tokens);
        if (over !== null) {
          ctx.emit('warning', {
            message:
              `a request of ${int(tokens)} tokens (prompt + max_tokens) to ${lane.model} is more than its limit of ${int(over)} tokens a minute: ` +
              `such requests go one at a time, each about ${duration((60 * tokens) / over)} after the last (lower --max-tokens, or raise --tpm if the provider allows it)`,
          });
        }
        const probe = await ctx.breaker.gate(ctx.stopSignal, order);
        try {
          await ctx.slots.acquire();
        } catch (error) {
          if (probe) ctx.breaker.probeAbandoned();
          throw error;
        }
        if ((!probe && ctx.breaker.isOpen) || lane.closedBy || ctx.unneeded.has(this.job.key)) {
          // The breaker opened while this one waited for a slot: only its probe may go out now
          // (the requests queued for slots as the outage opened all went out at once with it).
          // Or its lane was closed, or its items moved, meanwhile: it goes back (above).
          ctx.slots.release();
          if (probe) ctx.breaker.probeAbandoned();
          wait = 0;
          continue;
        }
        let got: PaceTicket | number | undefined;
        try {
          got = await lane.tryTake(tokens);
          ctx.stopSignal.throwIfAborted();
        } catch (error) {
          if (got !== undefined && typeof got !== 'number') lane.ended(got);
          ctx.slots.release();
          if (probe) ctx.breaker.probeAbandoned();
          throw error;
        }
        if (typeof got !== 'number') return { ticket: got, probe, tokens };
        ctx.slots.release();
        if (probe) ctx.breaker.probeAbandoned();
        wait = Math.max(1, got);
      }
    } finally {
      c.waiting--;
      ctx.breaker.admitted(order);
    }
  }

  #unsent = false;

  /** Whether this job's counted try has not gone out: kept in the run's `heldUnsent`, which each heartbeat stores. */
  set unsent(unsent: boolean) {
    if (unsent === this.#unsent) return;
    this.#unsent = unsent;
    const held = this.ctx.heldUnsent;
    const claims = (held.get(this.job.key) ?? 0) + (unsent ? 1 : -1);
    if (claims > 0) held.set(this.job.key, claims);
    else held.delete(this.job.key);
  }

  /** A place taken for a request that will not be sent. */
  #giveBack(place: Place): void {
    this.ctx.slots.release();
    this.lane.ended(place.ticket);
    if (place.probe) this.ctx.breaker.probeAbandoned();
  }

  /** Send once, record the result; 'done', or what to do about the failure. */
  async #send(place: Place): Promise<'done' | Decision> {
    const { ctx, job, lane } = this;
    const c = ctx.counters;
    const startedAt = ctx.now();
    this.unsent = false;
    c.inFlight++;
    lane.inFlight++;
    c.requests++;
    if (place.probe) c.probes++;
    ctx.emit('job:start', { key: job.key, attempt: this.#attempt, model: job.model });
    const request = ctx.inFlight.start(lane, job.request, startedAt, this.#timeouts);
    let result: CompletionResult;
    try {
      result = await ctx.provider.complete(job.request, { signal: request.signal });
    } catch (error) {
      c.inFlight--;
      lane.inFlight--;
      lane.ended(place.ticket);
      ctx.inFlight.end(request);
      ctx.slots.release();
      if (!(error instanceof ProviderError)) {
        if (place.probe) ctx.breaker.probeAbandoned();
        if (request.signal.aborted) {
          await this.#record(startedAt, null, 'released', 'stopped while the request was in flight', false, true);
          return { kind: 'stop' };
        }
        throw error;
      }
      return this.#failed(error, startedAt, place.probe);
    }
    c.inFlight--;
    lane.inFlight--;
    lane.ended(place.ticket);
    ctx.inFlight.end(request);
    const endedAt = ctx.now();
    ctx.breaker.success({ sentAt: startedAt, probe: place.probe });
    c.heardFromProvider = true;
    c.lastAnsweredSentAt = Math.max(c.lastAnsweredSentAt, startedAt);
    if (startedAt > c.lastAuthRefusedSentAt) c.authInARow = 0;
    const usage = result.usage;
    lane.answered(result.rateLimit, request.stalled ? null : endedAt - startedAt, usage.completionTokens);
    // Providers reserve prompt + max_tokens when a request arrives, so only the prompt part is
    // corrected: our tokenizer may count the prompt differently from the provider's.
    if (this.#tokens) lane.board.settle(place.ticket, place.tokens - this.#tokens.prompt + usage.promptTokens);
    // an answer that is not the JSON its request asks for (response_format) is a failed try, not done;
    // it was billed, and its try records what it cost
    const checked = checkAnswer(job.request, result.output, result.finishReason ?? null, result.status);
    if (checked.failure !== null) {
      ctx.slots.release();
      c.promptTokens += usage.promptTokens;
      c.completionTokens += usage.completionTokens;
      return this.#failed(checked.failure, startedAt, false, usage);
    }
    const attempt: AttemptRecord = {
      key: job.key,
      runId: ctx.runId,
      attempt: this.#attempt,
      startedAt,
      endedAt,
      status: result.status,
      outcome: 'done',
      error: null,
      usage,
      ...ctx.money.answered(job, usage, this.#hold),
    };
    // The slot is held until the answer is committed: at any moment at most --concurrency answers are
    // paid for and not yet stored, which bounds what a crash can make us pay twice.
    let stored: boolean;
    try {
      const completion = { owner: ctx.runId, output: checked.output, response: result.body, usage, attempt };
      stored = await ctx.store.complete(job.key, completion);
    } finally {
      ctx.slots.release();
    }
    // Another run already finished it (our lease had lapsed): its answer stands, ours is not counted
    // as done; it was paid for all the same, which the summary says
    if (!stored) {
      c.answersNotStored++;
      return 'done';
    }
    c.done++;
    c.promptTokens += usage.promptTokens;
    c.completionTokens += usage.completionTokens;
    c.finished(endedAt, usage.promptTokens + usage.completionTokens);
    const finishReason = result.finishReason ?? null;
    this.#noteIncomplete(finishReason, checked.output, usage.completionTokens);
    const costUsd = attempt.costUsd ?? null;
    if (costUsd === null) c.unpricedAnswers++;
    ctx.emit('job:done', {
      key: job.key,
      attempt: this.#attempt,
      latencyMs: endedAt - startedAt,
      usage,
      output: checked.output,
      costUsd,
      finishReason,
    });
    return 'done';
  }

  /**
   * An answer that is not the whole answer is kept (it was billed, and the same request would most
   * likely end the same way), counted, and said once per run the first time one comes.
   */
  #noteIncomplete(finish: FinishReason | null, output: string, completionTokens: number): void {
    const kind = answerKind(finish, output);
    if (kind === null) return;
    const c = this.ctx.counters;
    if (kind === 'cutOff') c.cutOffRoom = Math.max(c.cutOffRoom, cutOffRoom(this.job.request, completionTokens));
    const said = kind === 'cutOff' && this.ctx.provider.name === 'mock' ? 'mockCutOff' : kind;
    if (c[kind]++ === 0) this.ctx.emit('warning', { message: INCOMPLETE_WARNING[said] });
  }

  /**
   * Gather the facts, ask `decide`, and apply its answer to the store, the lane and the run.
   * `answered`: what the try's answer used, when one came that was not what was asked (it was billed: its attempt says so).
   */
  async #failed(error: ProviderError, startedAt: number, probe: boolean, answered: Usage | null = null): Promise<Decision> {
    const { ctx, job, lane } = this;
    const c = ctx.counters;
    const now = ctx.now();
    const tally = this.#tally;
    if (error.status !== null) c.heardFromProvider = true;
    if (refusesEndpoint(error.status) && c.done === 0) c.early404s++;
    // the same parameter refused for this model's first requests: its jobs share it, and would all fail
    let earlyRefusals = 0;
    if (c.done === 0 && refusesSharedParameter(error)) {
      const which = `${job.model}\n${error.param}`;
      const jobs = c.earlyRefusals.get(which) ?? new Set<string>();
      jobs.add(job.key);
      c.earlyRefusals.set(which, jobs);
      earlyRefusals = jobs.size;
      tally.parameterRefusals++;
    }
    if (error.reason === 'auth') {
      c.authInARow++;
      c.lastAuthRefusedSentAt = Math.max(c.lastAuthRefusedSentAt, startedAt);
      if (tally.authRefusals++ === 0) tally.firstAuthRefusedSentAt = startedAt;
    }
    if (error.reason === 'timeout') this.#timeouts++;
    const outageType = isOutageType(error.reason);
    if (outageType) this.#outageFailed = true;
    // the request never reached the provider: no outage of theirs
    const unreachable = neverLeft(error);
    let outage = false;
    // The last jobs of the run, failing after the provider has answered the others, or a job whose
    // earlier tries failed so while it answered others (`ClaimedJob.failsOnItsOwn`): taken for an
    // outage, documents that always get a 5xx or a reset would be probed uncounted until
    // --max-outage ended the run with them pending, every run. Their failures are their own: they
    // use their attempts and are no outage evidence (a probe among them only gives its turn back).
    // Once other jobs' failures have opened an outage, or begun a row of them that may open one, such
    // a job waits it out with them: it failed on its attempts while the provider was down (its own
    // failures never start a row, so alone they stay its own).
    const ownFailure =
      (c.done > 0 && ctx.nothingLeftToClaim()) || (job.failsOnItsOwn === true && !ctx.breaker.isOpen && !ctx.breaker.failingInARow);
    if (outageType && !unreachable && ownFailure) {
      if (probe) ctx.breaker.probeAbandoned();
    } else if (outageType) {
      outage = ctx.breaker.failure(error.message, { sentAt: startedAt, unreachable, probe });
    } else if (error.reason === 'local') {
      // This machine's limit says nothing about the provider.
      if (probe) ctx.breaker.probeAbandoned();
    } else {
      ctx.breaker.neutral();
    }
    const rateLimit = error.reason === 'rate_limit' ? lane.rateLimitedBy(error, startedAt) : null;
    if (rateLimit?.lanePaused && rateLimit.waitMs > 0) ctx.onRateLimitPause(now + rateLimit.waitMs, error);
    const decision = decide({
      error,
      attempt: this.#attempt,
      maxAttempts: ctx.maxAttempts,
      answered: c.done > 0,
      early404s: c.early404s,
      earlyParameterRefusals: earlyRefusals,
      ownParameterRefusals: tally.parameterRefusals,
      authInARow: c.authInARow,
      ownAuthRefusals: tally.authRefusals,
      answeredSinceRefused: tally.authRefusals > 0 && c.lastAnsweredSentAt > tally.firstAuthRefusedSentAt,
      outage,
      uncountedOutages: tally.uncountedOutages,
      providerUpSince: tally.uncountedOutages > 0 && ctx.breaker.lastSuccessAt > tally.firstUncountedAt,
      outageAgeMs: tally.uncountedOutages > 0 ? now - tally.firstUncountedAt : 0,
      rateLimitWaitMs: rateLimit?.waitMs ?? 0,
      rateLimitPausedLane: rateLimit?.lanePaused ?? false,
      retryAfterMs: error.reason === 'rate_limit' ? null : error.retryAfterMs,
      nextProbeInMs: ctx.breaker.nextProbeAt - now,
      retryDelayMs: ctx.retryDelayMs,
      maxRetryDelayMs: ctx.maxRetryDelayMs,
      random: ctx.random(),
    });
    const billed = mayBeBilled(error);
    const billNote = error.reason === 'timeout' ? ' (the provider may bill this try)' : '';
    switch (decision.kind) {
      case 'stop':
        await this.#record(startedAt, error.status, 'not_counted', error.message, false, billed, answered);
        ctx.onFatal(error, earlyRefusals > 0 ? { param: error.param!, model: job.model } : null);
        return decision;
      case 'closeLane':
        await this.#record(startedAt, error.status, 'not_counted', error.message, false, billed, answered);
        if (lane.close(error)) ctx.onLaneClosed(lane, error);
        return decision;
      case 'fail': {
        const a = this.#attemptRecord(startedAt, error.status, 'failed', triedError(error) + billNote, billed, answered);
        await this.#fail(decision.message, error.status, a, now);
        return decision;
      }
      case 'retry': {
        if (error.reason === 'rate_limit') {
          c.rateLimited++;
          c.lastRateLimited = error.message;
        }
        if (rateLimit?.lanePaused === false) c.strayRateLimited++;
        if (decision.shrink) ctx.onLocalLimit(error);
        if (!decision.counted && outageType) {
          if (tally.uncountedOutages++ === 0) tally.firstUncountedAt = now;
        }
        const a = await this.#record(
          startedAt,
          error.status,
          decision.counted ? 'retry' : 'not_counted',
          triedError(error) + billNote,
          decision.counted,
          billed,
          answered,
        );
        if (decision.counted) c.retried++;
        ctx.emit('job:retry', {
          key: job.key,
          attempt: this.#attempt,
          status: error.status,
          reason: error.reason,
          error: error.message,
          delayMs: decision.delayMs,
          counted: decision.counted,
          ...this.#billed(a),
        });
        return decision;
      }
    }
  }

  /** Fail the job, its last try `a` (null: none, it was not sent), and say so. */
  async #fail(message: string, status: number | null, a: AttemptRecord | null, now: number): Promise<void> {
    const { ctx, job } = this;
    const c = ctx.counters;
    await ctx.store.fail(job.key, ctx.runId, message, a, now);
    c.failed++;
    c.finished(now, 0);
    // a document's name says which one failed, where the job's hash needs llmq show to tell
    const items = c.failed <= FAILED_JOBS_NAMED ? await ctx.itemsOf(job.key).catch(() => null) : null;
    ctx.emit('job:failed', {
      key: job.key,
      attempt: this.#attempt,
      status,
      error: message,
      item: items?.ids[0] ?? null,
      moreItems: items?.more ?? false,
      ...(a ? this.#billed(a) : {}),
    });
  }

  /**
   * A try's answer that was billed and not kept, as its `job:retry` or `job:failed` carries it; nothing
   * when no answer came. One without a price makes the run's cost unknown, as an unpriced answer does.
   */
  #billed(a: AttemptRecord): { billed?: BilledAnswer } {
    if (a.usage === null) return {};
    const costUsd = a.costUsd ?? null;
    if (costUsd === null) this.ctx.counters.unpricedAnswers++;
    return { billed: { usage: a.usage, costUsd } };
  }

  /**
   * The request's token weight, counted only when its lane paces tokens (the tokenizer is big); null
   * when that needs the tokenizer and it is not loaded yet.
   */
  #weight(loadTried = false): number | null {
    if (this.lane.limits().tpm === null) return 0;
    if (!this.#tokens) {
      if (!loadTried && !tokenizerLoaded()) return null;
      try {
        const request = JSON.parse(this.job.request) as Parameters<typeof estimatePromptTokens>[0];
        const prompt = estimatePromptTokens(request);
        this.#tokens = { prompt, weight: prompt + budgetedCompletionTokens(request) };
      } catch {
        // Never stop a run over an estimate: a rough one (4 characters a token) paces it.
        const prompt = Math.ceil(this.job.request.length / 4);
        this.#tokens = { prompt, weight: prompt };
      }
    }
    return this.#tokens.weight;
  }

  /**
   * A try's record. `usage`: what its answer used, when one came and was not kept (billed at its cost);
   * without one, `billed`: its request reached the provider, which may bill it.
   */
  #attemptRecord(
    startedAt: number,
    status: number | null,
    outcome: AttemptOutcome,
    error: string | null,
    billed: boolean,
    usage: Usage | null = null,
  ): AttemptRecord {
    return {
      key: this.job.key,
      runId: this.ctx.runId,
      attempt: this.#attempt,
      startedAt,
      endedAt: this.ctx.now(),
      status,
      outcome,
      error,
      usage,
      ...(usage
        ? this.ctx.money.answered(this.job, usage, this.#hold)
        : this.ctx.money.unanswered(this.job, billed && !this.ctx.provider.free, this.#hold)),
    };
  }

  async #record(
    startedAt: number,
    status: number | null,
    outcome: AttemptOutcome,
    error: string,
    count: boolean,
    billed: boolean,
    usage: Usage | null = null,
  ): Promise<AttemptRecord> {
    const record = this.#attemptRecord(startedAt, status, outcome, error, billed, usage);
    // a try this run stopped says nothing about the job: its attempt row says why, the job keeps its last error
    await this.ctx.store.recordAttempt(record, { countAttempt: count, error: outcome === 'released' ? null : error });
    return record;
  }
}

/** A place in the lane's pace and a concurrency slot, held by a request about to leave. */
interface Place {
  readonly ticket: PaceTicket;
  readonly probe: boolean;
  readonly tokens: number;
}
