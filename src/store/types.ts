import type { BatchStore } from './batches.js';

/**
 * The job store as the rest of llmq sees it. SQLite is the embedded default; PostgreSQL implements
 * the same interface. Nothing outside a store implementation writes SQL.
 *
 * Every method is one short transaction. Times are milliseconds since the epoch, handed in by the
 * caller so tests can drive the clock.
 */

import type { Committed, ReserveRequest, ReserveResult, RunSpend } from './spend-types.js';
import type { AnsweredJob, JobToRun } from './estimate-types.js';

export type { Committed, ReserveRequest, ReserveResult, RunSpend } from './spend-types.js';
export type { AnsweredJob, JobToRun } from './estimate-types.js';

export const JOB_STATES = Object.freeze(['pending', 'running', 'done', 'failed'] as const);
export type JobState = (typeof JOB_STATES)[number];

/** What one attempt ended as. */
export const ATTEMPT_OUTCOMES = Object.freeze([
  'done', // 200 with a valid completion; the job is done
  'retry', // a retryable error; the job will be tried again (attempt counted)
  'failed', // fatal for the job, or the last attempt; the job is failed
  'not_counted', // rate limited, provider outage or run-fatal: the attempt was given back
  'released', // the run stopped while the request was in flight; the job went back to pending
] as const);
export type AttemptOutcome = (typeof ATTEMPT_OUTCOMES)[number];

/** One document ready to store: its item and the job (rendered request) it maps to. */
export interface EnqueueRow {
  readonly itemId: string;
  /** Where the document came from: a file path, `file:line`, or `-` for stdin. */
  readonly source: string;
  /** Extra fields kept from the input (JSONL fields other than id/text, batch method/url). */
  readonly meta: Record<string, unknown> | null;
  /** SHA-256 hex of `request`. */
  readonly key: string;
  /** The canonical JSON of the request body that will be sent. */
  readonly request: string;
  readonly model: string;
  /** Lower runs first. */
  readonly priority: number;
  /**
   * The priority was asked for (`enqueue --priority`): a pending or failed job of this row's request
   * that exists already takes it too (a failed one is sent at it after retry-failed); but a job that
   * items outside this call need as well only moves forward (to a lower priority), never back behind
   * what they asked. Without, a job keeps the priority it was first enqueued with.
   */
  readonly setsPriority?: boolean;
  /**
   * The id is a line number of a stream (stdin, a pipe: `-:12`), not a name: an item of this id that
   * holds another document came from an earlier stream, not an earlier version of this line. It is
   * kept, and this row is not enqueued (EnqueueResult.keptItems), where a named source's row would
   * move the item to its new document.
   */
  readonly positional?: boolean;
  /**
   * The key of the failed job whose items this row moves to the same request with more room
   * (`retry-failed --max-tokens`): the store remembers that this row's request supersedes that one,
   * in the same transaction, so that a later enqueue computing the old request again keeps the item
   * here (src/store/superseded.ts).
   */
  readonly supersedes?: string;
}

/** An item an enqueue moved to another job, and the two requests (JSON): the one it left, the one it has now. */
export interface MovedItem {
  readonly id: string;
  readonly was: string;
  readonly now: string;
}

export interface EnqueueResult {
  /** Jobs that did not exist before. */
  readonly newJobs: number;
  /** Items that did not exist before. */
  readonly newItems: number;
  /** Existing items whose document changed, now pointing at a new job. */
  readonly movedItems: number;
  /** Items already queued with exactly this request. */
  readonly unchanged: number;
  /**
   * Jobs dropped because the items that needed them moved to a new job (a changed document or
   * prompt) before they were answered: no item needs them, so they must never be sent and paid for.
   * Done jobs are kept (their answer was paid for); running ones finish.
   */
  readonly droppedJobs: number;
  /**
   * Answered jobs (or running ones, whose answer is on its way) that no item points at any more
   * once this call's rows are in: their items moved to new jobs. The answers are kept (paid for),
   * but the items will be sent again; often the prompt, model or options changed by mistake, and
   * the enqueue says so.
   */
  readonly orphanedAnswers: number;
  /** Pending or failed jobs that existed already and took the priority their rows asked for (`setsPriority`). */
  readonly reprioritized: number;
  /**
   * Moved items whose document now comes from another file than before (`en/readme.md` then
   * `fr/readme.md`, both id `readme.md`): likely another document under the same id, said so the
   * user can give them ids of their own. A JSONL line that only moved within its file is not one.
   * Absent when there is none (a load into an empty queue moves nothing).
   */
  readonly fromAnotherFile?: FromAnotherFile | null;
  /**
   * Items already queued, their document unchanged, that now come from another file (`in/a.txt`
   * then `copy/a.txt`: a folder renamed, moved or copied): the item takes the new source, which
   * `forget --source` and export then name. Absent when there is none.
   */
  readonly sourceRenamed?: FromAnotherFile | null;
  /**
   * The first item this call moved to another job: its id, the request of the job it left and of
   * the one it points at now. The enqueue says what changed when its own defaults made the change
   * (no --prompt given, say, where the items had one). Absent when nothing moved.
   */
  readonly firstMoved?: MovedItem | null;
  /** Ids of `positional` rows not enqueued because their item holds another document, which is kept. Absent when none. */
  readonly keptItems?: readonly string[];
  /**
   * Rows whose request `retry-failed --max-tokens` superseded (its answers were cut off): enqueued at
   * the superseding request instead (src/store/superseded.ts). Absent when none.
   */
  readonly keptRaised?: number;
  /**
   * New or moved items that point at a job that had failed (a document changed back, a file with the
   * text of one that failed): they stay failed with it, `retry-failed` sends it again. Absent when none.
   */
  readonly joinedFailed?: number;
}

/** How many moved items came from another file, and the first of them. */
export interface FromAnotherFile {
  readonly count: number;
  readonly first: { readonly id: string; readonly was: string; readonly now: string };
}

/** Both tallies as one: counts added, the earlier first kept. */
export function addFromAnotherFile(a: FromAnotherFile | null | undefined, b: FromAnotherFile | null | undefined): FromAnotherFile | null {
  if (!a || !b) return a ?? b ?? null;
  return { count: a.count + b.count, first: a.first };
}

/** The file of an item's source: a JSONL item's is `file:line`, whose line may move when the file is edited. */
export function sourceFile(source: string): string {
  return source.replace(/:\d+$/, '');
}

/** A job taken by a run: it is `running`, leased to the run, its attempt counter already raised. */
export interface ClaimedJob {
  readonly key: string;
  /** Canonical request JSON, exactly what goes on the wire. */
  readonly request: string;
  readonly model: string;
  readonly priority: number;
  /** Attempts including the one this claim started. */
  readonly attempts: number;
  /**
   * Its earlier tries say that errors an outage also gives (5xx, resets, timeouts, a body that is no
   * completion) are its own: it failed on one (its attempts used up while the provider answered
   * others), or had `OWN_FAILURES_SEEN` such tries counted (a try is counted only while no outage is
   * open). src/store/own-failures.ts; read by the claim, for jobs tried before only.
   */
  readonly failsOnItsOwn?: boolean;
}

export interface ClaimOptions {
  readonly owner: string;
  readonly limit: number;
  readonly now: number;
  readonly leaseUntil: number;
  /** Pending jobs that already used this many attempts (a crash loop) are failed instead of claimed. */
  readonly maxAttempts: number;
  /** Leave jobs of these models pending (their lane is full or paused). */
  readonly skipModels?: readonly string[];
}

/** Rate limits learned for one (base URL, model), remembered for the next run. */
export interface LaneLimitRow {
  /** The endpoint, without credentials or query. */
  readonly baseUrl: string;
  readonly model: string;
  /** Per minute; null when unknown. */
  readonly rpm: number | null;
  readonly tpm: number | null;
  /** `headers`: the provider said so; `429s`: found by backing off from rate-limit errors. */
  readonly source: 'headers' | '429s';
  /** ms epoch when learned. */
  readonly at: number;
}

export interface ClaimResult {
  readonly jobs: ClaimedJob[];
  /** Jobs failed during this claim because their attempts were used up. */
  readonly exhausted: number;
}

export interface Usage {
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Of the prompt tokens, those the provider read from its prompt cache (priced lower), when it says. Not stored. */
  readonly cachedTokens?: number;
}

/** One try of one job, as stored in `attempts`. */
export interface AttemptRecord {
  readonly key: string;
  readonly runId: string;
  /** The job's attempt number this try ran as (not counted tries repeat the number). */
  readonly attempt: number;
  readonly startedAt: number;
  readonly endedAt: number;
  /** HTTP status, or null for a network error/timeout. */
  readonly status: number | null;
  readonly outcome: AttemptOutcome;
  readonly error: string | null;
  readonly usage: Usage | null;
  /**
   * USD this try cost at the price known then: its answer, 0 when the provider answered with an
   * error, the worst case when `mayBeBilled`. Null (or absent) when no price was known.
   */
  readonly costUsd?: number | null;
  /** The request left and no answer came back (timeout, reset, stopped in flight): the provider may bill it. */
  readonly mayBeBilled?: boolean;
  /** The --budget reservation (USD) this try settles, if one was made for it. */
  readonly reservedUsd?: number;
}

export interface Completion {
  readonly owner: string;
  readonly output: string;
  /** The provider's full response body (JSON), kept for the OpenAI batch export. */
  readonly response: string;
  readonly usage: Usage;
  readonly attempt: AttemptRecord;
}

export interface RunInfo {
  readonly id: string;
  readonly host: string;
  readonly pid: number;
  readonly startedAt: number;
  /** The options the run was started with (no secrets), for `status`. */
  readonly options: Record<string, unknown>;
}

/** Live figures a run reports on each heartbeat, so `status` in another terminal can show them. */
export interface RunStats {
  readonly done: number;
  readonly failed: number;
  readonly retried: number;
  readonly requests: number;
  readonly rateLimited: number;
  /** Of them, strays: 429s saying no limit, taken for the provider's noise (`Lane.rateLimitedBy`). Absent in runs of older versions. */
  readonly strayRateLimited?: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Jobs per second over the recent window. */
  readonly jobsPerSecond: number;
  /** Requests allowed in flight now. Absent in runs of older versions. */
  readonly concurrency?: number;
  readonly inFlight?: number;
  /** Jobs it holds that wait out a backoff before their next try: `running` in the store all the while. */
  readonly backingOff?: number;
  /** Set while the run's dispatch is paused: why and until when (ms epoch), an outage's start and when the run gives up on it. */
  readonly paused?: {
    readonly reason: 'rate_limit' | 'outage';
    readonly until: number;
    readonly downSince?: number;
    readonly givesUpAt?: number;
  } | null;
  /** Each model lane's pace: the limits it paces at, its rate and pause. */
  readonly lanes?: ReadonlyArray<RunLaneStats>;
  /** Alerts (llmq run --alert-*) whose condition holds now. */
  readonly alerts?: ReadonlyArray<RunAlert>;
  /** Set when it ended: the error that stopped it (exit reason `fatal` or `error`), one line. */
  readonly error?: string;
  /** Set when it ended on its budget: which one it reached, its own `--budget` or the queue's `--budget-total`. */
  readonly budgetReached?: 'run' | 'total';
  /** Set with `budgetReached` when the budget stopped it with much of it left: one request may cost more than it holds (`budgetTooSmallForRequests`). */
  readonly budgetTooSmall?: true;
  /**
   * Set when it ended showing its endpoint wrong: nobody listened there and nothing answered
   * (`RunSummary.unreachable`), or its stop said no chat completions are there (`stopNamesWrongEndpoint`).
   * A run proposed after it leaves a place for another (`--base-url URL`).
   */
  readonly wrongEndpoint?: WrongEndpoint;
}

/** How a run showed its endpoint wrong: nobody listened there, or it takes no chat completions (404 naming no model, 405, 501). */
export type WrongEndpoint = 'nobody-listened' | 'no-completions';

/** A run's alert threshold that is crossed now. */
export interface RunAlert {
  readonly kind: 'failed' | 'oldest' | 'error-rate';
  /** One line for people: what crossed what. */
  readonly message: string;
  /** Jobs failed, ms waited, or a share of tries. */
  readonly value: number;
  readonly threshold: number;
  /** ms epoch it fired. */
  readonly since: number;
}

/** One lane of a run as stored on its heartbeat (for dashboards on other machines). */
export interface RunLaneStats {
  readonly model: string;
  readonly rpm: number | null;
  readonly tpm: number | null;
  readonly requestsPerSecond: number;
  readonly inFlight: number;
  readonly pausedUntil: number | null;
  readonly rateLimited: number;
  /** Since when the Redis of --redis has not answered, the lane's sending waiting for it. */
  readonly boardDownSince?: number | null;
}

export interface RunRow extends RunInfo {
  readonly heartbeatAt: number;
  readonly endedAt: number | null;
  readonly exitReason: string | null;
  readonly stats: RunStats | null;
  /** Its money, when asked for (`dumpRuns`, `status`); absent for runs from before llmq kept it. */
  readonly spend?: RunSpend | null;
}

export interface StatusSnapshot {
  /** Jobs by state; `done` leaves out `orphanedAnswers`. */
  readonly counts: Record<JobState, number>;
  /** The jobs items need (and jobs being answered that none needs now). */
  readonly total: number;
  /**
   * Answered jobs no item needs any more (an item's text changed and it moved to a new job): kept,
   * as they were paid for, and reused if the old text is enqueued again; not in `counts` or `total`.
   */
  readonly orphanedAnswers: number;
  readonly items: number;
  readonly tokens: { readonly prompt: number; readonly completion: number };
  /** Tokens and cost per model. */
  readonly byModel: ReadonlyArray<ModelTally>;
  /** Failed jobs grouped by error, most common first. */
  readonly failures: ReadonlyArray<{ error: string; count: number }>;
  /** Pending jobs that already had at least one attempt (waiting to be retried). */
  readonly retrying: number;
  readonly oldestPendingAt: number | null;
  /** Runs that have not ended, newest first. */
  readonly activeRuns: readonly RunRow[];
  readonly lastRun: RunRow | null;
  /** Rate limits learned per (base URL, model). */
  readonly lanes: readonly LaneLimitRow[];
  /** Every run that kept its money in `spend`, newest first, with that money. */
  readonly spend: ReadonlyArray<RunRow & { readonly spend: RunSpend }>;
  /** What the last enqueue of each input rejected (of the newest `KEPT_REJECTED_SOURCES`), inputs with none left out; newest first. */
  readonly rejected: readonly SourceRejections[];
}

/**
 * What an enqueue rejected of one input (a folder or file as `sourcePath` spells it, `-` for stdin):
 * kept until an enqueue reads that input again, so a rejection printed among thousands of lines
 * can be found later (`status`).
 */
export interface SourceRejections {
  readonly source: string;
  /** Documents rejected. */
  readonly rejected: number;
  /**
   * The first of them, in input order (at most `KEPT_REJECTIONS_PER_SOURCE`). `keptItem`: the id of
   * an item enqueued before that the rejected document was, which keeps its earlier document and
   * answer (`EnqueueSummary.keptEarlier`), though the input no longer holds it.
   */
  readonly first: ReadonlyArray<{ readonly path: string; readonly line?: number; readonly reason: string; readonly keptItem?: string }>;
  /** When that enqueue began. */
  readonly at: number;
}

/** Rejections kept per input: enough to find and fix the kind of mistake; the count says the rest. */
export const KEPT_REJECTIONS_PER_SOURCE = 20;
/** Inputs whose rejections are kept, the newest: a queue fed many small inputs keeps its status cheap. */
export const KEPT_REJECTED_SOURCES = 100;

/** One model's jobs, tokens and stored cost. */
export interface ModelTally {
  readonly model: string;
  readonly jobs: number;
  readonly done: number;
  readonly pending: number;
  readonly running: number;
  readonly prompt: number;
  readonly completion: number;
  /** Tokens of its done jobs alone: what an answer of this model takes, on average. */
  readonly donePrompt: number;
  readonly doneCompletion: number;
  /** USD of its answers, as stored when each came. */
  readonly storedUsd: number;
  /** Tokens of answers stored without a cost (answered before llmq kept costs, or without a price then). */
  readonly unpricedPrompt: number;
  readonly unpricedCompletion: number;
  /**
   * Its jobs dropped unanswered whose tries were billed (tally.ts's DROPPED: `forget`, a failed job
   * no item needs): not in `jobs`, their cost in `storedUsd`. A model with `jobs` 0 has only these.
   */
  readonly dropped: number;
}

export interface KeyItemRow {
  readonly key: string;
  readonly itemId: string;
}

/** An item a folder's walk made (`QueueReader.folderItems`): `seq` is its place in input order. */
export interface FolderItemRow {
  readonly seq: number;
  readonly id: string;
}

export interface ItemSourceRow {
  readonly id: string;
  readonly source: string;
}

export interface ItemDetail {
  readonly id: string;
  readonly source: string;
  readonly meta: Record<string, unknown> | null;
  readonly job: JobRow;
  readonly attempts: ReadonlyArray<AttemptRecord & { readonly latencyMs: number }>;
}

export interface JobRow {
  readonly key: string;
  readonly request: string;
  readonly model: string;
  readonly state: JobState;
  readonly priority: number;
  readonly attempts: number;
  readonly runAfter: number;
  readonly leaseOwner: string | null;
  readonly leaseExpiresAt: number | null;
  readonly output: string | null;
  readonly response: string | null;
  readonly usage: Usage | null;
  readonly error: string | null;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly finishedAt: number | null;
  /** USD of the answer at the price known when it came; null until done or without a price. */
  readonly costUsd?: number | null;
  /**
   * Of the job's last try; null before schema 7 (SQLite) or the latency migration. Carried by a copy
   * so that the attempts loaded after the job leave it alone (their triggers set it otherwise).
   */
  readonly latencyMs?: number | null;
}

export interface ExportFilter {
  readonly states?: readonly JobState[];
  /**
   * Whether rows carry the provider response and the latency (default both): a format that writes
   * neither asks for neither, as each costs a read per row (the latency a lookup in attempts).
   */
  readonly response?: boolean;
  readonly latency?: boolean;
  /** Only items whose seq is in (afterSeq, upToSeq]: a block of the export, for a reader working beside another. */
  readonly items?: { readonly afterSeq: number; readonly upToSeq: number };
}

/** The first and last item seq (input order), or null for a queue with no items. */
export interface ItemSeqSpan {
  readonly first: number;
  readonly last: number;
}

/** One item joined with its job, in input order. */
export interface ExportRow {
  readonly id: string;
  readonly source: string;
  readonly meta: Record<string, unknown> | null;
  readonly key: string;
  readonly state: JobState;
  readonly model: string;
  readonly output: string | null;
  readonly response: string | null;
  readonly error: string | null;
  readonly attempts: number;
  readonly usage: Usage | null;
  /** Latency of the attempt that finished the job, if any. */
  readonly latencyMs: number | null;
  /** USD of the answer at the price known when it came; null until done or without a price. */
  readonly costUsd: number | null;
}

/** An item as stored, for moving a whole queue (`llmq copy`). */
export interface ItemRow {
  readonly id: string;
  readonly source: string;
  readonly jobKey: string;
  readonly meta: Record<string, unknown> | null;
  readonly createdAt: number;
  readonly updatedAt: number;
}

/** One stored `attempts` row, for moving a whole queue (`llmq copy`). */
export interface AttemptRow extends AttemptRecord {
  readonly latencyMs: number;
}

/** Where a page of `failedJobsToResend` ended: its last job's. */
export interface FailedJobCursor {
  readonly createdAt: number;
  readonly seq: number;
}

/** A failed job with what enqueueing its items again needs (`failedJobsToResend`). */
export interface FailedJobToResend extends FailedJobCursor {
  readonly key: string;
  /** Why it failed; null for a done job (`cutOffAnswersToResend`). */
  readonly error: string | null;
  readonly request: string;
  readonly model: string;
  readonly priority: number;
  readonly items: ReadonlyArray<{ readonly id: string; readonly source: string; readonly meta: Record<string, unknown> | null }>;
}

/** An item of a failed job, for listing the items behind one failure reason. */
export interface FailedItemRow {
  readonly id: string;
  readonly source: string;
  readonly key: string;
  readonly attempts: number;
}

/**
 * Items to forget: by id, or every item read from a source path as enqueue spells it (src/ingest/folder.ts,
 * `sourcePath`): a text file's item, a JSONL file's lines (`file:N`), every file under a folder.
 * Ids named twice count once.
 */
export type ForgetWhich = { readonly ids: readonly string[] } | { readonly source: string };

export interface ForgetResult {
  /** Items removed. */
  readonly items: number;
  /** Their ids, sorted: what a dry run of `--source` lists before anything is removed. */
  readonly ids: readonly string[];
  /** Jobs dropped unsent, no item needing them any more. */
  readonly droppedJobs: number;
  /** Answered (or running) jobs kept that no item needs now. */
  readonly orphanedAnswers: number;
  /** Ids asked for that name no item. */
  readonly unknownIds: readonly string[];
}

/** Which jobs `jobsToRun` takes besides the pending ones: see there. */
export interface JobsToRunOptions {
  readonly mockAnswersBefore?: number;
  readonly spared?: readonly string[];
  readonly deadOwners?: readonly string[];
}

export interface RetryFailedFilter {
  /** Only failures whose error contains this text (case-insensitive). */
  readonly errorContains?: string;
  /** Only failures whose error is exactly this (`unknown error` for none), as `status` groups them. */
  readonly errorIs?: string;
  /** Not the failures whose error contains this text (case-insensitive). */
  readonly errorLacks?: string;
}

/**
 * The store is one object, but each part of llmq sees only the role it uses (the scheduler cannot
 * read an export, `status` cannot claim a job). `Store` is their union, with opening and closing.
 */

/** Where a store keeps its data, for messages and for choosing an export's format. */
export interface StoreIdentity {
  readonly kind: 'sqlite' | 'postgres';
  /** Where the data lives, for messages (a path, or a URL without its password). */
  readonly location: string;
  /**
   * What became of the queue's file since it was opened (`rm q.db*`, another enqueue made there):
   * null while it is the one there, and always for a queue with no file of its own (PostgreSQL,
   * `:memory:`). A run's heartbeat and the dashboard's poll look.
   */
  queueFileChange(): 'removed' | 'replaced' | null;
}

/** The job state machine: documents in, jobs claimed, tried, answered, failed or given back. */
export interface EndLoadOptions {
  /**
   * Called as a bulk load starts building its indexes, the long last step of a big load (ten
   * million documents: minutes). `resumable`: a process that dies meanwhile loses nothing, as the
   * next command to open the queue finishes the build (SQLite, whose build also holds the thread,
   * so no signal handler runs until it ends); false where dying would undo the load (PostgreSQL's is
   * one transaction).
   */
  readonly onIndexing?: (o: { readonly resumable: boolean }) => void;
}

export interface JobQueue {
  // ingest
  enqueue(rows: readonly EnqueueRow[], now: number): Promise<EnqueueResult>;
  /**
   * What an enqueue rejected of each input it read whole, in place of what an earlier enqueue of that
   * input rejected (an input with none rejected now clears its entry).
   */
  keepRejections(sources: readonly SourceRejections[]): Promise<void>;
  /**
   * Optional: an enqueue of many batches begins and ends (`endLoad` also after a failure). SQLite
   * loads a fresh queue in bulk between them, building its key indexes at the end; `repeatedJobs`
   * are jobs its batches counted as new that repeated a key loaded earlier in the same load.
   */
  beginLoad?(): void;
  endLoad?(o?: EndLoadOptions): Promise<{ repeatedJobs: number }>;

  // one function per change
  claim(options: ClaimOptions): Promise<ClaimResult>;
  /**
   * Raise the attempt counter of a job this run holds, before retrying it, and renew its lease.
   * Returns the job's attempts now, or null if the run no longer holds it.
   */
  startRetry(key: string, owner: string, now: number, leaseUntil: number): Promise<number | null>;
  /**
   * Store the answer and mark the job `done` in one transaction, whoever holds it now (an answer
   * paid for is kept even if the lease lapsed). False if the job was already done.
   */
  complete(key: string, completion: Completion): Promise<boolean>;
  /**
   * Record a try that did not finish the job; `countAttempt=false` gives the attempt back. `error`
   * becomes the job's last error; null keeps the one it has (a try this run stopped is no error of the job's).
   */
  recordAttempt(attempt: AttemptRecord, options: { countAttempt: boolean; error: string | null }): Promise<void>;
  /** Mark a held job `failed` with its reason. */
  fail(key: string, owner: string, error: string, attempt: AttemptRecord | null, now: number): Promise<void>;
  /**
   * Give jobs the run holds back (`pending`): those in `keys`, or all of them when `keys` is
   * omitted. `refund` also gives back the attempt their claim raised (the request never went out).
   */
  release(owner: string, options: { refund: boolean; now: number; keys?: readonly string[] }): Promise<number>;
  /** The earliest `run_after` among pending jobs, or null when nothing is pending. */
  nextPendingAt(): Promise<number | null>;
  /** Failed jobs back to `pending` with fresh attempts. */
  retryFailed(filter: RetryFailedFilter, now: number): Promise<number>;
  /**
   * Remove items: those with the given ids, or every item of a source (`sourceItems`). A job no
   * item needs then is dropped when it was never answered (pending, failed: never to be sent), and
   * kept, marked orphaned, when answered or being answered (its answer was paid for), as enqueue
   * does with the old job of a changed document. With `dryRun` nothing changes: the counts say
   * what would.
   */
  forgetItems(which: ForgetWhich, o: { now: number; dryRun?: boolean }): Promise<ForgetResult>;
  /**
   * Jobs answered by the offline mock provider (its runs, online or batch, that ended or went quiet
   * before `quietSince`) back to `pending` without their stand-in answers, once per mock run: a run
   * of a real provider sends them. Returns how many.
   */
  takeBackMockAnswers(now: number, quietSince: number): Promise<number>;
}

/** The runs working a queue, and the leases they hold through their heartbeats. */
export interface RunRegistry {
  startRun(run: RunInfo): Promise<void>;
  /**
   * Renew the run's heartbeat and the lease of every job it holds; store its live stats, and the keys
   * of the jobs it holds whose counted try has not gone out (`unsent`): should the run die, those get
   * that attempt back when they are taken back (src/store/unsent.ts). Says which of the jobs it holds
   * no item needs any more (an enqueue moved their items to other requests, or `forget` removed
   * them, since the claim): the run sends them no more.
   */
  heartbeat(runId: string, now: number, leaseUntil: number, stats: RunStats, unsent?: readonly string[]): Promise<readonly string[]>;
  /**
   * This machine's runs stopped by a signal (Ctrl-Z), as a sentence saying how to let them go on;
   * null for none. SQLite only: one stopped inside a write holds the queue's lock (SQLITE_BUSY).
   */
  stoppedRuns?(): string | null;
  /**
   * Close the run's row. Money it still has reserved (a request whose try the store failed to record,
   * a disk full under it) becomes "may be billed", as a dead run's does (`reclaim`): it may have been.
   */
  finishRun(runId: string, now: number, exitReason: string, stats: RunStats): Promise<void>;
  /** Runs that have not ended (for finding dead owners on this host). */
  activeRuns(): Promise<RunRow[]>;
  /**
   * Put `running` jobs back to `pending` when their lease expired or their owner is known dead.
   * Dead owners' runs are marked ended. The attempt the dead run started stays counted, and so
   * does the money it had reserved: those requests may have left, so it becomes "may be billed".
   * Submissions of ended or dead runs that never uploaded their file are abandoned, their jobs
   * pending again with their attempt (`BatchStore.abandonUnsent`). The expired leases of `spared`
   * owners stay theirs: runs whose process is stopped (Ctrl-Z), which send what they hold when continued.
   */
  reclaim(now: number, deadOwners: readonly string[], spared?: readonly string[]): Promise<number>;
}

/** Money under --budget: reservations, settled by the attempt rows (see AttemptRecord.reservedUsd). */
export interface RunBudget {
  /** Hold a request's worst case if it fits every budget given, in one transaction with the check. */
  reserve(request: ReserveRequest): Promise<ReserveResult>;
  /** Give back a reservation whose request never left. */
  unreserve(runId: string, usd: number, now: number): Promise<void>;
  committed(runId: string): Promise<Committed>;
}

/** Rate limits learned per (base URL, model), remembered for the next run. */
export interface LaneMemory {
  saveLaneLimits(row: LaneLimitRow): Promise<void>;
  laneLimits(): Promise<LaneLimitRow[]>;
}

/** Reads for people and tools: `status`, `show`, `export`, `estimate`, `serve`. None of them writes jobs. */
export interface QueueReader {
  /** The queue's counts, failures, runs, learned limits and money, as stored now (nothing in it depends on the clock). */
  status(): Promise<StatusSnapshot>;
  item(id: string): Promise<ItemDetail | null>;
  /** The jobs in each state, as `status` counts them, and nothing else: what a run reads each heartbeat while other runs work the queue. */
  stateCounts(): Promise<Record<JobState, number>>;
  /**
   * For each of `ids`, in order, the state of the job of the item of that id, or null when the queue
   * holds no such item. By position, not by the id read back: an id holding a lone surrogate (a JSON
   * escape) reads back otherwise than it was written. An enqueue asks about the documents it
   * rejected: such an item keeps the document enqueued before (`EnqueueSummary.keptEarlier`).
   */
  itemStates(ids: readonly string[]): Promise<Array<JobState | null>>;
  /**
   * Up to `limit` items, in input order after `afterSeq`, that a walk of `folder` made: their source
   * is the folder's file of their id (`folder/id`; `id` itself for `.`), leaving out `file:line`
   * ids (JSONL lines and stdin, whose id can be their source too). An enqueue of the folder asks,
   * to find the files gone since (`EnqueueSummary.goneFiles`). A scan of the items, a page at a time.
   */
  folderItems(folder: string, limit: number, afterSeq?: number): Promise<FolderItemRow[]>;
  /**
   * The ids of up to `limit` items named by their line in the JSONL file `file` (its lines without
   * an id): id and source both `file:N`; in the order of the ids' index (by bytes on SQLite, the
   * database's collation on PostgreSQL), after `afterId`. An enqueue of the file asks, to find those
   * it did not read again (`EnqueueSummary.movedLines`). A range of that index on SQLite, a walk of
   * all of it on PostgreSQL, a page at a time.
   */
  lineItemIds(file: string, limit: number, afterId?: string): Promise<string[]>;
  /**
   * Up to `limit` items whose id ends in `/` and `name` (`sub/n4.txt` for `n4.txt`), in input order:
   * what `show` suggests for an id given without the subfolder it is in. A scan of the items.
   */
  itemsEndingIn(name: string, limit: number): Promise<ItemSourceRow[]>;
  /**
   * Up to `limit` items whose job's key starts with `prefix` (lowercase hex: `run` names a failed job
   * by the first 12 characters of its key), by key, then in input order; with `afterKey`, only
   * jobs whose key sorts after it. A range of the key index.
   */
  itemsByKeyPrefix(prefix: string, limit: number, afterKey?: string): Promise<KeyItemRow[]>;
  /**
   * Items of failed jobs whose error is exactly `error` (`unknown error` for none, as `status`
   * groups them), at most `limit`, oldest job first. Walks failed jobs only (oldest first, stopping at the limit), never all items.
   */
  failedItems(error: string, limit: number): Promise<FailedItemRow[]>;
  /**
   * Failed jobs the filter takes (as `retryFailed`'s), after `after` (the last of the page before;
   * null for the first), oldest first (the order of the index of states, so each page costs its own
   * size), at most `limit`, each with its request and its items as an enqueue would write them again:
   * what `retry-failed --max-tokens` enqueues with the request changed.
   */
  failedJobsToResend(filter: RetryFailedFilter, after: FailedJobCursor | null, limit: number): Promise<FailedJobToResend[]>;
  /**
   * Done jobs whose answer was cut off at max_tokens (`finish_reason` "length", kept as done), as
   * `failedJobsToResend` gives failed ones, after `after`, oldest first; of up to `limit` done jobs
   * looked at, whose last is `last` (null when none was left to look at: the end).
   */
  cutOffAnswersToResend(after: FailedJobCursor | null, limit: number): Promise<{ jobs: FailedJobToResend[]; last: FailedJobCursor | null }>;
  /**
   * Items in input order with their jobs, a page (an array of rows) at a time: the reader's loop
   * then awaits once a page, not once a row (at a million rows the await alone is a tenth of the export).
   */
  exportPages(filter: ExportFilter): AsyncIterable<readonly ExportRow[]>;
  /** Where input order starts and ends now: an export splits the span in blocks (both ends of the seq index). */
  itemSeqSpan(): Promise<ItemSeqSpan | null>;
  /**
   * The jobs a run started now would take, in its order, a page at a time (`llmq estimate`). With
   * `mockAnswersBefore` (a run of a real provider), also the jobs it would take back from the mock
   * runs quiet since then (`takeBackMockAnswers`). The expired leases of `spared` owners are left
   * out, as `reclaim` leaves them (runs stopped here with Ctrl-Z); the jobs of `deadOwners` are in,
   * their leases held or not, as a run takes them back at once (runs here whose process is gone).
   */
  jobsToRun(now: number, o?: JobsToRunOptions): AsyncIterable<JobToRun>;
  /** Up to `limit` answered jobs of a model, newest first; `withRequest` adds each request. */
  answered(model: string, o: { limit: number; withRequest: boolean }): Promise<AnsweredJob[]>;
}

/**
 * Moving a whole queue (`llmq copy`): each dump streams one table in stored order (jobs and items
 * FIFO, attempts oldest first) a page at a time; each load appends one batch in one transaction,
 * keeping the batch's order, and writes rows exactly as given (states, leases and all).
 */
export interface QueueCopier {
  dumpJobs(): AsyncIterable<JobRow>;
  dumpItems(): AsyncIterable<ItemRow>;
  dumpAttempts(): AsyncIterable<AttemptRow>;
  dumpRuns(): AsyncIterable<RunRow>;
  loadJobs(rows: readonly JobRow[]): Promise<void>;
  loadItems(rows: readonly ItemRow[]): Promise<void>;
  loadAttempts(rows: readonly AttemptRow[]): Promise<void>;
  loadRuns(rows: readonly RunRow[]): Promise<void>;
  /** Once every item is in: marks the answered jobs no item points at (StatusSnapshot.orphanedAnswers). */
  markOrphans(): Promise<void>;
  /** The requests `retry-failed --max-tokens` superseded, and what superseded each (src/store/superseded.ts): a few rows per raise. */
  dumpSuperseded(): Promise<Array<{ readonly key: string; readonly byKey: string }>>;
  loadSuperseded(rows: ReadonlyArray<{ readonly key: string; readonly byKey: string }>): Promise<void>;
  /** What the billed tries of jobs dropped unanswered cost, by model (tally.ts's DROPPED): kept in the queue's cost. */
  dumpDroppedCosts(): Promise<DroppedCost[]>;
  loadDroppedCosts(rows: readonly DroppedCost[]): Promise<void>;
  /**
   * Mark this queue as written by a copy from `source` until `endCopy`: one stopped halfway is then
   * told from a whole queue (`copyInProgress`), and refused by the commands that use a queue.
   */
  beginCopy(source: string, now: number): Promise<void>;
  endCopy(): Promise<void>;
  /** The copy writing this queue, or the one that stopped before it finished; null when none. */
  copyInProgress(): Promise<CopyInProgress | null>;
}

/** Of a model, the jobs dropped unanswered whose tries were billed, and what those tries cost. */
export interface DroppedCost {
  readonly model: string;
  readonly jobs: number;
  readonly usd: number;
}

export interface CopyInProgress {
  readonly source: string;
  readonly startedAt: number;
}

/** The batch lane's ledger of submissions to a provider's Batch API. */
export interface BatchLedger {
  readonly batches: BatchStore;
}

/** Whole-queue reads and writes for `llmq copy`, kept apart from the store's other roles. */
export interface CopyEnds {
  readonly copier: QueueCopier;
}

/** An open store: every role, and `close`. Only the code that opens a store holds all of it. */
export interface Store extends StoreIdentity, JobQueue, RunRegistry, RunBudget, LaneMemory, QueueReader, CopyEnds, BatchLedger {
  close(): Promise<void>;
}
