import type { RunSummary, SchedulerEventMap, SchedulerListener } from '../scheduler/events.js';
import { deliverTo, type DeliverOptions } from './deliver.js';
import { HookQueue, type HookCounts } from './queue.js';
import type { HookTarget } from './target.js';
import { jobItems, type JobItems } from '../store/job-items.js';
import type { QueueReader } from '../store/types.js';

/** What `--on-job` receives for each job that finished (done) or failed for good. */
export interface JobHookBody {
  readonly event: 'job';
  readonly runId: string;
  readonly key: string;
  /**
   * The ids of the items (documents) whose request this job is, at most JOB_HOOK_ITEMS; `moreItems`
   * when there are others. Empty when the store could not be read (or every item was forgotten).
   */
  readonly items: readonly string[];
  readonly moreItems: boolean;
  readonly state: 'done' | 'failed';
  readonly attempts: number;
  readonly output?: string;
  readonly error?: string;
  readonly latencyMs?: number;
  readonly usage?: { readonly promptTokens: number; readonly completionTokens: number };
  /** How the answer ended (src/provider/finish.ts): `length` when cut off at max_tokens; null when the provider did not say. */
  readonly finishReason?: string | null;
}

/** A job hook body's fields past the job and its items: how it ended. */
type JobOutcome = Omit<JobHookBody, 'event' | 'runId' | 'key' | 'items' | 'moreItems'>;

/** What `--on-done` receives once, when the run ends. */
export interface DoneHookBody {
  readonly event: 'done';
  readonly runId: string;
  readonly exitCode: number;
  /** Why the run ended: drained, limit, signal or fatal. */
  readonly reason: RunSummary['reason'];
  readonly counts: {
    readonly done: number;
    readonly failed: number;
    readonly retried: number;
    readonly remaining: number;
    readonly failedInStore: number;
  };
  readonly requests: number;
  readonly rateLimited: number;
  readonly tokens: { readonly prompt: number; readonly completion: number };
  /** As the run's summary says it (`RunSummary.costUsd`): null when an answer of a model without a price came. */
  readonly costUsd: number | null;
  readonly mayBeBilled: { readonly tries: number; readonly usd: number | null };
  readonly durationMs: number;
  readonly error: string | null;
  /** How --on-job fared, when set. */
  readonly jobHooks: HookCounts | null;
}

export interface RunHooksOptions extends DeliverOptions {
  readonly onDone?: HookTarget;
  readonly onJob?: HookTarget;
  /** Where alerts (llmq run --alert-*) go. */
  readonly onAlert?: HookTarget;
  /** Job bodies waiting at most. @default 1000 */
  readonly capacity?: number;
  /** Told once per hook, the first time one of its tries fails, with why. */
  readonly onTrouble?: (hook: '--on-job' | 'alerts', why: string) => void;
  /**
   * The items of a job, for `--on-job`'s bodies (`jobItemsFrom`), read as each body goes out (by the
   * hook's two senders, not the run): the store must stay open until `finish` returns. Without, bodies list none.
   */
  readonly itemsOfJob?: (key: string) => Promise<JobItems>;
}

/** A job hook body lists this many of its job's item ids at most: identical documents can share one job by the thousand. */
export const JOB_HOOK_ITEMS = 100;

/** `itemsOfJob` read from a queue: the job's first JOB_HOOK_ITEMS items, in the order they were enqueued. */
export function jobItemsFrom(store: Pick<QueueReader, 'itemsByKeyPrefix'>): (key: string) => Promise<JobItems> {
  return (key) => jobItems(store, key, JOB_HOOK_ITEMS);
}

const NO_ITEMS: JobItems = { ids: [], more: false };

export interface HookReport {
  readonly job: HookCounts | null;
  readonly alert: HookCounts | null;
  readonly done: HookCounts | null;
}

export interface RunHooks {
  readonly listener: SchedulerListener;
  /** Which hooks there are: what the wait at the end is for. */
  readonly given: { readonly job: boolean; readonly alert: boolean; readonly done: boolean };
  /** Queue an alert body for the alert hook (no-op without one). */
  alert(body: object): void;
  /**
   * Wait at most `jobDeadlineMs` for job hooks still queued (the rest are dropped), then send the
   * done hook, waiting at most `doneDeadlineMs` for it (retries included).
   */
  finish(summary: RunSummary, exitCode: number, deadlines?: { jobDeadlineMs?: number; doneDeadlineMs?: number }): Promise<HookReport>;
}

/** The run's hooks, as a listener on its events: the run never waits for a hook. */
export function createRunHooks(o: RunHooksOptions): RunHooks {
  const trouble = (hook: '--on-job' | 'alerts') => (why: string) => o.onTrouble?.(hook, why);
  const jobs = o.onJob ? new HookQueue(deliverTo(o.onJob, o), { capacity: o.capacity, onFirstTrouble: trouble('--on-job') }) : null;
  const alerts = o.onAlert
    ? new HookQueue(deliverTo(o.onAlert, o), { capacity: 100, workers: 1, onFirstTrouble: trouble('alerts') })
    : null;
  let runId = '';
  // The body is made when it goes out, off the run's path and only once the queue took it: that is
  // when the job's items are read. A read that fails leaves the list empty rather than the body unsent.
  const pushJob = (key: string, outcome: JobOutcome): void => {
    const id = runId;
    jobs?.push(() =>
      (o.itemsOfJob?.(key) ?? Promise.resolve(NO_ITEMS))
        .catch(() => NO_ITEMS)
        .then((items) =>
          JSON.stringify({ event: 'job', runId: id, key, items: items.ids, moreItems: items.more, ...outcome } satisfies JobHookBody),
        ),
    );
  };
  const listener: SchedulerListener = (event, payload) => {
    if (event === 'run:start') runId = (payload as SchedulerEventMap['run:start']).runId;
    if (!jobs) return;
    if (event === 'job:done') {
      const p = payload as SchedulerEventMap['job:done'];
      pushJob(p.key, {
        state: 'done',
        attempts: p.attempt,
        output: p.output,
        latencyMs: p.latencyMs,
        usage: p.usage,
        finishReason: p.finishReason ?? null,
      });
    } else if (event === 'job:failed') {
      const p = payload as SchedulerEventMap['job:failed'];
      pushJob(p.key, { state: 'failed', attempts: p.attempt, error: p.error });
    }
  };
  return {
    listener,
    alert: (body) => void alerts?.push(JSON.stringify(body)),
    given: { job: jobs !== null, alert: alerts !== null, done: o.onDone !== undefined },
    async finish(summary, exitCode, deadlines = {}) {
      const [job, alert] = await Promise.all([jobs, alerts].map((q) => q?.drain(deadlines.jobDeadlineMs ?? 5000) ?? null));
      let done: HookCounts | null = null;
      if (o.onDone) {
        const q = new HookQueue(deliverTo(o.onDone, o), { capacity: 1, workers: 1 });
        q.push(JSON.stringify(doneBody(summary, exitCode, job)));
        done = await q.drain(deadlines.doneDeadlineMs ?? 15_000);
      }
      return { job: job ?? null, alert: alert ?? null, done };
    },
  };
}

function doneBody(s: RunSummary, exitCode: number, jobHooks: HookCounts | null): DoneHookBody {
  return {
    event: 'done',
    runId: s.runId,
    exitCode,
    reason: s.reason,
    counts: { done: s.done, failed: s.failed, retried: s.retried, remaining: s.remaining, failedInStore: s.failedInStore },
    requests: s.requests,
    rateLimited: s.rateLimited,
    tokens: { prompt: s.promptTokens, completion: s.completionTokens },
    costUsd: s.costUsd,
    mayBeBilled: s.mayBeBilled,
    durationMs: s.wallMs,
    error: s.fatal?.message ?? null,
    jobHooks,
  };
}
