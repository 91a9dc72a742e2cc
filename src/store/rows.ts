import type {
  AttemptRecord,
  FailedJobCursor,
  FailedJobToResend,
  AttemptRow,
  ExportFilter,
  ExportRow,
  ItemRow,
  JobRow,
  JobState,
  LaneLimitRow,
  RunRow,
  SourceRejections,
  Usage,
} from './types.js';

/**
 * Rows as both stores' SQL returns them (snake_case columns, ms-epoch numbers, JSON as text), and
 * the one mapping of each to the shapes of types.ts.
 */
export interface RawRun {
  id: string;
  host: string;
  pid: number;
  started_at: number;
  heartbeat_at: number;
  ended_at: number | null;
  exit_reason: string | null;
  options: string;
  stats: string | null;
}
export interface RawJob {
  key: string;
  request: string;
  model: string;
  state: JobState;
  priority: number;
  attempts: number;
  run_after: number;
  lease_owner: string | null;
  lease_expires_at: number | null;
  output: string | null;
  response: string | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  error: string | null;
  created_at: number;
  updated_at: number;
  finished_at: number | null;
  cost_usd: number | null;
  latency_ms: number | null;
}
export interface RawAttempt {
  job_key: string;
  run_id: string;
  attempt: number;
  started_at: number;
  ended_at: number;
  latency_ms: number;
  status: number | null;
  outcome: AttemptRow['outcome'];
  error: string | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  cost_usd: number | null;
  may_be_billed: number | boolean;
}
export interface RawItem {
  id: string;
  source: string;
  job_key: string;
  meta: string | null;
  created_at: number;
  updated_at: number;
}
/** One item joined with its job, as the export query selects it. */
export interface RawExport {
  seq: number;
  id: string;
  source: string;
  meta: string | null;
  key: string;
  state: JobState;
  model: string;
  output: string | null;
  response: string | null;
  error: string | null;
  attempts: number;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  latency_ms: number | null;
  cost_usd: number | null;
}

export function toUsage(r: { prompt_tokens: number | null; completion_tokens: number | null }): Usage | null {
  return r.prompt_tokens === null ? null : { promptTokens: r.prompt_tokens, completionTokens: r.completion_tokens ?? 0 };
}

export function toRun(r: RawRun): RunRow {
  return {
    id: r.id,
    host: r.host,
    pid: r.pid,
    startedAt: r.started_at,
    heartbeatAt: r.heartbeat_at,
    endedAt: r.ended_at,
    exitReason: r.exit_reason,
    options: JSON.parse(r.options),
    stats: r.stats ? JSON.parse(r.stats) : null,
  };
}

export function toJob(j: RawJob): JobRow {
  return {
    key: j.key,
    request: j.request,
    model: j.model,
    state: j.state,
    priority: j.priority,
    attempts: j.attempts,
    runAfter: j.run_after,
    leaseOwner: j.lease_owner,
    leaseExpiresAt: j.lease_expires_at,
    output: j.output,
    response: j.response,
    usage: toUsage(j),
    error: j.error,
    createdAt: j.created_at,
    updatedAt: j.updated_at,
    finishedAt: j.finished_at,
    costUsd: j.cost_usd,
    latencyMs: j.latency_ms,
  };
}

export function toItem(i: RawItem): ItemRow {
  return {
    id: i.id,
    source: i.source,
    jobKey: i.job_key,
    meta: i.meta ? JSON.parse(i.meta) : null,
    createdAt: i.created_at,
    updatedAt: i.updated_at,
  };
}

/** The columns of an `attempts` row as both stores insert it, in the order of `attemptValues`. */
export const ATTEMPT_COLUMNS =
  'job_key, run_id, attempt, started_at, ended_at, latency_ms, status, outcome, error, prompt_tokens, completion_tokens, cost_usd, may_be_billed';

/** How long a try took, as its `latency_ms` is stored (never negative, whatever the clocks did). */
export function latencyOf(a: AttemptRecord): number {
  return Math.max(0, a.endedAt - a.startedAt);
}

/**
 * What a try adds to its job's cost without storing an answer: an answer came and was billed, and
 * was not kept (not the JSON its request asks for, cut off, declined), so the job's `cost_usd` is
 * what all its answered tries cost, not only the answer it keeps. Null when it adds nothing: no
 * answer came (a worst case that may be billed is counted apart), or no price was known.
 */
export function billedAnswerUsd(a: AttemptRecord): number | null {
  if (a.usage === null || a.mayBeBilled === true || typeof a.costUsd !== 'number' || a.costUsd === 0) return null;
  return a.costUsd;
}

/** The values of ATTEMPT_COLUMNS for one try; `billed` writes the may-be-billed flag as the database takes it. */
export function attemptValues<B>(a: AttemptRecord, latencyMs: number, billed: (mayBeBilled: boolean) => B) {
  return [
    a.key,
    a.runId,
    a.attempt,
    a.startedAt,
    a.endedAt,
    latencyMs,
    a.status,
    a.outcome,
    a.error,
    a.usage?.promptTokens ?? null,
    a.usage?.completionTokens ?? null,
    a.costUsd ?? null,
    billed(a.mayBeBilled === true),
  ] as const;
}

export function toAttempt(a: RawAttempt): AttemptRow {
  return {
    key: a.job_key,
    runId: a.run_id,
    attempt: a.attempt,
    startedAt: a.started_at,
    endedAt: a.ended_at,
    latencyMs: a.latency_ms,
    status: a.status,
    outcome: a.outcome,
    error: a.error,
    usage: toUsage(a),
    costUsd: a.cost_usd,
    mayBeBilled: Boolean(a.may_be_billed),
  };
}

/**
 * The columns of an export row from `items i` joined with `jobs j`, in both stores, in the order of
 * RawExportValues; the response and
 * the latency read only when the filter asks for them (NULL otherwise). `attemptsOfJob`: the store's
 * condition on `attempts a` for the attempts of `j` (SQLite finds them by seq since its migration 9).
 */
export function exportColumns(f: ExportFilter, attemptsOfJob: string): string {
  return `i.seq, i.id, i.source, i.meta, ${exportJobColumns(f, attemptsOfJob)}`;
}

/** The job's half of exportColumns (`j` being jobs): key, state, model, output, response, error, attempts, tokens, cost, latency. */
export function exportJobColumns(f: ExportFilter, attemptsOfJob: string): string {
  const response = f.response === false ? 'NULL AS response' : 'j.response';
  // The attempt that finished the job is the job's last. Its latency is on the job (kept by the
  // migration export_latency's trigger); a job last tried before that migration has NULL there, and
  // only then, or when it was never tried, is the attempts index looked up.
  const latency =
    f.latency === false
      ? 'NULL AS latency_ms'
      : `coalesce(j.latency_ms, (SELECT latency_ms FROM attempts a WHERE ${attemptsOfJob} ORDER BY a.id DESC LIMIT 1)) AS latency_ms`;
  return `j.key, j.state, j.model, j.output, ${response}, j.error,
    j.attempts, j.prompt_tokens, j.completion_tokens, j.cost_usd, ${latency}`;
}

/** A job's export columns as a list of values, in exportJobColumns' order. */
export type RawJobValues = readonly [
  key: string,
  state: JobState,
  model: string,
  output: string | null,
  response: string | null,
  error: string | null,
  attempts: number,
  promptTokens: number | null,
  completionTokens: number | null,
  costUsd: number | null,
  latencyMs: number | null,
];

/** An export row as a list of values in exportColumns' order (SQLite's raw mode: no object per row from the driver). */
export type RawExportValues = readonly [seq: number, id: string, source: string, meta: string | null, ...job: RawJobValues];

export function toExportRowFromValues(v: RawExportValues): ExportRow {
  return exportRowOf(v[1], v[2], v[3], v, 4);
}

/**
 * An export row from an item's values and its job's RawJobValues starting at `at` in `j` (the
 * join's one tuple holds both; the paged read has them apart). Offsets, not a slice: no array a row.
 */
export function exportRowOf(id: string, source: string, meta: string | null, j: ReadonlyArray<unknown>, at: number): ExportRow {
  const prompt = j[at + 7] as number | null;
  return {
    id,
    source,
    meta: meta ? JSON.parse(meta) : null,
    key: j[at] as string,
    state: j[at + 1] as JobState,
    model: j[at + 2] as string,
    output: j[at + 3] as string | null,
    response: j[at + 4] as string | null,
    error: j[at + 5] as string | null,
    attempts: j[at + 6] as number,
    usage: prompt === null ? null : { promptTokens: prompt, completionTokens: (j[at + 8] as number | null) ?? 0 },
    latencyMs: j[at + 10] as number | null,
    costUsd: j[at + 9] as number | null,
  };
}

export function toExportRow(r: RawExport): ExportRow {
  return {
    id: r.id,
    source: r.source,
    meta: r.meta ? JSON.parse(r.meta) : null,
    key: r.key,
    state: r.state,
    model: r.model,
    output: r.output,
    response: r.response,
    error: r.error,
    attempts: r.attempts,
    usage: toUsage(r),
    latencyMs: r.latency_ms,
    costUsd: r.cost_usd,
  };
}

/** A `lanes` row as both stores return it. */
export interface RawLane {
  readonly base_url: string;
  readonly model: string;
  readonly rpm: number | null;
  readonly tpm: number | null;
  readonly source: 'headers' | '429s';
  readonly learned_at: number | string;
}

export function toLane(r: RawLane): LaneLimitRow {
  return { baseUrl: r.base_url, model: r.model, rpm: r.rpm, tpm: r.tpm, source: r.source, at: Number(r.learned_at) };
}

export const LANES_SQL = 'SELECT * FROM lanes ORDER BY base_url, model';

/** A `rejections` row as both stores return it (`first` as JSON text, `at` a number or a bigint's text). */
export interface RawRejections {
  readonly source: string;
  readonly rejected: number | string;
  readonly first: string;
  readonly at: number | string;
}

export function toRejections(r: RawRejections): SourceRejections {
  return { source: r.source, rejected: Number(r.rejected), first: JSON.parse(r.first), at: Number(r.at) };
}

/** The row of `rejections` for an input: its values in column order (source, rejected, first, at). */
export function rejectionsValues(r: SourceRejections): [string, number, string, number] {
  return [r.source, r.rejected, JSON.stringify(r.first), r.at];
}

/** A failed job as both stores read it for `failedJobsToResend`, and its items. */
export interface RawFailedJob {
  created_at: number;
  seq: number;
  key: string;
  error: string | null;
  request: string;
  model: string;
  priority: number;
}
export interface RawItemToResend {
  job_key: string;
  id: string;
  source: string;
  meta: string | null;
}

/**
 * Of done jobs read with their `response`, those whose answer was cut off at max_tokens (the SQL
 * only narrows to bodies holding "length"; `cutOff` reads the body, src/provider/finish.ts, given by
 * the caller: `status` loads this module and none of the provider's), and the last read.
 */
export function cutOffOf(
  rows: ReadonlyArray<RawFailedJob & { response: string | null }>,
  cutOff: (response: string | null) => boolean,
): {
  cut: RawFailedJob[];
  last: FailedJobCursor | null;
} {
  const lastRow = rows.at(-1);
  return {
    cut: rows.filter((r) => cutOff(r.response)),
    last: lastRow ? { createdAt: Number(lastRow.created_at), seq: Number(lastRow.seq) } : null,
  };
}

/** Each job with its items (in the order read), as `failedJobsToResend` gives them. */
export function withTheirItems(jobs: readonly RawFailedJob[], items: readonly RawItemToResend[]): FailedJobToResend[] {
  const byJob = new Map<string, Array<FailedJobToResend['items'][number]>>();
  for (const i of items) {
    const list = byJob.get(i.job_key) ?? [];
    list.push({ id: i.id, source: i.source, meta: i.meta ? JSON.parse(i.meta) : null });
    byJob.set(i.job_key, list);
  }
  return jobs.map((j) => ({
    createdAt: Number(j.created_at),
    seq: Number(j.seq),
    key: j.key,
    error: j.error,
    request: j.request,
    model: j.model,
    priority: Number(j.priority),
    items: byJob.get(j.key) ?? [],
  }));
}
