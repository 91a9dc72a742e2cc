import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { hostname } from 'node:os';
import { LlmqError } from '../errors.js';
import { ProviderError, type Provider } from '../provider/types.js';
import type { RunAlert, Store } from '../store/types.js';
import type { ProgressSnapshot, RunSummary, SchedulerListener } from './events.js';
import { runJob, type JobContext } from './job-runner.js';
import { InFlightRequests } from './in-flight.js';
import { Lanes, localBoards, type LaneBoards } from './lanes.js';
import { sleep } from './wait.js';
import { OutageBreaker, type OutageOptions } from './outage.js';
import { deadOwners, dyingOwners, isProcessAlive, type Self } from './owners.js';
import { Semaphore } from './semaphore.js';
import { RunCounters } from './stats.js';
import { RunMoney, type Budget } from './run-money.js';
import { loadPriceTable, type PriceTable } from '../pricing/price-table.js';

export interface RunOptions {
  /** Requests in flight at most. @default 8 */
  readonly concurrency?: number;
  /** Requests per minute at most, per model (undefined: what the provider's headers say, else no limit). */
  readonly rpm?: number;
  /** Tokens per minute at most, per model (undefined: what the provider's headers say, else no limit). */
  readonly tpm?: number;
  /**
   * Per-request timeout: a number of ms (the provider enforces it), or 'auto': cut by each lane's
   * observed latencies, at most `timeoutCapMs`. @default 'auto'
   */
  readonly timeout?: number | 'auto';
  /** The longest any request may take under `timeout: 'auto'`. @default 600000 */
  readonly timeoutCapMs?: number;
  /** End the run (exit 1, jobs pending) when the provider stays unreachable this long. @default 900000 */
  readonly maxOutageMs?: number;
  /** Tries per job, counted in the store. @default 5 */
  readonly maxAttempts?: number;
  /** Stop after claiming this many jobs. */
  readonly limit?: number;
  /** How long a claimed job stays ours without a heartbeat. @default 60000 */
  readonly leaseMs?: number;
  /** How often leases and live stats are renewed. @default 2000 */
  readonly heartbeatMs?: number;
  /** First wait before a retry. @default 1000 */
  readonly retryDelayMs?: number;
  /** @default 60000 */
  readonly maxRetryDelayMs?: number;
  /** How often a `progress` event is emitted. @default 500 */
  readonly progressMs?: number;
  readonly outage?: OutageOptions;
  /**
   * Spend at most this much (USD): `runUsd` in this run, `totalUsd` on the whole queue, earlier
   * runs included. Each request's worst case is reserved before it leaves; when the next one does
   * not fit, the run stops taking jobs (reason `budget`).
   */
  readonly budget?: Budget;
}

export interface RunDeps {
  readonly store: Store;
  readonly provider: Provider;
  /** Where each lane's pace is kept; defaults to this process. Redis shares it between runs. */
  readonly boards?: LaneBoards;
  /** The endpoint lanes and learned limits are keyed by (no credentials). @default provider.name */
  readonly baseUrl?: string;
  /** What each try costs. @default genai-prices */
  readonly prices?: PriceTable;
  /** @default Math.random */
  readonly random?: () => number;
  readonly emit?: SchedulerListener;
  /** First abort: stop claiming and let in-flight requests finish. */
  readonly stopSignal?: AbortSignal;
  /** Abort in-flight requests too. */
  readonly abortSignal?: AbortSignal;
  readonly now?: () => number;
  readonly runId?: string;
  readonly host?: string;
  readonly pid?: number;
  readonly isAlive?: (pid: number) => boolean;
  /** Options recorded with the run for `status` (never secrets). */
  readonly describe?: Record<string, unknown>;
  /** Alerts active now, stored with each heartbeat (llmq run --alert-*). */
  readonly alerts?: () => readonly RunAlert[];
}

/**
 * Work the queue until it is drained, `limit` jobs were taken, a stop signal arrives or a run-fatal
 * error happens. Claims in batches, keeps at most 2 x concurrency jobs in hand, hands everything
 * it did not finish back to `pending` before returning.
 */
export async function runQueue(deps: RunDeps, options: RunOptions = {}): Promise<RunSummary> {
  const { store, provider } = deps;
  const now = deps.now ?? Date.now;
  const concurrency = options.concurrency ?? 8;
  const maxAttempts = options.maxAttempts ?? 5;
  const leaseMs = options.leaseMs ?? 60_000;
  const limit = options.limit ?? Infinity;
  const runId = deps.runId ?? randomUUID();
  const host = deps.host ?? hostname();
  const pid = deps.pid ?? process.pid;
  const emit: SchedulerListener = deps.emit ?? (() => {});
  const heartbeatMs = options.heartbeatMs ?? 2000;

  const stop = new AbortController();
  const abort = new AbortController();
  // Every job in hand listens on these two (waits and requests): hundreds at concurrency 64.
  setMaxListeners(0, stop.signal, abort.signal);
  const unlinks: Array<() => void> = [];
  const link = (from: AbortSignal | undefined, to: AbortController): void => {
    if (!from) return;
    if (from.aborted) return to.abort(from.reason);
    const onAbort = (): void => to.abort(from.reason);
    from.addEventListener('abort', onAbort, { once: true });
    unlinks.push(() => from.removeEventListener('abort', onAbort));
  };
  link(deps.stopSignal, stop);
  link(deps.abortSignal, abort);
  link(deps.abortSignal, stop);

  let fatal: ProviderError | null = null;
  let internal: unknown = null;
  const halt = (): void => {
    stop.abort(new LlmqError('run stopped'));
    abort.abort(new LlmqError('run stopped'));
  };

  const startedAt = now();
  const counters = new RunCounters(startedAt);
  const breaker = new OutageBreaker({ ...options.outage, now });
  breaker.onChange = (open, until, detail) => {
    counters.paused = open ? { reason: 'outage', until } : null;
    if (open) emit('paused', { reason: 'outage', untilMs: until, detail });
    else emit('resumed', { reason: 'outage' });
  };

  // Quiet for 3 heartbeats, and at least 5 s: a run whose event loop is busy (a long SQLite wait)
  // beats late, and must not be taken for dead by a neighbour on a machine with the same hostname.
  const quietMs = Math.max(3 * heartbeatMs, 5000);
  const self = (): Self => ({ host, pid, runId, isAlive: deps.isAlive ?? isProcessAlive, now: now(), quietMs });
  /** Take back expired leases and the jobs of runs on this host that died; true if some run is dying. */
  const reclaim = async (): Promise<boolean> => {
    const runs = await store.activeRuns();
    await store.reclaim(now(), deadOwners(runs, self()));
    return dyingOwners(runs, self()).length > 0;
  };
  await reclaim();
  const before = await store.status(now());
  const money = new RunMoney({ store, runId, prices: deps.prices ?? loadPriceTable(), budget: options.budget, now });
  money.checkPriced(before);
  counters.alreadyDone = before.counts.done;
  counters.total = Math.min(limit, before.counts.pending + before.counts.running);
  await store.startRun({ id: runId, host, pid, startedAt, options: deps.describe ?? {
    concurrency, rpm: options.rpm, tpm: options.tpm, maxAttempts, budget: options.budget?.runUsd ?? null, budgetTotal: options.budget?.totalUsd ?? null,
  } });
  emit('run:start', { runId, total: counters.total, alreadyDone: counters.alreadyDone, options: deps.describe ?? {} });
  const lanes = new Lanes(deps.baseUrl ?? provider.name, { rpm: options.rpm ?? null, tpm: options.tpm ?? null }, deps.boards ?? localBoards(now), now);
  await lanes.load(store);
  const slots = new Semaphore(concurrency);
  const timeout = options.timeout ?? 'auto';
  const inFlight = new InFlightRequests({ auto: timeout === 'auto', capMs: options.timeoutCapMs ?? 600_000, now, abortSignal: abort.signal });
  let lowered = false;

  const ctx: JobContext = {
    store, provider, lanes, breaker, slots, inFlight, counters, money, emit, runId, maxAttempts, leaseMs,
    retryDelayMs: options.retryDelayMs ?? 1000, maxRetryDelayMs: options.maxRetryDelayMs ?? 60_000,
    stopSignal: stop.signal, now, random: deps.random ?? Math.random,
    onFatal: (error) => {
      // Stop taking and sending at once; requests already out may be billed, so their answers are kept.
      fatal ??= error;
      stop.abort(new LlmqError('run stopped'));
    },
    onLocalLimit: (error) => {
      // Out of file descriptors: fewer requests at once, said once; no attempt is used.
      const before = slots.size;
      slots.shrink(Math.max(1, Math.min(before - 1, Math.floor(Math.max(1, counters.inFlight) * 0.75))));
      if (!lowered || slots.size < before) {
        emit('warning', { message: `${error.message}: concurrency lowered from ${before} to ${slots.size}. Raise the limit (ulimit -n) or lower --concurrency.` });
      }
      lowered = true;
    },
    onBudgetReached: () => stop.abort(new LlmqError('run stopped')),
  };
  const maxOutageMs = options.maxOutageMs ?? 15 * 60_000;
  const snapshot = (): ProgressSnapshot => counters.snapshot(now(), lanes.snapshots(), slots.size);

  let beats = 0;
  let lastBeat = startedAt;
  const heartbeat = setInterval(() => {
    const t = now();
    const rl = Math.max(0, ...lanes.all().map((l) => l.board.pausedUntil()));
    if (!breaker.isOpen) counters.paused = rl > t ? { reason: 'rate_limit', until: rl } : null;
    const since = breaker.openSince;
    if (since !== null && t - since > maxOutageMs) {
      outage ??= new ProviderError({
        message: `The provider at ${lanes.baseUrl} has been unreachable for ${Math.round((t - since) / 60_000)} min ` +
          `(--max-outage); the last try said: ${breaker.lastFailure}`,
        scope: 'run', reason: 'network',
      });
      fatal ??= outage;
      stop.abort(new LlmqError('run stopped'));
    }
    void lanes.refresh();
    store.heartbeat(runId, t, t + leaseMs, { ...counters.forStore(t, lanes.snapshots(), slots.size), alerts: deps.alerts?.() ?? [] })
      .then(() => {
        lastBeat = t;
        if (++beats % 5 === 0) return Promise.all([reclaim(), lanes.save(store)]);
        return undefined;
      })
      .catch((error) => {
        // A blip is survivable while our leases hold; past half the lease, stop taking work and
        // let requests in flight finish before others take the jobs back.
        if (now() - lastBeat > leaseMs / 2) {
          internal ??= error;
          stop.abort(new LlmqError('run stopped'));
        }
      });
  }, heartbeatMs);
  let outage: ProviderError | null = null;
  const progress = setInterval(() => emit('progress', snapshot()), options.progressMs ?? 500);

  const tasks = new Set<Promise<void>>();
  const unsent: string[] = [];
  // Set when a job finishes; the loop waits on it instead of polling.
  let finishedSinceWait = false;
  let wake: () => void = () => {};
  let claimed = 0;
  let reason: RunSummary['reason'] = 'drained';
  const maxInHand = concurrency * 2;
  const batch = Math.max(1, Math.ceil(concurrency / 2));

  try {
    while (!stop.signal.aborted) {
      // Jobs waiting on their lane's pace or pause hold no slot and are not counted against the
      // room in hand: a slow or paused lane must not keep other lanes from being claimed (each
      // lane holds at most `concurrency` jobs, see `saturated`).
      const active = tasks.size - lanes.waitingOnPace();
      const room = Math.min(maxInHand - active, limit - claimed);
      if (limit - claimed <= 0 && tasks.size === 0) { reason = 'limit'; break; }
      if (room >= batch || (room > 0 && active < concurrency)) {
        const t = now();
        // A lane that is full or paused takes no more: it must not hold the claims of the others.
        const skipModels = lanes.saturated(concurrency);
        const got = await store.claim({ owner: runId, limit: room, now: t, leaseUntil: t + leaseMs, maxAttempts, skipModels });
        counters.failed += got.exhausted;
        claimed += got.jobs.length;
        for (const job of got.jobs) {
          const task: Promise<void> = runJob(job, ctx)
            .then((outcome) => { if (outcome === 'unsent') unsent.push(job.key); })
            .catch((error) => { internal ??= error; halt(); })
            .finally(() => { tasks.delete(task); finishedSinceWait = true; wake(); });
          tasks.add(task);
        }
        if (got.jobs.length > 0 || got.exhausted > 0) continue;
      }
      if (tasks.size === 0) {
        // Before calling it drained, take back jobs of runs that died meanwhile, and wait for those
        // of a run on this host whose process is gone but whose heartbeat is still fresh.
        // (A "dying" run that holds nothing can hand nothing back: two live runs on machines with
        // the same hostname look dying to each other, and must not wait for each other forever.)
        const dying = (await reclaim()) && (await store.status(now())).counts.running > 0;
        const next = await store.nextPendingAt();
        if (next === null && !dying) { reason = 'drained'; break; }
        await sleep(next === null ? heartbeatMs : Math.min(Math.max(next - now(), 50), 1000), stop.signal).catch(() => {});
        continue;
      }
      // Wait for a job to finish, or a second (other runs may hand jobs back meanwhile).
      if (!finishedSinceWait) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 1000);
          wake = () => { clearTimeout(timer); resolve(); };
        });
      }
      finishedSinceWait = false;
    }
    if (stop.signal.aborted) reason = fatal || internal ? 'fatal' : money.reached ? 'budget' : 'signal';
    await Promise.allSettled([...tasks]);
    while (tasks.size > 0) await Promise.allSettled([...tasks]);
  } finally {
    for (const unlink of unlinks) unlink();
    clearInterval(heartbeat);
    clearInterval(progress);
    breaker.dispose();
    inFlight.dispose();
    const t = now();
    await lanes.save(store).catch(() => {});
    await lanes.close();
    try {
      if (unsent.length > 0) await store.release(runId, { refund: true, now: t, keys: unsent });
      await store.release(runId, { refund: false, now: t });
      await store.finishRun(runId, t, fatal ? 'fatal' : internal ? 'error' : reason, counters.forStore(t));
    } catch (error) {
      internal ??= error;
    }
  }
  if (internal) throw internal;

  const after = await store.status(now());
  const f = fatal as ProviderError | null;
  const reached = money.reached;
  const committed = await store.committed(runId);
  const summary: RunSummary = {
    runId, reason, done: counters.done, failed: counters.failed, retried: counters.retried, requests: counters.requests,
    rateLimited: counters.rateLimited, promptTokens: counters.promptTokens, completionTokens: counters.completionTokens,
    wallMs: now() - startedAt, remaining: after.counts.pending + after.counts.running, failedInStore: after.counts.failed,
    costUsd: committed.run,
    budget: reason === 'budget' && reached ? { ...reached, committedUsd: reached.scope === 'run' ? committed.run : committed.total } : null,
    fatal: f ? { message: f.message, reason: f.reason } : null,
  };
  emit('progress', snapshot());
  emit('run:end', summary);
  return summary;
}
