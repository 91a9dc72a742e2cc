import type { ApiKeyId } from './api-key-id.js';
import type { BatchProgress } from '../store/batches.js';
import type { BatchLedger, JobQueue, QueueReader, RunRegistry } from '../store/types.js';
import type { BatchApi } from './api.js';

/** Named points of a submission and a collection, where a test may kill the process (`LLMQ_TEST_CRASH_AT`). */
export const CRASH_STEPS = Object.freeze(['begun', 'claimed', 'uploaded', 'created', 'submitted', 'collected'] as const);
export type CrashStep = (typeof CRASH_STEPS)[number];

/** What the batch lane tells its listener; the CLI words it. */
export type BatchEvent =
  | { readonly type: 'submitted'; readonly id: string; readonly providerBatchId: string; readonly jobs: number; readonly model: string }
  | { readonly type: 'adopted'; readonly id: string; readonly providerBatchId: string | null; readonly from: string }
  | {
      readonly type: 'ended';
      readonly id: string;
      readonly providerBatchId: string | null;
      readonly providerStatus: string;
      readonly done: number;
      readonly failed: number;
      readonly requeued: number;
      /** Of the done: answers cut off at max_tokens, declined, or empty (`answerKind`), kept as done. */
      readonly cutOff: number;
      readonly refused: number;
      readonly empty: number;
    }
  | { readonly type: 'abandoned'; readonly id: string; readonly requeued: number; readonly reason: string }
  /** A submission of a run that ended, made to another endpoint: left alone, its jobs held (said once per run). */
  | { readonly type: 'elsewhere'; readonly id: string; readonly providerBatchId: string | null; readonly baseUrl: string }
  /**
   * A submission of a run that ended, sent with another API key, which this run's key cannot see (404):
   * left alone, its jobs held, since it may still run and be billed (said once per run).
   */
  | {
      readonly type: 'other-key';
      readonly id: string;
      readonly providerBatchId: string | null;
      readonly baseUrl: string;
      readonly sentWith: ApiKeyId;
      readonly key: ApiKeyId | null;
    }
  | { readonly type: 'waiting'; readonly reason: 'quota' | 'error'; readonly untilMs: number; readonly message: string }
  /**
   * A run on this host whose process is gone holds batches this run will take over once its last
   * heartbeat is `quietMs` old (a run that only looks gone, its pid reused, beats again first).
   */
  | { readonly type: 'dying-run'; readonly runId: string; readonly pid: number; readonly quietMs: number }
  /** Runs on this host whose process is gone, recorded as died; `requeued` jobs went back to pending with them. */
  | { readonly type: 'dead-runs'; readonly runIds: readonly string[]; readonly requeued: number }
  /** A live batch's status or progress changed since the last poll (the provider's word). */
  | {
      readonly type: 'progress';
      readonly id: string;
      readonly providerBatchId: string;
      readonly status: string;
      readonly jobs: number;
      readonly progress: BatchProgress | null;
    }
  | { readonly type: 'polled'; readonly open: number };

/**
 * What the batch lane needs of the store: its ledger of submissions, the queue it claims from and
 * answers into, the run registry, and the counts it reports before and after.
 */
export type BatchLaneStore = BatchLedger & JobQueue & RunRegistry & Pick<QueueReader, 'status'>;

/** Everything one batch-lane run shares between its steps. */
import type { BatchCost } from './results.js';

export interface BatchContext {
  readonly store: BatchLaneStore;
  readonly api: BatchApi;
  readonly runId: string;
  /** The endpoint, without credentials: recorded with each submission. */
  readonly baseUrl: string;
  /** Removed from any message stored or shown. */
  readonly secret: string | undefined;
  /** The API key this run sends with (of `secret`), recorded with each submission. */
  readonly apiKey: ApiKeyId | null;
  readonly now: () => number;
  readonly emit: (event: BatchEvent) => void;
  readonly crashAt: (step: CrashStep) => void;
  readonly stopSignal: AbortSignal;
  /** Longest a Batch API call is retried before the run gives up. */
  readonly maxRetryMs: number;
  /** An answer's cost at the model's batch price (null: unknown). */
  readonly batchCost: BatchCost;
  /** --max-attempts: a line that failed retryably on its last attempt fails its job, as online. */
  readonly maxAttempts: number;
}

/**
 * How long the jobs of a live batch stay leased. Far past the 24 h completion window, so no reclaim
 * of expired leases can take a job back while the provider may still answer it; a submission whose
 * run never comes back is still retaken eventually.
 */
export const BATCH_LEASE_MS = 7 * 24 * 3600_000;
