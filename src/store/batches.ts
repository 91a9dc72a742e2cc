import type { ApiKeyId } from '../batch/api-key-id.js';
import { MOCK_BASE_URL } from '../mock-base-url.js';

/**
 * The batch lane's ledger: one row per submission to a provider's Batch API. The jobs of a
 * submission are held in the jobs table itself, `running` under the lease owner `batch:<id>` with a
 * far lease, so no online claim takes them and no reclaim of expired leases gives them back while
 * the batch lives. Every method is one short transaction, like the rest of the store.
 */

export const BATCH_STATES = Object.freeze([
  'preparing', // recorded, jobs taken, the batch not known to be created yet
  'submitted', // the provider accepted it: `providerBatchId` is set
  'ended', // results collected; jobs not answered went back to pending
  'abandoned', // never created at the provider (a crash before it, or a refusal); jobs back to pending
] as const);
export type BatchState = (typeof BATCH_STATES)[number];

/**
 * A job a submission holds. `request` only when it asks for JSON (`response_format`): its answer is
 * checked against it (src/provider/structured-output.ts), and no other request is read.
 */
export interface HeldJob {
  readonly key: string;
  readonly attempts: number;
  readonly model: string;
  readonly request: string | null;
}

export interface BatchRow {
  /** llmq's submission id, also sent as the batch's metadata so a crashed run's batches are found again. */
  readonly id: string;
  /** The run responsible for it now (submitting, polling or collecting). */
  readonly runId: string;
  /** The endpoint it was submitted to, without credentials. */
  readonly baseUrl: string;
  /** The API key it was sent with, as a fingerprint and a hint (null: none, or recorded before llmq kept it). */
  readonly apiKey: ApiKeyId | null;
  readonly state: BatchState;
  readonly providerBatchId: string | null;
  readonly inputFileId: string | null;
  /** The provider's last word: validating, in_progress, finalizing, completed, expired, cancelled, failed... */
  readonly providerStatus: string | null;
  /** How many of its requests the provider said were answered and failed, at the last poll (null: not said yet). */
  readonly progress: BatchProgress | null;
  readonly jobs: number;
  readonly done: number;
  readonly failed: number;
  readonly requeued: number;
  readonly error: string | null;
  readonly createdAt: number;
  readonly updatedAt: number;
  readonly endedAt: number | null;
}

export interface BatchEnd {
  readonly state: 'ended' | 'abandoned';
  readonly providerStatus: string | null;
  readonly done: number;
  readonly failed: number;
  readonly error: string | null;
  readonly now: number;
  /**
   * Give the attempt of each job handed back (the batch was cancelled, lost, or never created: not
   * the job's doing). False for lines the provider left unanswered (missing from a completed batch,
   * or not reached before it expired), so a line it never answers ends at --max-attempts instead of
   * going round forever.
   */
  readonly refund: boolean;
  /** Kept as the error of each job handed back (so one that runs out of attempts says why). */
  readonly jobError?: string | null;
  /** Jobs its results already handed back (lines to retry, a 5xx or 429), counted with those handed back now. */
  readonly requeuedBefore?: number;
}

export interface BatchStore {
  /** Record a submission before anything is sent, so a crash after this point is found again. */
  begin(row: { id: string; runId: string; baseUrl: string; apiKey?: ApiKeyId | null; now: number }): Promise<void>;
  /** How many jobs the submission holds (after the claim that took them). */
  noteJobs(id: string, jobs: number, now: number): Promise<void>;
  /**
   * The input file is uploaded. False when the submission is no longer `preparing` (another run
   * took its run for dead and abandoned it, handing its jobs back): it must not be created then.
   */
  noteInputFile(id: string, fileId: string, now: number): Promise<boolean>;
  /** The provider created the batch. False when the submission is no longer `preparing` (abandoned meanwhile). */
  submitted(id: string, providerBatchId: string, providerStatus: string, now: number): Promise<boolean>;
  /** What the provider said of it at a poll: its status, and how far it has got. */
  noteStatus(id: string, providerStatus: string, progress: BatchProgress | null, now: number): Promise<void>;
  /** Take over a submission from a run that ended or died; false if someone else took it first. */
  adopt(id: string, fromRunId: string, toRunId: string, now: number): Promise<boolean>;
  /**
   * Close a submission: every job it still holds goes back to `pending` (lines expired, cancelled or
   * missing from the output were not answered). Returns how many, with `requeuedBefore`.
   */
  end(id: string, end: BatchEnd): Promise<number>;
  /**
   * Abandon the submissions of runs that ended or died (`deadOwners`, or no longer open) before
   * their file was uploaded, and those made to the offline mock provider's Batch API, which lives
   * in its run's process: no batch can exist, so their jobs go back to `pending` with their
   * attempt. Part of every reclaim: a batch run killed between its claim and its upload held them
   * for the 7-day batch lease, out of reach of online runs. Returns how many jobs came back.
   */
  abandonUnsent(deadOwners: readonly string[], now: number): Promise<number>;
  /** The jobs a submission still holds, with their attempt numbers: what its results may answer. */
  held(id: string): Promise<HeldJob[]>;
  /** Submissions not ended, oldest first. */
  open(): Promise<BatchRow[]>;
  /** The newest submissions, for `status`. */
  recent(limit: number): Promise<BatchRow[]>;
}

/**
 * SQL, either dialect, for a row of `batches` no batch of which can be answering, whose run ended or
 * died (`deadRun`: the dialect's test that `run_id` is one of the dead owners): never uploaded, or
 * made to the offline mock provider's Batch API, which lives in its run's process.
 */
export function unsentOfStoppedRunWhere(deadRun: string): string {
  return `((state = 'preparing' AND input_file_id IS NULL) OR (state IN ('preparing', 'submitted') AND base_url = '${MOCK_BASE_URL}'))
    AND (${deadRun} OR NOT EXISTS (SELECT 1 FROM runs WHERE runs.id = batches.run_id AND runs.ended_at IS NULL))`;
}

/** Why a submission was abandoned when its run stopped before uploading its file (or creating the batch). */
export const STOPPED_BEFORE_CREATED = 'its run stopped before the batch was created';
/** Why a submission to the offline mock provider was abandoned: its Batch API lived in the run's process. */
export const MOCK_RUN_STOPPED = 'its run stopped, and the offline mock provider with it';

/** The lease owner of the jobs of a submission; also the `run_id` of their attempt rows (the pricing marker). */
export function batchOwner(submissionId: string): string {
  return `batch:${submissionId}`;
}

/**
 * SQL, either dialect: an attempt row (`alias`) sent online, not answered in a provider batch. A
 * batch answer's latency is its batch's whole wait (hours on a real Batch API), no measure of how
 * long a request takes: `llmq estimate` times online runs by the others.
 */
export const SENT_ONLINE = (alias: string): string => `${alias}.run_id NOT LIKE 'batch:%'`;

/** Whether an attempt went through a Batch API (priced at the batch rate) or online. */
export function attemptVia(runId: string): 'batch' | 'online' {
  return runId.startsWith('batch:') ? 'batch' : 'online';
}

/**
 * SQL, either dialect, for a row of `jobs`: not held by a provider batch that is live. A job whose
 * lease expired is not taken back, nor listed to run, while that batch may still answer: it bills
 * either way (a batch left alone, sent to another endpoint, can outlive its 7-day lease). Its jobs
 * come back when the batch is collected, cancelled or abandoned. A submission whose file was
 * uploaded but whose batch is not known to exist counts as live too: it may have been created (and
 * left alone to the API key that made it, which alone can look it up).
 */
export const NOT_IN_A_LIVE_BATCH = `NOT (jobs.lease_owner LIKE 'batch:%'
  AND EXISTS (SELECT 1 FROM batches WHERE 'batch:' || batches.id = jobs.lease_owner
    AND (batches.state = 'submitted' OR (batches.state = 'preparing' AND batches.input_file_id IS NOT NULL))))`;

/** A live batch's requests the provider has answered and failed so far (its `request_counts`). */
export interface BatchProgress {
  readonly completed: number;
  readonly failed: number;
}

/** The columns a batch's key and progress are kept in, as both stores read them. */
export interface KeyColumns {
  readonly api_key_fingerprint: string | null;
  readonly api_key_hint: string | null;
  readonly provider_completed: number | string | null;
  readonly provider_failed: number | string | null;
}

/** The key a batch row was sent with, from its columns. */
export function apiKeyOfRow(r: KeyColumns): ApiKeyId | null {
  return r.api_key_fingerprint === null ? null : { fingerprint: r.api_key_fingerprint, hint: r.api_key_hint ?? '' };
}

/** How far a batch row had got at its last poll, from its columns. */
export function progressOfRow(r: KeyColumns): BatchProgress | null {
  return r.provider_completed === null ? null : { completed: Number(r.provider_completed), failed: Number(r.provider_failed ?? 0) };
}
