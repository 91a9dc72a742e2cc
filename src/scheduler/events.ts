import type { FinishReason } from '../provider/finish.js';
import type { FailureReason } from '../provider/types.js';
import type { RunStats, Usage, WrongEndpoint } from '../store/types.js';
import type { LaneSnapshot } from './lane.js';

/** Why dispatch is paused and until when (ms epoch); an outage's start and when the run gives up on it: as the run's live stats keep it. */
export type DispatchPause = NonNullable<RunStats['paused']>;

/** Live figures of a run, emitted on every `progress` event. */
export interface ProgressSnapshot {
  /** ms epoch the run started. */
  readonly startedAt: number;
  readonly now: number;
  /**
   * Jobs pending when the run started, grown by jobs that came to it since (enqueued, or handed
   * back), brought down to what it holds when nothing more is left to claim (runs sharing the queue
   * took the rest); once drained, what it did.
   */
  readonly total: number;
  /** Jobs done before this run started. */
  readonly alreadyDone: number;
  /** Finished by this run. */
  readonly done: number;
  readonly failed: number;
  /** Retries this run scheduled. */
  readonly retried: number;
  readonly inFlight: number;
  /** Claimed jobs waiting for a slot or the rate limiter. */
  readonly waiting: number;
  /** Jobs in backoff before their next try. */
  readonly backingOff: number;
  readonly requests: number;
  readonly rateLimited: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Jobs per second over the last ~30 s. */
  readonly jobsPerSecond: number;
  readonly tokensPerSecond: number;
  /**
   * Seconds left at the recent rate, or null when unknown: of this run's jobs, or with `shared` of
   * the queue's at every run's pace together.
   */
  readonly etaSeconds: number | null;
  /**
   * Other runs work the queue beside this one, or did since it started: the queue's progress, not
   * this run's share of it. Null when it works alone, and for a run with --limit.
   */
  readonly shared: SharedProgress | null;
  /**
   * Set while dispatch is paused: why and until when (ms epoch); for an outage, since when the
   * provider has been down and when the run gives up on it (--max-outage), as `paused` events say.
   */
  readonly paused: DispatchPause | null;
  /** Each (base URL, model) lane: its pace against its limits. */
  readonly lanes: readonly LaneSnapshot[];
  /** Requests allowed in flight now (lowered when this machine runs out of file descriptors). */
  readonly concurrency: number;
}

/**
 * The queue's progress while several runs work it (or did since this run started), as the last
 * read of the queue's counts and the runs' heartbeats said (each heartbeat), carried forward since
 * by this run's own finished jobs and the others' pace.
 */
export interface SharedProgress {
  /** Runs working the queue, this one included. */
  readonly runs: number;
  /** Jobs finished (done or failed) by any run since this one started. */
  readonly finished: number;
  /** Jobs not finished: pending, and running in any run. */
  readonly left: number;
  /** Every run's jobs per second together. */
  readonly jobsPerSecond: number;
}

export interface RunSummary {
  readonly runId: string;
  /** Why the run ended. `budget`: the next request did not fit --budget or --budget-total (jobs stay pending). */
  readonly reason: 'drained' | 'limit' | 'signal' | 'fatal' | 'budget';
  readonly done: number;
  readonly failed: number;
  readonly retried: number;
  readonly requests: number;
  /**
   * Of `requests`, the outage's probes: sent one at a time while the provider was down, a failed one
   * counted in no `retried` (nor, but for the run's last jobs failing on their own, in its job's tries).
   */
  readonly probes: number;
  readonly rateLimited: number;
  /** Of them, stray 429s (no rate-limit headers, from a provider whose answers have them): each retried, the pace kept. */
  readonly strayRateLimited: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Answers this run stored that were cut off at max_tokens (finish_reason `length`). */
  readonly cutOff: number;
  /** The --max-tokens the summary proposes for them (`retry-failed --cut-off`); 0 when none was cut off. */
  readonly cutOffRoom?: number;
  /** Answers this run stored that are a refusal or were stopped by the content filter. */
  readonly refused: number;
  /** Answers this run stored that ended by themselves with no text at all: billed, and most often a gateway's or a model's fault. */
  readonly empty: number;
  /**
   * Answers this run was sent and paid for and did not store: their job was answered by another run
   * meanwhile (this run frozen past its leases: a machine asleep, an event loop stalled; the first
   * answer is kept), or forgotten (`llmq forget`). Their attempts are recorded, their cost counted.
   */
  readonly answersNotStored: number;
  /**
   * Nothing answered in this run, and connections were refused (or the host not found): the endpoint
   * is most likely mistyped (the run said so as it went), so a command proposed after it leaves a
   * place for it rather than repeating it.
   */
  readonly unreachable: boolean;
  /**
   * How it showed its endpoint wrong (`unreachable`: nobody listened; or its stop said no chat
   * completions are there: 404 naming no model, 405, 501), null otherwise: the commands proposed after
   * it leave a place for the endpoint, and `status` after it does the same.
   */
  readonly wrongEndpoint: WrongEndpoint | null;
  readonly wallMs: number;
  /** Jobs left pending or running in the store when the run ended. */
  readonly remaining: number;
  /**
   * Of `remaining`, those in batches no run is collecting (their run ended or died), by the endpoint
   * they were sent to: a run --via batch there collects them; an online run never sends them again.
   */
  readonly uncollected: ReadonlyArray<{ readonly baseUrl: string; readonly jobs: number }>;
  /** Jobs failed in the whole store (not only this run's). */
  readonly failedInStore: number;
  /** Those failed jobs grouped by error, the ten most common (as `status` lists them). */
  readonly failuresInStore: ReadonlyArray<{ readonly error: string; readonly count: number }>;
  /**
   * USD this run committed: its answers, and the worst case of its tries that may be billed; null
   * when an answer of a model without a price came (its cost is unknown, never the sum of the rest).
   */
  readonly costUsd: number | null;
  /** Tries whose request left and no answer came (timed out, cut off, stopped in flight), at their worst case (usd null: no price). */
  readonly mayBeBilled: { readonly tries: number; readonly usd: number | null };
  /**
   * When reason is 'budget': which budget, what was committed in it once requests in flight had
   * finished, and the worst case of the request that did not fit.
   */
  readonly budget: {
    readonly scope: 'run' | 'total';
    readonly limitUsd: number;
    readonly committedUsd: number;
    readonly nextUsd: number;
  } | null;
  /** The run-fatal error, when reason is 'fatal'. */
  readonly fatal: {
    readonly message: string;
    readonly reason: FailureReason | 'internal';
    /** The provider's error code (`model_not_found`, `invalid_api_key`), when its answer gave one. */
    readonly code: string | null;
    /** The HTTP status of the answer that stopped it; null when none came (unreachable, an internal stop). */
    readonly status: number | null;
    /** Set when the stop was a model's shared request parameter refused before any answer (`decide`): which, and of which model. */
    readonly refused: RefusedParameter | null;
  } | null;
}

/** A request parameter a model's jobs share (`max_tokens`, `temperature`), refused for its first requests. */
export interface RefusedParameter {
  readonly param: string;
  readonly model: string;
}

/**
 * A try's answer that came and was not kept (not the JSON its request asks for, cut off, declined):
 * the provider billed it, so the run's cost counts it, as its job's stored cost does. `costUsd` at
 * the price known then; null when none was.
 */
export interface BilledAnswer {
  readonly usage: Usage;
  readonly costUsd: number | null;
}

/** Everything the scheduler tells its listeners. Progress bars and `--json` output are two listeners. */
export interface SchedulerEventMap {
  /**
   * `dyingMayHold`: jobs running when it started while a run on this host was dying (its process
   * gone, its heartbeat fresh): up to that many come back to this run within seconds; 0 if none was.
   * `silentMayHold`: the same while a run anywhere had stopped heartbeating: back when its leases run out.
   * `takenBack`: jobs of runs found dead at the start, pending again and counted in `total` (each keeps
   * the attempt the dead run started). `mockAnswersTakenBack`: jobs the offline mock had answered, put
   * back to pending by this run of a real provider, to be sent for real.
   */
  'run:start': {
    runId: string;
    total: number;
    alreadyDone: number;
    dyingMayHold?: number;
    silentMayHold?: number;
    takenBack?: number;
    mockAnswersTakenBack?: number;
    options: Record<string, unknown>;
  };
  'job:start': { key: string; attempt: number; model: string };
  /** `costUsd`: at the price known now; null when the model has none. `output`: the answer. */
  /** `finishReason`: how the answer ended (src/provider/finish.ts), `length` when cut off at max_tokens. */
  'job:done': {
    key: string;
    attempt: number;
    latencyMs: number;
    usage: Usage;
    output: string;
    costUsd?: number | null;
    finishReason?: FinishReason | null;
  };
  /** `billed`: the try's answer came and was not kept, and the provider billed it (`BilledAnswer`). */
  'job:retry': {
    key: string;
    attempt: number;
    status: number | null;
    reason: FailureReason;
    error: string;
    delayMs: number;
    counted: boolean;
    billed?: BilledAnswer;
  };
  /**
   * `item`: the id of the job's first item, for the run's first FAILED_JOBS_NAMED failures (the
   * progress lists that many by name; `llmq status` groups the rest), with `moreItems` when other
   * items share the job; null past them, or when no item points at the job.
   */
  'job:failed': {
    key: string;
    attempt: number;
    status: number | null;
    error: string;
    item: string | null;
    moreItems: boolean;
    billed?: BilledAnswer;
  };
  paused: {
    reason: 'rate_limit' | 'outage';
    untilMs: number;
    detail: string;
    /** An outage's: since when the provider has been failing, and when the run gives up on it (`--max-outage`), ms epoch. */
    downSinceMs?: number;
    givesUpAtMs?: number;
  };
  resumed: { reason: 'rate_limit' | 'outage' };
  /** Once when a stop begins; again with `aborting` when the requests in flight are aborted (a second signal, or the grace period ran out). */
  stopping: { graceMs: number; signal: string; aborting?: boolean };
  /** Something the user should know once (concurrency lowered, a limit learned). */
  warning: { message: string };
  progress: ProgressSnapshot;
  'run:end': RunSummary;
}

export type SchedulerEventName = keyof SchedulerEventMap;
export type SchedulerListener = <E extends SchedulerEventName>(event: E, payload: SchedulerEventMap[E]) => void;

/** Failures of a run named by their first item (`job:failed`'s `item`): as many as the progress lists by name. */
export const FAILED_JOBS_NAMED = 20;
