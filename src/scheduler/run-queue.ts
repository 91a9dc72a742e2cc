import type { Provider } from '../provider/types.js';
import type { BatchLedger, JobQueue, LaneMemory, QueueReader, RunAlert, RunBudget, RunRegistry } from '../store/types.js';
import type { RunSummary, SchedulerListener } from './events.js';
import type { LaneBoards } from './lanes.js';
import type { OutageOptions } from './outage.js';
import type { Budget } from './run-money.js';
import type { PriceTable } from '../pricing/price-table.js';
import { Run } from './run.js';
import { UsageError } from '../errors.js';

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

/**
 * What a run needs of the store: the queue it works, the registry its heartbeat keeps its leases in,
 * the money and the learned lane limits, and the counts it reports before and after (with the
 * batches out, whose jobs it leaves to the batch lane).
 */
export type RunStore = Pick<JobQueue, RunQueueCall> &
  RunRegistry &
  RunBudget &
  LaneMemory &
  Pick<QueueReader, 'status' | 'stateCounts' | 'itemsByKeyPrefix'> & { readonly batches: Pick<BatchLedger['batches'], 'open'> };

/**
 * The changes of the job state machine a run makes (not enqueue or retry-failed: commands of their
 * own), and the mock's stand-ins taken back before a real provider's run.
 */
type RunQueueCall = 'claim' | 'startRetry' | 'complete' | 'recordAttempt' | 'fail' | 'release' | 'nextPendingAt' | 'takeBackMockAnswers';

export interface RunDeps {
  readonly store: RunStore;
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
  /** Whether a run's process here is stopped by a signal (Ctrl-Z): the run keeps its jobs. @default isRunProcessStopped */
  readonly isStopped?: (pid: number, runStartedAt: number) => boolean;
  /** Options recorded with the run for `status` (never secrets). */
  readonly describe?: Record<string, unknown>;
  /** Alerts active now, stored with each heartbeat (llmq run --alert-*). */
  readonly alerts?: () => readonly RunAlert[];
}

/**
 * Work the queue until it is drained, `limit` jobs were taken, a stop signal arrives or a run-fatal
 * error happens. Claims in batches, keeps at most 2 x concurrency jobs in hand, hands everything
 * it did not finish back to `pending` before returning. The steps are `Run`'s (`run.ts`).
 */
export async function runQueue(deps: RunDeps, options: RunOptions = {}): Promise<RunSummary> {
  checkRunOptions(options);
  return new Run(deps, options).work();
}

/**
 * The options as the CLI's flags check them, for a caller of the library: `concurrency: 0` claimed
 * nothing and never returned, and `maxAttempts: 0` failed every job as "gave up after 0 attempts".
 */
export function checkRunOptions(o: RunOptions): void {
  const whole = (name: keyof RunOptions, min: number) => {
    const v = o[name];
    if (v !== undefined && !(Number.isInteger(v) && (v as number) >= min))
      throw new UsageError(`runQueue: ${name} must be a whole number of ${min} or more, got ${String(v)}`);
  };
  const positive = (name: keyof RunOptions, unset = '') => {
    const v = o[name];
    if (v !== undefined && !(typeof v === 'number' && v > 0 && Number.isFinite(v)))
      throw new UsageError(`runQueue: ${name} must be a number above 0${unset}, got ${String(v)}`);
  };
  whole('concurrency', 1);
  whole('maxAttempts', 1);
  whole('limit', 0);
  for (const name of ['rpm', 'tpm'] as const) positive(name, ' (left out: no cap)');
  for (const name of ['timeoutCapMs', 'maxOutageMs', 'leaseMs', 'heartbeatMs', 'progressMs'] as const) positive(name);
  if (o.timeout !== undefined && o.timeout !== 'auto') positive('timeout', " (ms), or 'auto'");
  // a NaN budget (an unset variable read as a number) compared false with every sum: no budget at all
  for (const name of ['runUsd', 'totalUsd'] as const) {
    const v = o.budget?.[name];
    if (v != null && !(v > 0 && Number.isFinite(v)))
      throw new UsageError(`runQueue: budget.${name} must be an amount above 0 (null: no budget), got ${String(v)}`);
  }
  for (const name of ['retryDelayMs', 'maxRetryDelayMs'] as const) {
    const v = o[name];
    if (v !== undefined && !(v >= 0 && Number.isFinite(v))) throw new UsageError(`runQueue: ${name} must be 0 or more, got ${String(v)}`);
  }
}
