/**
 * The part of a provider's Batch API llmq uses (OpenAI's shape: files, batches, file contents),
 * spoken over HTTP by http-api.ts and simulated offline by mock-api.ts.
 */

/** A batch as the provider reports it. */
export interface ProviderBatch {
  readonly id: string;
  /** validating, in_progress, finalizing, completed, expired, cancelling, cancelled, failed */
  readonly status: string;
  readonly outputFileId: string | null;
  readonly errorFileId: string | null;
  readonly metadata: Readonly<Record<string, string>> | null;
  readonly counts: { readonly total: number; readonly completed: number; readonly failed: number } | null;
  /** The provider's reasons for a `failed` batch (validation, enqueued-token limit...). */
  readonly errors: ReadonlyArray<{ readonly code: string | null; readonly message: string }>;
  /** ms epoch. */
  readonly createdAt: number;
}

export interface BatchPage {
  readonly batches: readonly ProviderBatch[];
  readonly hasMore: boolean;
}

export interface BatchApi {
  /** Upload a JSONL input file (`purpose: batch`); returns the file id. */
  uploadFile(name: string, content: string, signal?: AbortSignal): Promise<string>;
  createBatch(inputFileId: string, metadata: Readonly<Record<string, string>>, signal?: AbortSignal): Promise<ProviderBatch>;
  getBatch(id: string, signal?: AbortSignal): Promise<ProviderBatch>;
  /** Newest first; `after` is the id of the last batch of the previous page. */
  listBatches(after: string | null, signal?: AbortSignal): Promise<BatchPage>;
  fileContent(id: string, signal?: AbortSignal): Promise<string>;
  cancelBatch(id: string, signal?: AbortSignal): Promise<ProviderBatch>;
}

/** Statuses after which a batch changes no more. */
export const TERMINAL_STATUSES: ReadonlySet<string> = new Set(['completed', 'expired', 'cancelled', 'failed']);

/** Batch error codes that mean "too much is queued already": wait and submit later, nothing is wrong with the jobs. */
export const QUOTA_CODES: ReadonlySet<string> = new Set(['token_limit_exceeded', 'request_limit_exceeded', 'batch_limit_exceeded']);

/** A batch object in OpenAI's JSON shape, read leniently. */
export function readProviderBatch(json: any): ProviderBatch {
  const str = (v: unknown) => (typeof v === 'string' && v !== '' ? v : null);
  const rc = json?.request_counts;
  const errors = Array.isArray(json?.errors?.data) ? json.errors.data : [];
  return {
    id: String(json?.id ?? ''),
    status: String(json?.status ?? 'unknown'),
    outputFileId: str(json?.output_file_id),
    errorFileId: str(json?.error_file_id),
    metadata: json?.metadata && typeof json.metadata === 'object' ? json.metadata : null,
    counts:
      rc && typeof rc === 'object'
        ? { total: Number(rc.total) || 0, completed: Number(rc.completed) || 0, failed: Number(rc.failed) || 0 }
        : null,
    errors: errors.map((e: any) => ({ code: str(e?.code), message: String(e?.message ?? 'no message') })),
    createdAt: Number.isFinite(json?.created_at) ? json.created_at * 1000 : 0,
  };
}
