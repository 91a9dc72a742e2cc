import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { hostname } from 'node:os';
import { LlmqError, QueueGoneError } from '../errors.js';
import { ProviderError } from '../provider/types.js';
import type { ProgressSnapshot, RefusedParameter, RunSummary, SchedulerEventMap, SchedulerListener } from './events.js';
import { runJob, type JobContext } from './job-runner.js';
import { jobItems } from '../store/job-items.js';
import { InFlightRequests } from './in-flight.js';
import { LatencyStats } from './pace/latency.js';
import type { Lane } from './lane.js';
import { Lanes, localBoards } from './lanes.js';
import { sleep } from './wait.js';
import { OutageBreaker } from './outage.js';
import { batchOwnerGone, goneOwners, isProcessAlive, isRunProcessStopped, silentOwners, type Self } from '../run-owners.js';
import { uncollectedByEndpoint } from '../batches-uncollected.js';
import { Semaphore } from './semaphore.js';
import { RunCounters } from './stats.js';
import { budgetTooSmallForRequests, RunMoney } from './run-money.js';
import { loadPriceTable } from '../pricing/price-table.js';
import { UnneededJobs } from './unneeded-jobs.js';
import { duration, int, oneLine } from '../report/format.js';
import { STALE_RUN_MS } from '../report/status-cost.js';
import type { RunDeps, RunOptions, RunStore } from './run-queue.js';
import type { JobState, RunRow, RunStats, WrongEndpoint } from '../store/types.js';
import { retryingTransients } from './retrying-store.js';
import { StoreWaitNotice } from './store-wait-notice.js';
import { DiskFullNotice } from './disk-full-notice.js';
import { isDiskFull } from '../store/transient.js';
import { nobodyListens } from '../provider/unreachable.js';
import { stopNamesWrongEndpoint } from '../provider/classify.js';

/** A rate-limit pause at least this long is told (`paused`, `resumed`); shorter ones are the pace's business. */
const TOLD_PAUSE_MS = 3000;

/** Why a run stops before the queue is drained: a run-fatal provider error, a bug or a lost store, or the budget. */
type StopReason =
  | { readonly kind: 'fatal'; readonly error: ProviderError; readonly refused?: RefusedParameter | null; readonly abortInFlight?: boolean }
  | { readonly kind: 'error'; readonly error: unknown; readonly abortInFlight: boolean }
  | { readonly kind: 'budget' };

/**
 * One `llmq run`: the state machine of docs/architecture.md ("Leases", "Stop") as named steps.
 * `work` starts, then claims until drained, stopped or at the limit, then drains what is in hand and
 * finishes (hands back every job it holds). `beat` renews leases, `reclaim` takes back jobs of dead
 * runs; `stop` is the one way a run decides to end early.
 */
export class Run {
  readonly #deps: RunDeps;
  readonly #options: RunOptions;
  readonly #store: RunStore;
  readonly #now: () => number;
  readonly #concurrency: number;
  readonly #maxAttempts: number;
  readonly #leaseMs: number;
  readonly #heartbeatMs: number;
  readonly #limit: number;
  readonly #maxOutageMs: number;
  readonly #id: string;
  readonly #host: string;
  readonly #pid: number;
  readonly #emit: SchedulerListener;
  /** Aborted: take no new job, send no new request. */
  readonly #stopping = new AbortController();
  /** Aborted: cut the requests in flight too. */
  readonly #aborting = new AbortController();
  readonly #unlinks: Array<() => void> = [];
  readonly #startedAt: number;
  readonly #counters: RunCounters;
  readonly #breaker: OutageBreaker;
  readonly #slots: Semaphore;
  readonly #lanes: Lanes;
  readonly #inFlight: InFlightRequests;
  readonly #money: RunMoney;
  #fatal: ProviderError | null = null;
  /** What the first fatal stop was, when a shared request parameter refused caused it. */
  #refused: RefusedParameter | null = null;
  #internal: unknown = null;
  #reason: RunSummary['reason'] = 'drained';
  /** Jobs in hand, each until it is done, failed or handed back. */
  readonly #tasks = new Set<Promise<void>>();
  /** Jobs stopped before their current try went out: handed back with that attempt refunded. */
  readonly #unsent: string[] = [];
  /**
   * Keys of the jobs in hand whose counted try has not gone out, stored on each heartbeat: should this
   * run die, they get that attempt back (src/store/unsent.ts).
   */
  readonly #heldUnsent = new Map<string, number>();
  /** Jobs in hand no item needs any more (`JobContext.unneeded`), as the heartbeats said; kept while in hand. */
  readonly #unneeded = new UnneededJobs();
  /** Claims of each job this run holds: two when it claimed a job again whose first claim lapsed. */
  readonly #keysInHand = new Map<string, number>();
  #claimed = 0;
  /** Jobs the claims found with every attempt used, failed there (`ClaimResult.exhausted`). */
  #exhausted = 0;
  /**
   * Jobs a dying or silent run held as this one started, counted in its progress's total while it
   * waits for them: a resumed run's bar stood at 100% for seconds, then jumped back (7/7 to 11/14).
   */
  #mayComeBack = 0;
  /** The last claim of every model came back short: the queue has nothing more for this run now. */
  #queueEmpty = false;
  /** Set when room opens in hand (a job finished or began backing off); the loop waits on it instead of polling. */
  #roomSinceWait = false;
  #wake: () => void = () => {};
  /** The skipped models of claims that found nothing else to take, and when: no use asking again at once. */
  readonly #fruitless = new Map<string, number>();
  #beats = 0;
  /** When the last heartbeat that renewed the leases was made. */
  #lastBeat: number;
  /** When a heartbeat last came after the leases it renews had run out (see `#holds`). */
  #lapsedAt = 0;
  #timers: NodeJS.Timeout[] = [];
  #loweredConcurrency = false;
  /** Other live runs working the queue, as the last reclaim found them: the progress is then the queue's. */
  #otherRuns: readonly RunRow[] = [];
  /** Said that runs side by side share no pace (`#tellUnsharedPace`). */
  #unsharedPaceTold = false;
  /** The queue's finished jobs (done and failed) when this run started. */
  #finishedAtStart = 0;
  /** Other runs worked the queue since this one started (`#sharesQueue`). */
  #shared = false;

  constructor(deps: RunDeps, options: RunOptions) {
    this.#deps = deps;
    const diskFull = new DiskFullNotice((message) => this.#emit('warning', { message }));
    this.#store = retryingTransients(deps.store, {
      forAnswers: diskFull.waitUntil(this.#aborting.signal),
      forWork: diskFull.waitUntil(this.#stopping.signal),
      forStore: new StoreWaitNotice(
        (message) => this.#emit('warning', { message }),
        (options.leaseMs ?? 60_000) / 2,
        // a run of this machine stopped inside a write holds the lock: named (SQLite's stoppedRuns)
        () => deps.store.stoppedRuns?.() ?? null,
      ).wait,
    });
    this.#now = deps.now ?? Date.now;
    this.#concurrency = options.concurrency ?? 8;
    this.#maxAttempts = options.maxAttempts ?? 5;
    this.#leaseMs = options.leaseMs ?? 60_000;
    this.#heartbeatMs = options.heartbeatMs ?? 2000;
    this.#limit = options.limit ?? Infinity;
    this.#maxOutageMs = options.maxOutageMs ?? 15 * 60_000;
    this.#id = deps.runId ?? randomUUID();
    this.#host = deps.host ?? hostname();
    this.#pid = deps.pid ?? process.pid;
    this.#emit = deps.emit ?? (() => {});
    // Every job in hand listens on these two (waits and requests): hundreds at concurrency 64.
    setMaxListeners(0, this.#stopping.signal, this.#aborting.signal);
    this.#link(deps.stopSignal, this.#stopping);
    this.#link(deps.abortSignal, this.#aborting);
    this.#link(deps.abortSignal, this.#stopping);
    this.#startedAt = this.#lastBeat = this.#now();
    this.#counters = new RunCounters(this.#startedAt, this.#now);
    this.#breaker = new OutageBreaker({ ...options.outage, now: this.#now });
    this.#breaker.onChange = (open, until, detail) => {
      if (!open) {
        this.#counters.paused = null;
        return this.#emit('resumed', { reason: 'outage' });
      }
      const since = this.#breaker.openSince ?? this.#now();
      const givesUpAt = since + this.#maxOutageMs;
      // kept in the run's live stats too: status from another process says how long it has been down
      this.#counters.paused = { reason: 'outage', until, downSince: since, givesUpAt };
      this.#emit('paused', { reason: 'outage', untilMs: until, detail, downSinceMs: since, givesUpAtMs: givesUpAt });
      this.#tellNobodyListens(detail);
    };
    this.#slots = new Semaphore(this.#concurrency, this.#stopping.signal);
    this.#lanes = new Lanes(
      deps.baseUrl ?? deps.provider.name,
      { rpm: options.rpm ?? null, tpm: options.tpm ?? null },
      deps.boards ?? localBoards(this.#now),
      this.#now,
      deps.provider.unlimited ?? false,
    );
    const timeout = options.timeout ?? 'auto';
    this.#inFlight = new InFlightRequests({
      auto: timeout === 'auto',
      capMs: options.timeoutCapMs ?? 600_000,
      now: this.#now,
      abortSignal: this.#aborting.signal,
    });
    this.#money = new RunMoney({
      store: this.#store,
      runId: this.#id,
      prices: deps.prices ?? loadPriceTable(),
      budget: options.budget,
      now: this.#now,
    });
    this.#options = options;
  }

  /** The whole run: start, claim until done, drain, finish; the summary, or the internal error that ended it. */
  async work(): Promise<RunSummary> {
    try {
      await this.#start();
      try {
        await this.#claimUntilDone();
      } catch (error) {
        // A claim, or a look at the queue, failed past its retries: take no more, but let the
        // requests out finish and store their answers (paid for) before the jobs are handed back.
        // (A claim waiting out a full disk gives up when the run is stopped: that stop is the reason.)
        if (!(this.#stopping.signal.aborted && isDiskFull(error))) this.stop({ kind: 'error', error, abortInFlight: false });
      }
      await this.#drain();
    } finally {
      await this.#finish();
    }
    if (this.#internal) throw this.#internal;
    return this.#summary();
  }

  /** End the run early: no new job is taken and no new request leaves; the first reason given is the one reported. */
  stop(why: StopReason): void {
    if (why.kind === 'fatal' && this.#fatal === null) {
      this.#fatal = why.error;
      this.#refused = why.refused ?? null;
    }
    if (why.kind === 'error') this.#internal ??= why.error;
    this.#stopping.abort(new LlmqError('run stopped'));
    if ((why.kind === 'error' || why.kind === 'fatal') && why.abortInFlight) this.#aborting.abort(new LlmqError('run stopped'));
  }

  async #start(): Promise<void> {
    const c = this.#counters,
      o = this.#options;
    const mockAnswersTakenBack = await this.#takeBackMockAnswers();
    const { comingBack, takenBack } = await this.#reclaim();
    // The full read of the queue at the start: how much there is to do, and whether its models have prices.
    const before = await this.#store.status();
    this.#money.checkPriced(before);
    c.alreadyDone = before.counts.done;
    this.#finishedAtStart = before.counts.done + before.counts.failed;
    this.#readShared(this.#sharesQueue() ? before.counts : null);
    // Running jobs here are held by live runs or batch submissions (the reclaim above handed back
    // those of dead runs): not this run's to do, and counting them promised work it never did. Some
    // may be a dying run's (on this host, its process gone, its heartbeat still fresh), back within
    // seconds: said apart ("nothing to do" before 200 done misled), counted once claimed.
    c.total = Math.min(this.#limit, before.counts.pending);
    const dyingMayHold = comingBack === 'dying' ? before.counts.running : 0;
    const silentMayHold = comingBack === 'silent' ? before.counts.running : 0;
    this.#mayComeBack = dyingMayHold + silentMayHold;
    // named by its provider whatever the caller describes: a mock run's answers are known by it (taken back)
    const options = {
      ...(this.#deps.describe ?? {
        concurrency: this.#concurrency,
        rpm: o.rpm,
        tpm: o.tpm,
        maxAttempts: this.#maxAttempts,
        budget: o.budget?.runUsd ?? null,
        budgetTotal: o.budget?.totalUsd ?? null,
        sharedPace: this.#deps.boards !== undefined,
      }),
      provider: this.#deps.provider.name,
    };
    await this.#store.startRun({ id: this.#id, host: this.#host, pid: this.#pid, startedAt: this.#startedAt, options });
    this.#emit('run:start', {
      runId: this.#id,
      total: c.total,
      alreadyDone: c.alreadyDone,
      dyingMayHold,
      silentMayHold,
      takenBack,
      ...(mockAnswersTakenBack > 0 ? { mockAnswersTakenBack } : {}),
      options,
    });
    await this.#lanes.load(this.#store);
    // A lane for each model with work, opened now with the limits earlier runs learned: the claims
    // then give each paced model its own share from the first (Lanes.claimPlan), whatever the order
    // of the queue. A model enqueued while the run works opens its lane with its first job.
    for (const m of before.byModel) if (m.pending > 0) this.#lanes.get(m.model);
    // the start line says them apart (run:start); the bar counts them from here
    c.total = Math.min(this.#limit, before.counts.pending + this.#mayComeBack);
    this.#timers.push(setInterval(() => this.#beat(), this.#heartbeatMs));
    // two early beats store the first requests out (inFlight) within a second: a run killed before
    // its first regular beat left no count of what may be billed
    for (const ms of [500, 1000]) if (ms < this.#heartbeatMs) this.#timers.push(setTimeout(() => this.#beat(), ms));
    this.#timers.push(setInterval(() => this.#wake(), 1000));
    this.#timers.push(setInterval(() => this.#emit('progress', this.#snapshot()), o.progressMs ?? 500));
  }

  /** Claim while there is room in hand, until the queue is drained, the limit is reached or the run stops. */
  async #claimUntilDone(): Promise<void> {
    const maxInHand = this.#concurrency * 2;
    const batch = Math.max(1, Math.ceil(this.#concurrency / 2));
    const tasks = this.#tasks;
    while (!this.#stopping.signal.aborted) {
      // Jobs waiting on their lane's pace or pause, or backing off before a retry, hold no slot and
      // are not counted against the room in hand: a slow or paused lane must not keep other lanes
      // from being claimed, nor failed tries waiting their turn keep the slots empty (each lane
      // holds at most `concurrency` jobs besides those backing off, see `saturated`).
      const active = tasks.size - this.#lanes.idle();
      const room = Math.min(maxInHand - active, this.#limit - this.#claimed);
      if (this.#limit - this.#claimed <= 0 && tasks.size === 0) {
        this.#reason = 'limit';
        return;
      }
      if ((room >= batch || (room > 0 && active < this.#concurrency)) && (await this.#claim(room))) continue;
      if (tasks.size === 0) {
        if (await this.#drained()) {
          // drained but for the jobs of closed lanes (#endOnClosedLanes): they are left to do
          if (this.#fatal) {
            this.#reason = 'fatal';
            return;
          }
          this.#reason = 'drained';
          // What this run had to do is what it did: of the jobs counted at the start, other runs on
          // the queue may have taken some, and jobs enqueued since came to it (the progress then ends at 100%).
          this.#counters.total = this.#counters.done + this.#counters.failed;
          return;
        }
        continue;
      }
      // Wait for a job to finish, or at most a second (other runs may hand jobs back meanwhile: the
      // claim ticker wakes the loop), with no timer per wait: the loop waits once per job that ends.
      if (!this.#roomSinceWait) await new Promise<void>((resolve) => (this.#wake = resolve));
      this.#roomSinceWait = false;
    }
  }

  /** A job finished or started backing off: there is room in hand, and the claim loop need not wait. */
  #roomMade(): void {
    this.#roomSinceWait = true;
    this.#wake();
  }

  /**
   * Take up to `room` jobs, shared among the lanes as `Lanes.claimPlan` says (a lane paced at a known
   * limit holds only what its pace sends in the next seconds), and start each; true if the store had
   * any to give.
   */
  async #claim(room: number): Promise<boolean> {
    const plan = this.#lanes.claimPlan(this.#concurrency);
    let left = room;
    let any = false;
    for (const share of [...plan.paced, plan.rest]) {
      if (left <= 0) break;
      const got = await this.#claimShare(Math.min(left, share.limit), share.skipModels);
      left -= got.started;
      any ||= got.started > 0 || got.exhausted > 0;
    }
    return any;
  }

  /**
   * One claim of up to `limit` jobs, the models of `skipModels` left pending: starts each job taken,
   * and says how many it started and how many it failed (their attempts used up).
   */
  async #claimShare(limit: number, skipModels: readonly string[]): Promise<{ started: number; exhausted: number }> {
    const t = this.#now();
    // Every lane with work it may take is skipped or full: asking the same again before a lane
    // frees up or a second passes (other runs may enqueue or hand back) finds nothing either.
    const skip = skipModels.join('\n');
    const fruitlessAt = this.#fruitless.get(skip);
    if (skipModels.length > 0 && fruitlessAt !== undefined && t - fruitlessAt < 1000) return { started: 0, exhausted: 0 };
    const got = await this.#store.claim({
      owner: this.#id,
      limit,
      now: t,
      leaseUntil: t + this.#leaseMs,
      maxAttempts: this.#maxAttempts,
      skipModels,
    });
    this.#counters.failed += got.exhausted;
    this.#claimed += got.jobs.length;
    // kept through later claims that found jobs: those were of lanes with room, and say nothing of other models
    if (got.jobs.length === 0 && skipModels.length > 0) this.#fruitless.set(skip, t);
    const ctx = this.#jobContext();
    for (const job of got.jobs) {
      this.#keysInHand.set(job.key, (this.#keysInHand.get(job.key) ?? 0) + 1);
      const task: Promise<void> = runJob(job, ctx)
        .then(async (outcome) => {
          if (outcome === 'unsent') this.#unsent.push(job.key);
          if (outcome === 'closed' || outcome === 'closed-unsent') {
            // its model takes nothing more in this run, or no item needs it: pending now, for the next
            // run or to be dropped (the release is not made when this run holds the job again, as
            // below). Never sent by this run, it is not one of its --limit; tried, it is (as `lapsed-tried`).
            if (outcome === 'closed-unsent') this.#claimed--;
            if (this.#keysInHand.get(job.key) === 1)
              await this.#store.release(this.#id, { refund: outcome === 'closed-unsent', now: this.#now(), keys: [job.key] });
          }
          // Pending again now, to be claimed afresh: the release leaves it alone if another run took
          // it, and it is not made when this run claimed the job again meanwhile (that claim is live).
          // `lapsed-tried`: its tries stand (each went out), and so does its place in --limit.
          if (outcome === 'lapsed' || outcome === 'lapsed-tried') {
            // never sent by this run: not one of its --limit
            if (outcome === 'lapsed') this.#claimed--;
            if (this.#keysInHand.get(job.key) === 1) {
              const back = { refund: outcome === 'lapsed', now: this.#now(), keys: [job.key] };
              await this.#store.release(this.#id, back);
            }
          }
        })
        // The others in flight finish and store their answers, which are paid for (a failing store may
        // be back by then); no more are claimed.
        .catch((error) => this.stop({ kind: 'error', error, abortInFlight: false }))
        .finally(() => {
          const left = this.#keysInHand.get(job.key)! - 1;
          if (left === 0) {
            this.#keysInHand.delete(job.key);
            this.#unneeded.forget(job.key);
          } else this.#keysInHand.set(job.key, left);
          this.#tasks.delete(task);
          this.#roomMade();
        });
      this.#tasks.add(task);
    }
    // jobs handed back or enqueued since the start came to this run: at least these are to do
    this.#exhausted += got.exhausted;
    this.#counters.total = Math.max(this.#counters.total, this.#claimed + this.#exhausted);
    // A claim of every model came back short: nothing more to take now, and what is left to this run
    // is what it holds (runs sharing the queue took the rest of what it counted at the start: its
    // bar stood at 35% while it waited on one retry, then jumped to 100%).
    // a claim that skipped only closed lanes (Lane.close) is one of every model this run still sends
    const closed = this.#lanes.closed();
    const ofAll = skipModels.every((m) => closed.some((l) => l.model === m));
    const short = ofAll && got.jobs.length + got.exhausted < limit;
    // (jobs found exhausted count in no --limit: only those that may come back are held to what it leaves)
    if (short)
      this.#counters.total = this.#claimed + this.#exhausted + Math.min(this.#mayComeBack, Math.max(0, this.#limit - this.#claimed));
    // jobs found by a claim that skipped some models say the queue has more again (handed back, enqueued)
    if (ofAll) this.#queueEmpty = short;
    else if (got.jobs.length > 0) this.#queueEmpty = false;
    return { started: got.jobs.length, exhausted: got.exhausted };
  }

  /**
   * Nothing in hand and nothing claimed: done, unless jobs may still come. Take back jobs of runs
   * that died meanwhile, and wait for those of a run on this host whose process is gone but whose
   * heartbeat is still fresh, and of a run anywhere that stopped heartbeating, until its leases run
   * out: without it a run killed on another machine left its jobs running, and the survivors exited
   * 0 with them undone. (A run that holds nothing can hand nothing back: two live runs on machines
   * with the same hostname look dying to each other, and must not wait for each other forever.)
   */
  async #drained(): Promise<boolean> {
    // With nothing in hand, a job still leased to this run is one of a claim that committed but whose
    // reply was lost (PostgreSQL's connection reset, the claim asked again): never sent, it goes back
    // with its attempt, to be claimed now rather than left to the next run.
    if ((await this.#store.release(this.#id, { refund: true, now: this.#now() })) > 0) return false;
    // the jobs of a closed lane (its model's quota spent) stay pending: they wait for a later run
    const closed = this.#lanes.closed();
    if (closed.length > 0 && (await this.#othersPending(closed))) {
      await sleep(1000, this.#stopping.signal).catch(() => {});
      return false;
    }
    const dying = (await this.#reclaim()).comingBack !== null && (await this.#store.status()).counts.running > 0;
    const next = closed.length > 0 ? null : await this.#store.nextPendingAt();
    if (next === null && !dying) {
      if (closed.length > 0) this.#endOnClosedLanes(closed);
      return true;
    }
    await sleep(next === null ? this.#heartbeatMs : Math.min(Math.max(next - this.#now(), 50), 1000), this.#stopping.signal).catch(
      () => {},
    );
    return false;
  }

  /** Whether a model whose lane is open has jobs pending (waiting out a retry's backoff, handed back). */
  async #othersPending(closed: readonly Lane[]): Promise<boolean> {
    const shut = new Set(closed.map((l) => l.model));
    return (await this.#store.status()).byModel.some((m) => !shut.has(m.model) && m.pending > 0);
  }

  /** The run ends on the first closed lane's error, naming every closed model: it says what waits, and why. */
  #endOnClosedLanes(closed: readonly Lane[]): void {
    const error = closed[0]!.closedBy!;
    this.#fatal ??= new ProviderError({
      message: `${closed.map((l) => l.model).join(', ')}: ${error.message}`,
      scope: error.scope,
      reason: error.reason,
      status: error.status,
      code: error.code,
    });
  }

  /** Let every job in hand end: requests in flight finish (or are cut by a second signal). */
  async #drain(): Promise<void> {
    if (this.#stopping.signal.aborted) {
      this.#reason = this.#fatal || this.#internal ? 'fatal' : this.#money.reached ? 'budget' : 'signal';
    }
    while (this.#tasks.size > 0) await Promise.allSettled([...this.#tasks]);
  }

  /** Stop the timers, save the lanes, hand back every job still held, and close the run's row. */
  async #finish(): Promise<void> {
    for (const unlink of this.#unlinks) unlink();
    for (const timer of this.#timers) clearInterval(timer);
    this.#breaker.dispose();
    this.#inFlight.dispose();
    const t = this.#now();
    await this.#lanes.save(this.#store).catch(() => {});
    await this.#lanes.close();
    try {
      const unsent = this.#unsent;
      if (unsent.length > 0) await this.#store.release(this.#id, { refund: true, now: t, keys: unsent });
      await this.#store.release(this.#id, { refund: false, now: t });
      const reason = this.#fatal ? 'fatal' : this.#internal ? 'error' : this.#reason;
      // the concurrency it ran at last, not the none it has now: status shows an ended run's
      const stats = this.#counters.forStore(t, [], this.#slots.size);
      await this.#store.finishRun(this.#id, t, reason, { ...stats, ...this.#endedBy(reason) });
    } catch (error) {
      this.#internal ??= error;
    }
  }

  /** Renew the leases and the live stats, and read the queue for a shared progress; every fifth beat, reclaim and save the lanes. Also ends a too-long outage. */
  #beat(): void {
    const t = this.#now(),
      c = this.#counters,
      lanes = this.#lanes;
    const rl = this.#pausedUntil();
    if (!this.#breaker.isOpen) c.paused = rl > t ? { reason: 'rate_limit', until: rl } : null;
    const since = this.#breaker.openSince;
    if (since !== null && t - since > this.#maxOutageMs) {
      this.stop({
        kind: 'fatal',
        error: new ProviderError({
          message:
            `The provider at ${lanes.baseUrl} has been ${outageKind(this.#breaker.lastFailure)} for ${duration((t - since) / 1000)} ` +
            `(--max-outage); the last try said: ${this.#breaker.lastFailure}`,
          scope: 'run',
          reason: 'network',
        }),
        // the requests out now are the down provider's: a retry sent as the outage began would
        // otherwise hold the run's end for its whole timeout (10 minutes, not the minute asked)
        abortInFlight: true,
      });
    }
    this.#tellSilence(t);
    this.#tellOnlyRefused(t);
    void lanes.refresh();
    this.#store
      .heartbeat(
        this.#id,
        t,
        t + this.#leaseMs,
        {
          ...c.forStore(t, lanes.snapshots(), this.#slots.size),
          alerts: this.#deps.alerts?.() ?? [],
        },
        [...this.#heldUnsent.keys()],
      )
      .then((unneeded) => {
        this.#noteUnneeded(unneeded);
        // Frozen past the lease (a laptop asleep, a stalled event loop): jobs whose lease ran out
        // before this renewal may have been taken, and answered, by another run.
        if (t >= this.#lastBeat + this.#leaseMs) this.#lapsedAt = t;
        this.#lastBeat = Math.max(this.#lastBeat, t);
        // the other runs and the queue's counts for the progress, each beat
        if (++this.#beats % 5 === 0) return Promise.all([this.#reclaim(), lanes.save(this.#store), this.#refreshShared()]).then(() => {});
        return this.#refreshShared();
      })
      .catch((error) => {
        // A full disk is waited out (DiskFullNotice): the answers held then find whether their jobs
        // are still theirs, and the first beat after it marks the leases as lapsed (above).
        if (isDiskFull(error)) return;
        // The queue's file removed or replaced under the run: each answer from now on is paid for and
        // stored where nothing reads it. No blip: stop sending now.
        if (error instanceof QueueGoneError) return this.stop({ kind: 'error', error, abortInFlight: false });
        // A blip is survivable while our leases hold; past half the lease, stop taking work and
        // let requests in flight finish before others take the jobs back.
        if (this.#now() - this.#lastBeat > this.#leaseMs / 2) this.stop({ kind: 'error', error, abortInFlight: false });
      });
  }

  /**
   * Hand back the jobs of runs known dead (`takenBack`: how many, with those of a batch they never
   * uploaded); `comingBack`: whether a dying or silent run may still hold some.
   */
  async #reclaim(): Promise<{ comingBack: 'dying' | 'silent' | null; takenBack: number }> {
    // Quiet for 3 heartbeats, and at least 5 s: a run whose event loop is busy (a long SQLite wait)
    // beats late, and must not be taken for dead by a neighbour on a machine with the same hostname.
    const self: Self = {
      host: this.#host,
      pid: this.#pid,
      runId: this.#id,
      isAlive: this.#deps.isAlive ?? isProcessAlive,
      isStopped: this.#deps.isStopped ?? isRunProcessStopped,
      now: this.#now(),
      quietMs: Math.max(3 * this.#heartbeatMs, 5000),
    };
    const runs = await this.#store.activeRuns();
    const { dead, dying, suspended } = goneOwners(runs, self);
    this.#otherRuns = this.#working(runs, self.now);
    const takenBack = await this.#store.reclaim(
      this.#now(),
      dead,
      suspended.map((r) => r.id),
    );
    this.#tellSuspended(suspended);
    // the dead ones' jobs are back already; a suspended run's come back only when it is continued or ended
    const silent = silentOwners(runs, self, this.#leaseMs).some((id) => !dead.includes(id) && !suspended.some((r) => r.id === id));
    const comingBack = dying.length > 0 ? 'dying' : silent ? 'silent' : null;
    // those back are pending now, counted as they are claimed
    this.#mayComeBack = comingBack === null ? 0 : Math.max(0, this.#mayComeBack - takenBack);
    return { comingBack, takenBack };
  }

  /**
   * A run of a real provider sends the jobs the offline mock answered (its stand-ins, from trying
   * llmq on this queue): they go back to pending first, as the CLI said; a library's run kept them
   * as answers for good. A mock run still heartbeating keeps its answers for now.
   */
  async #takeBackMockAnswers(): Promise<number> {
    if (this.#deps.provider.name === 'mock') return 0;
    const now = this.#now();
    // quiet as long as status takes a run for gone: a live one keeps its answers
    return this.#store.takeBackMockAnswers(now, now - STALE_RUN_MS);
  }

  /** `#tellSilence` has spoken: once a run. */
  #toldSilence = false;
  /** How long requests to a model with no latencies yet wait for their first answers before the run says so (at most a tenth of the timeout's cap). */
  static readonly SILENCE_TOLD_MS = 60_000;

  /**
   * Requests to a model that has not answered enough yet to time them wait up to the cap (10
   * minutes): a provider that takes connections and never answers kept the run silent that long,
   * `in flight 8 · 0 jobs/s`. Said once, with what to do.
   */
  #tellSilence(t: number): void {
    if (this.#toldSilence) return;
    const cold = this.#inFlight.oldestCold();
    if (cold === null || t - cold.waitingSince < Math.min(Run.SILENCE_TOLD_MS, cold.capMs / 10)) return;
    this.#toldSilence = true;
    const requests = cold.count === 1 ? '1 request has' : `${cold.count} requests have`;
    this.#emit('warning', {
      message:
        `${requests} waited ${duration((t - cold.waitingSince) / 1000)} for ${cold.model} with no answer (a slow model, or a provider that takes requests and does not answer): ` +
        `until ${cold.model} has answered ${LatencyStats.MIN_SAMPLES} requests, --timeout auto waits up to ${duration(cold.capMs / 1000)} for each; give --timeout <seconds> to cut them sooner`,
    });
  }

  /** `#tellOnlyRefused` has spoken: once a run. */
  #toldOnlyRefused = false;
  /** How long a run refused with 429s and answered nothing goes before it says so: past a minute's window turning. */
  static readonly ONLY_REFUSED_TOLD_MS = 120_000;

  /**
   * 429s and nothing answered for two minutes: a key with no quota left, or a limit others spend, most
   * likely, which waiting does not mend. The run goes on trying (429s end no run but a quota's
   * `insufficient_quota`), slowly; said once, with what to look at, or it read as a slow start.
   */
  #tellOnlyRefused(t: number): void {
    const c = this.#counters;
    if (this.#toldOnlyRefused || c.lastAnsweredSentAt !== -Infinity || c.rateLimited === 0) return;
    if (t - this.#startedAt < Run.ONLY_REFUSED_TOLD_MS) return;
    this.#toldOnlyRefused = true;
    const refused = c.rateLimited === 1 ? '1 request was refused' : `${c.rateLimited} requests were refused`;
    this.#emit('warning', {
      message:
        `nothing answered in ${duration((t - this.#startedAt) / 1000)}: ${refused} with 429 (the last: ${c.lastRateLimited}). ` +
        "A key with no quota left, or a limit other clients spend, most likely: see the provider's account. " +
        'The run keeps trying, paced by the 429s; Ctrl-C stops it, and loses nothing.',
    });
  }

  /** The suspended runs told of (`#tellSuspended`), by id. */
  readonly #toldSuspended = new Set<string>();

  /**
   * A run here whose process is stopped (Ctrl-Z) keeps its jobs (`goneOwners`' suspended): said once, with
   * what gets them done, or the user would wait on jobs that never move with no word why.
   */
  #tellSuspended(suspended: readonly RunRow[]): void {
    for (const r of suspended) {
      if (this.#toldSuspended.has(r.id)) continue;
      this.#toldSuspended.add(r.id);
      this.#emit('warning', {
        message:
          `run ${r.id.slice(0, 8)} (pid ${r.pid}) is stopped (Ctrl-Z or SIGSTOP) and keeps the jobs it holds: the requests it had out ` +
          `are answered to it when it goes on, so sent again here they would be paid twice. To have them done, continue it (fg in its terminal, or kill -CONT ${r.pid}), ` +
          `or end it (kill ${r.pid}; kill -CONT ${r.pid}: it stops as on Ctrl-C) and the next run takes them back.`,
      });
    }
  }

  /** Looks for other runs on the queue, and reads its counts once there are (each heartbeat). A read that fails shows this run's own. */
  async #refreshShared(): Promise<void> {
    try {
      this.#otherRuns = this.#working(await this.#store.activeRuns(), this.#now());
      this.#tellUnsharedPace();
      const shares = this.#sharesQueue();
      const counts = await this.#store.stateCounts();
      this.#readShared(shares ? counts : null);
      if (!shares) this.#countEnqueued(counts.pending);
    } catch {
      this.#counters.shared = null;
    }
  }

  /**
   * Runs side by side with no pace between them (each with its own, no --redis) each pace at the
   * provider's whole limit: with one API key they go over it together, and the 429s that follow
   * read as the provider's doing (two runs met 23% 429s, and nothing said why). Said once.
   */
  /**
   * Jobs in hand that no item needs any more, as a heartbeat found them: each is sent no more (its
   * request, if out now, is answered and kept), handed back, and dropped by the store. Told as found.
   */
  #noteUnneeded(keys: readonly string[]): void {
    let found = 0;
    for (const key of keys) {
      if (this.#keysInHand.has(key) && this.#unneeded.add(key)) found++;
    }
    if (found === 0) return;
    this.#emit('warning', {
      message:
        `${found === 1 ? '1 job this run holds is' : `${int(found)} jobs this run holds are`} needed by no document any more ` +
        '(an enqueue moved their documents to other requests, or forget removed them): not sent again unless needed again',
    });
  }

  #tellUnsharedPace(): void {
    const others = this.#otherRuns;
    if (this.#unsharedPaceTold || others.length === 0 || this.#deps.provider.unlimited) return;
    const sharesPace = this.#deps.boards !== undefined && others.every((r) => r.options.sharedPace === true);
    if (sharesPace) return;
    this.#unsharedPaceTold = true;
    const runs = others.length + 1;
    this.#emit('warning', {
      message:
        `${runs} runs work this queue and share no pace (--redis): each paces at the provider's whole rate limit, ` +
        'so with one API key they go over it together and meet 429s. For one pace between them, start each with the same --redis URL.',
    });
  }

  /**
   * Whether the progress is the queue's: other runs work it, or did since this run started (its bar
   * does not jump back to its own share when they end). Never for a run with --limit: its work is
   * its limit, not the queue.
   */
  #sharesQueue(): boolean {
    if (this.#limit !== Infinity) return false;
    if (this.#otherRuns.length > 0) this.#shared = true;
    return this.#shared;
  }

  /**
   * The other runs among `runs` working the queue: heartbeating since this run started (a run
   * killed just before it has a fresh heartbeat and sends nothing: a run resumed after four were
   * SIGKILLed counted "5 runs") and within three beats (a run quiet that long may be dead), and
   * online (a batch lane's run sends nothing itself: its pace is not the queue's).
   */
  #working(runs: readonly RunRow[], now: number): RunRow[] {
    const quietMs = Math.max(3 * this.#heartbeatMs, 5000);
    return runs.filter(
      (r) =>
        r.id !== this.#id &&
        r.endedAt === null &&
        r.heartbeatAt > this.#startedAt &&
        now - r.heartbeatAt <= quietMs &&
        r.options.via !== 'batch',
    );
  }

  /** The queue's progress from its counts and the other runs' last heartbeats; none while this run works alone. */
  #readShared(counts: Readonly<Record<JobState, number>> | null): void {
    const c = this.#counters;
    const others = this.#otherRuns;
    c.shared =
      counts === null
        ? null
        : {
            at: this.#now(),
            otherRuns: others.length,
            othersPerSecond: others.reduce((sum, r) => sum + (r.stats?.jobsPerSecond ?? 0), 0),
            finished: Math.max(0, counts.done + counts.failed - this.#finishedAtStart),
            left: counts.pending + counts.running,
            ownFinished: c.done + c.failed,
          };
  }

  /**
   * Jobs enqueued while this run works the queue alone are its to do: counted from the heartbeat that
   * sees them pending, not only as its claims reach them (a changed prompt enqueued mid-run left the
   * bar at 99%, ETA 1s, for the half minute its jobs took). Only ever raised: what the claims find
   * short brings it down (#claimBatch).
   */
  #countEnqueued(pending: number): void {
    // a closed lane's jobs are pending and never this run's (its claims leave them out): the total
    // would rise at each beat and fall at each short claim
    if (this.#lanes.closed().length > 0) return;
    const c = this.#counters;
    const room = Math.max(0, this.#limit - this.#claimed);
    c.total = Math.max(c.total, this.#claimed + this.#exhausted + Math.min(pending, room));
  }

  /** What `status` says of how the run ended, beside its reason: the error, or which budget. */
  #endedBy(reason: string): Pick<RunStats, 'error' | 'budgetReached' | 'budgetTooSmall' | 'wrongEndpoint'> {
    // after Ctrl-C as after --max-outage: status proposes another endpoint, not the one that never answered
    const wrong = this.#wrongEndpoint();
    const endpoint = wrong ? { wrongEndpoint: wrong } : {};
    const error = this.#fatal ?? this.#internal;
    // the provider's message is up to 300 characters (cleanMessage), what to do follows it: kept whole
    if (error) return { error: oneLine(error instanceof Error ? error.message : String(error), 600), ...endpoint };
    const reached = this.#money.reached;
    if (reason !== 'budget' || !reached) return endpoint;
    return budgetTooSmallForRequests(reached) ? { budgetReached: reached.scope, budgetTooSmall: true } : { budgetReached: reached.scope };
  }

  /** Nobody listened at the endpoint (told once) and nothing ever answered this run. */
  #reachedNothing(): boolean {
    return this.#toldNobodyListens && !this.#counters.heardFromProvider;
  }

  /** How the run showed its endpoint wrong, once for its summary and its stored end (`RunSummary.wrongEndpoint`). */
  #wrongEndpoint(): WrongEndpoint | null {
    if (this.#reachedNothing()) return 'nobody-listened';
    return this.#fatal !== null && stopNamesWrongEndpoint(this.#fatal) ? 'no-completions' : null;
  }

  /** The batches out that wait for a run --via batch (their run ended, died or went silent), their jobs by endpoint. */
  async #uncollected(activeRuns: readonly RunRow[]): Promise<RunSummary['uncollected']> {
    const now = this.#now();
    const open = await this.#store.batches.open();
    return uncollectedByEndpoint(open, (b) => batchOwnerGone(b.runId, activeRuns, now));
  }

  async #summary(): Promise<RunSummary> {
    const c = this.#counters;
    const after = await this.#store.status();
    const f = this.#fatal;
    const reached = this.#money.reached;
    const committed = await this.#store.committed(this.#id);
    const summary: RunSummary = {
      runId: this.#id,
      reason: this.#reason,
      done: c.done,
      failed: c.failed,
      retried: c.retried,
      requests: c.requests,
      probes: c.probes,
      rateLimited: c.rateLimited,
      strayRateLimited: c.strayRateLimited,
      promptTokens: c.promptTokens,
      completionTokens: c.completionTokens,
      cutOff: c.cutOff,
      cutOffRoom: c.cutOffRoom,
      refused: c.refused,
      empty: c.empty,
      answersNotStored: c.answersNotStored,
      unreachable: this.#reachedNothing(),
      wrongEndpoint: this.#wrongEndpoint(),
      wallMs: this.#now() - this.#startedAt,
      remaining: after.counts.pending + after.counts.running,
      uncollected: after.counts.running > 0 ? await this.#uncollected(after.activeRuns) : [],
      failedInStore: after.counts.failed,
      failuresInStore: after.failures,
      costUsd: c.unpricedAnswers > 0 ? null : committed.run,
      mayBeBilled: { ...this.#money.mayBeBilled },
      budget:
        this.#reason === 'budget' && reached
          ? { ...reached, committedUsd: reached.scope === 'run' ? committed.run : committed.total }
          : null,
      fatal: f ? { message: f.message, reason: f.reason, code: f.code, status: f.status, refused: this.#refused } : null,
    };
    // the last bar: the queue as it is now (a read a heartbeat old left it short of the end)
    if (this.#shared) {
      this.#otherRuns = this.#working(after.activeRuns, this.#now());
      this.#readShared(after.counts);
    }
    this.#emit('progress', this.#snapshot());
    this.#emit('run:end', summary);
    return summary;
  }

  /**
   * Whether a job whose lease was taken or renewed at `since` is surely still this run's: no
   * heartbeat since found the leases run out before it renewed them, and the lease covering the
   * job now (its own, or the last heartbeat's) has a quarter of its length left, so a request sent
   * now is renewed in time. Else another run may have taken the job, and sent it.
   */
  #holds(since: number): boolean {
    if (since + this.#leaseMs <= this.#lapsedAt) return false;
    return this.#now() < Math.max(since, this.#lastBeat) + (this.#leaseMs * 3) / 4;
  }

  #snapshot(): ProgressSnapshot {
    return this.#counters.snapshot(this.#now(), this.#lanes.snapshots(), this.#slots.size);
  }

  #context: JobContext | null = null;

  /** What each job is handed: built once, the same for every job of the run. */
  #jobContext(): JobContext {
    this.#context ??= {
      store: this.#store,
      provider: this.#deps.provider,
      lanes: this.#lanes,
      breaker: this.#breaker,
      slots: this.#slots,
      inFlight: this.#inFlight,
      counters: this.#counters,
      heldUnsent: this.#heldUnsent,
      unneeded: this.#unneeded,
      money: this.#money,
      // A request leaving its lane ends that lane's pause, whatever this run's timer for it says:
      // the shared board (Redis, on its own clock) may let it go a moment before the timer fires,
      // and "resumed" must not come after what it announces. Told once no other lane is paused.
      emit: (event, payload) => {
        if (event === 'job:start' && this.#toldPauseUntil !== null) {
          const model = (payload as SchedulerEventMap['job:start']).model;
          const t = this.#now();
          if (this.#lanes.all().every((l) => l.model === model || l.board.pausedUntil() <= t)) this.#tellResumedNow();
        }
        this.#emit(event, payload);
      },
      runId: this.#id,
      maxAttempts: this.#maxAttempts,
      leaseMs: this.#leaseMs,
      retryDelayMs: this.#options.retryDelayMs ?? 1000,
      maxRetryDelayMs: this.#options.maxRetryDelayMs ?? 60_000,
      stopSignal: this.#stopping.signal,
      now: this.#now,
      random: this.#deps.random ?? Math.random,
      // Stop taking and sending at once; requests already out may be billed, so their answers are kept.
      onFatal: (error, refused) => this.stop({ kind: 'fatal', error, refused }),
      // the run goes on with the other models; said now, where the end says it again with what waits
      onLaneClosed: (lane, error) => {
        if (this.#lanes.all().length > 1)
          this.#emit('warning', { message: `${lane.model}: ${error.message} Its jobs wait; the other models go on.` });
      },
      onLocalLimit: (error) => this.#lowerConcurrency(error),
      onBudgetReached: () => this.stop({ kind: 'budget' }),
      // a job backing off frees its place in hand: claim its replacement now, not when a job ends
      onBackoff: () => this.#roomMade(),
      onRateLimitPause: (until, error) => this.#tellRateLimitPause(until, error),
      holds: (since) => this.#holds(since),
      nothingLeftToClaim: () => this.#queueEmpty || this.#claimed >= this.#limit,
      itemsOf: (key) => jobItems(this.#store, key, 1),
    };
    return this.#context;
  }

  /**
   * A pause a provider asked for, told as a `paused` event when it is long enough to wonder about
   * (a plain progress line comes every 5 s, and showed nothing of it), and once again only when it is
   * pushed further; `resumed` follows when it ends, however far it was pushed. Shorter ones show in
   * the progress line's pace alone: at a tight limit they come every second.
   */
  #tellRateLimitPause(until: number, error: ProviderError): void {
    if (this.#breaker.isOpen || until - this.#now() < TOLD_PAUSE_MS) return;
    if (this.#toldPauseUntil !== null && until <= this.#toldPauseUntil + 1000) return;
    this.#toldPauseUntil = until;
    this.#counters.paused = { reason: 'rate_limit', until };
    const asked = error.retryAfterMs === null ? null : duration(error.retryAfterMs / 1000);
    const detail =
      asked === null ? 'no retry-after: one refill interval' : error.retryAfterInBody ? `the 429 asks ${asked}` : `retry-after ${asked}`;
    this.#emit('paused', { reason: 'rate_limit', untilMs: until, detail });
    this.#timers.push(setTimeout(() => this.#tellResumed(), until - this.#now()));
  }

  /**
   * The told pause is over, unless a lane was paused further since: by a later 429 of this run (told,
   * with its own timer) or of another run sharing the lane through Redis (learned on a beat, told by
   * no 429 here), so look again when that ends.
   */
  #tellResumed(): void {
    const t = this.#now();
    if (this.#toldPauseUntil === null) return;
    // a timer that came early (the clock moved) looks again too: nothing else would
    const until = Math.max(this.#toldPauseUntil, this.#pausedUntil());
    if (until > t) {
      this.#timers.push(setTimeout(() => this.#tellResumed(), until - t));
      return;
    }
    this.#tellResumedNow();
  }

  /** A request is leaving: the told pause is over whatever the timers say. */
  #tellResumedNow(): void {
    this.#toldPauseUntil = null;
    if (this.#counters.paused?.reason === 'rate_limit') this.#counters.paused = null;
    this.#emit('resumed', { reason: 'rate_limit' });
  }

  /** Until when some lane is paused by a 429 (ms epoch; 0 or past when none is). */
  #pausedUntil(): number {
    return Math.max(0, ...this.#lanes.all().map((l) => l.board.pausedUntil()));
  }

  /** Until when the rate-limit pause told last lasts (ms epoch), or null once `resumed` was told. */
  #toldPauseUntil: number | null = null;

  #toldNobodyListens = false;

  /**
   * Connections refused (or a host not found) before any HTTP response came in this run: most often a
   * --base-url or port mistyped, not an outage. Said once, with what to do: the run otherwise waits
   * for it, probing, up to --max-outage (15 minutes).
   */
  #tellNobodyListens(detail: string | undefined): void {
    if (this.#toldNobodyListens || this.#counters.heardFromProvider || !detail || !nobodyListens(detail)) return;
    this.#toldNobodyListens = true;
    this.#emit('warning', {
      message:
        `nothing answers at ${this.#lanes.baseUrl} (${detail}) and nothing has answered yet: if the provider is elsewhere, ` +
        `stop this run (Ctrl-C) and give its address with --base-url. Meanwhile it waits for it, up to --max-outage (${duration(this.#maxOutageMs / 1000)}).`,
    });
  }

  /** Out of file descriptors: fewer requests at once, said once; no attempt is used. */
  #lowerConcurrency(error: ProviderError): void {
    const slots = this.#slots;
    const before = slots.size;
    slots.shrink(Math.max(1, Math.min(before - 1, Math.floor(Math.max(1, this.#counters.inFlight) * 0.75))));
    if (!this.#loweredConcurrency || slots.size < before) {
      this.#emit('warning', {
        message: `${error.message}: concurrency lowered from ${before} to ${slots.size}. Raise the limit (ulimit -n) or lower --concurrency.`,
      });
    }
    this.#loweredConcurrency = true;
  }

  #link(from: AbortSignal | undefined, to: AbortController): void {
    if (!from) return;
    if (from.aborted) return to.abort(from.reason);
    const onAbort = (): void => to.abort(from.reason);
    from.addEventListener('abort', onAbort, { once: true });
    this.#unlinks.push(() => from.removeEventListener('abort', onAbort));
  }
}

/** An endpoint answering 500s is there, only failing; one taking requests and never answering is not answering; one refusing connections is unreachable. */
function outageKind(lastFailure: string): string {
  if (/^HTTP \d/.test(lastFailure)) return 'failing';
  if (/^Timed out/.test(lastFailure)) return 'not answering';
  return 'unreachable';
}
