import { usdValue } from '../pricing/usd-value.js';
import * as crypto from 'node:crypto';
import { once } from 'node:events';
import { WriteStream } from 'node:fs';
import { Socket } from 'node:net';
import type { Writable } from 'node:stream';
import { JOB_STATES, type ExportRow, type JobState } from '../store/types.js';
import { compactJson } from './compact-json.js';
import { finishReasonOf } from '../provider/finish.js';
import { CSV_COLUMNS } from './csv-columns.js';

export const EXPORT_FORMATS = Object.freeze(['jsonl', 'csv', 'openai-batch'] as const);
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export interface ExportCounts {
  /** Items written. */
  written: number;
  /** Items read but left out, by state (openai-batch and --out-dir leave unfinished items out). */
  skipped: Record<JobState, number>;
}

export function emptyCounts(): ExportCounts {
  return { written: 0, skipped: Object.fromEntries(JOB_STATES.map((s) => [s, 0])) as Record<JobState, number> };
}

export function skippedTotal(c: ExportCounts): number {
  return JOB_STATES.reduce((a, s) => a + c.skipped[s], 0);
}

/**
 * The JSON Lines record of one item. docs/architecture.md ("Outside contract") fixes id, key, state, output, error, attempts.
 * `cost_usd` is what the job's answered tries cost at the price known when each came (answers it
 * rejected included): null until an answer came, or without a price.
 */
export function jsonlRecord(r: ExportRow): Record<string, unknown> {
  return {
    id: r.id,
    key: r.key,
    state: r.state,
    output: r.output,
    error: r.error,
    attempts: r.attempts,
    model: r.model,
    usage: r.usage ? { prompt_tokens: r.usage.promptTokens, completion_tokens: r.usage.completionTokens } : null,
    cost_usd: usdValue(r.costUsd),
    latency_ms: r.latencyMs,
    finish_reason: answerFinish(r),
    source: r.source,
    meta: r.meta,
  };
}

/**
 * How a done job's answer ended (`stop`; `length` when cut off at max_tokens; `refusal`,
 * `content_filter`: src/provider/finish.ts), read from the stored response; null for any other state,
 * or when the response does not say.
 */
function answerFinish(r: ExportRow): string | null {
  return r.state === 'done' ? finishReasonOf(r.response) : null;
}

/**
 * `JSON.stringify(jsonlRecord(r)) + '\n'`, built without the record: the same bytes, for a third of
 * the time (a million rows each make one object fewer). Every field of a row is defined (the
 * stores read each from a column), so none is left out as JSON.stringify leaves out undefined.
 */
export function jsonlLine(r: ExportRow): string {
  const usage = r.usage ? `{"prompt_tokens":${json(r.usage.promptTokens)},"completion_tokens":${json(r.usage.completionTokens)}}` : 'null';
  return `{"id":${json(r.id)},"key":${json(r.key)},"state":${json(r.state)},"output":${json(r.output)},"error":${json(r.error)},"attempts":${json(r.attempts)},"model":${json(r.model)},"usage":${usage},"cost_usd":${json(usdValue(r.costUsd))},"latency_ms":${json(r.latencyMs)},"finish_reason":${json(answerFinish(r))},"source":${json(r.source)},"meta":${json(r.meta)}}\n`;
}

/** A field's JSON as JSON.stringify writes it inside an object (null for null). */
function json(value: unknown): string {
  if (value === null) return 'null';
  // Most strings need no escape and most numbers are finite: their JSON is their text (in quotes for
  // a string), without a call into JSON.stringify for each of a row's dozen fields.
  if (typeof value === 'string') return ESCAPED.test(value) ? JSON.stringify(value) : `"${value}"`;
  if (typeof value === 'number') return Number.isFinite(value) ? `${value}` : 'null';
  return JSON.stringify(value);
}

/** What JSON.stringify writes escaped in a string: quote, backslash, control characters, and surrogates (a lone one is escaped). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
const ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/** One RFC 4180 field: quoted when it holds a comma, quote, CR or LF, quotes doubled. */
export function csvField(value: unknown): string {
  if (value === null || value === undefined) return '';
  // a number's text has no comma, quote or line break
  if (typeof value === 'number') return `${value}`;
  const s = typeof value === 'string' ? value : typeof value === 'object' ? JSON.stringify(value) : String(value);
  return QUOTED.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

const QUOTED = /[",\r\n]/;

/** The fields in CSV_COLUMNS' order, written out rather than looked up by name: a million rows each make no object and no array. */
export function csvRow(r: ExportRow): string {
  const u = r.usage;
  return `${csvField(r.id)},${csvField(r.key)},${csvField(r.state)},${csvField(r.model)},${csvField(r.attempts)},${csvField(u?.promptTokens)},${csvField(u?.completionTokens)},${csvField(r.latencyMs)},${csvField(r.source)},${csvField(r.output)},${csvField(r.error)},${csvField(r.meta)},${csvField(usdValue(r.costUsd))},${csvField(answerFinish(r))}\r\n`;
}

/**
 * One line of the OpenAI Batch API output format, so code written for batch results reads llmq's
 * unchanged. `id` is stable per item and job; `request_id` is the job key (`llmq show` finds it).
 * `cost_usd` is llmq's own field, after the Batch API's (readers of that format ignore it).
 */
export function openAiBatchRecord(r: ExportRow): Record<string, unknown> {
  const id = batchRequestId(r);
  if (r.state === 'done') {
    return {
      id,
      custom_id: r.id,
      response: { status_code: 200, request_id: r.key, body: responseBody(r) },
      error: null,
      cost_usd: usdValue(r.costUsd),
    };
  }
  // The Batch API answers a request the provider refused as a response with its status and error
  // body; `error` is for failures with no HTTP answer (a timeout, a reset) and unfinished jobs.
  const refused = r.state === 'failed' ? httpRefusal(r.error) : null;
  if (refused) {
    // the provider's type and code are not kept, only its message
    const body = { error: { message: refused.message, type: null, param: null, code: null } };
    return {
      id,
      custom_id: r.id,
      response: { status_code: refused.status, request_id: r.key, body },
      error: null,
      cost_usd: usdValue(r.costUsd),
    };
  }
  const message = r.error ?? (r.state === 'failed' ? 'failed' : `not finished: the job is ${r.state}`);
  return { id, custom_id: r.id, response: null, error: { code: errorCode(r.state, r.error), message }, cost_usd: usdValue(r.costUsd) };
}

/**
 * The provider's refusal in a failed job's error ("HTTP 400: ...", after "gave up after 5 attempts: "
 * or the stores' "...; last error: " too): its status and message. Only 4xx and 5xx: a 200 whose body
 * was no completion ("HTTP 200: invalid completion body") is no answer, and a reader takes 200 for one.
 */
function httpRefusal(error: string | null): { status: number; message: string } | null {
  const m = error?.match(/^(?:gave up after \d+ attempts?(?::|; last error:) )?HTTP ([45]\d\d): ([\s\S]*)$/);
  return m ? { status: Number(m[1]), message: m[2]! } : null;
}

/** `id` of an openai-batch line: stable per item and job. */
function batchRequestId(r: ExportRow): string {
  return 'batch_req_' + sha256Hex(`${r.id}\n${r.key}`).slice(0, 24);
}

// crypto.hash (Node 20.12 on) hashes a short string in a third of the time of a Hash object.
const oneShot = (crypto as { hash?: (algorithm: string, data: string) => string }).hash;
const sha256Hex: (data: string) => string = oneShot
  ? (data) => oneShot('sha256', data)
  : (data) => crypto.createHash('sha256').update(data).digest('hex');

/**
 * `JSON.stringify(openAiBatchRecord(r)) + '\n'`, built without the record for answered rows (all but
 * a few): the same bytes. The response body goes in as stored, less its whitespace, when that is
 * what parsing and writing it again would give (compactJson); else it is parsed and written again.
 */
export function openAiBatchLine(r: ExportRow): string {
  if (r.state !== 'done') return JSON.stringify(openAiBatchRecord(r)) + '\n';
  const body = (r.response && compactJson(r.response)) || json(responseBody(r));
  return `{"id":"${batchRequestId(r)}","custom_id":${json(r.id)},"response":{"status_code":200,"request_id":${json(r.key)},"body":${body}},"error":null,"cost_usd":${json(usdValue(r.costUsd))}}\n`;
}

/** The stored provider response; a minimal completion when it is missing or not JSON (older rows). */
function responseBody(r: ExportRow): unknown {
  if (r.response) {
    try {
      return JSON.parse(r.response);
    } catch {
      // fall through: keep the answer rather than drop the line
    }
  }
  return {
    object: 'chat.completion',
    model: r.model,
    choices: [{ index: 0, message: { role: 'assistant', content: r.output ?? '' }, finish_reason: 'stop' }],
    usage: r.usage
      ? {
          prompt_tokens: r.usage.promptTokens,
          completion_tokens: r.usage.completionTokens,
          total_tokens: r.usage.promptTokens + r.usage.completionTokens,
        }
      : null,
  };
}

/**
 * An OpenAI-style error code from llmq's error text when it leads with one ("400 context_length_exceeded: ..."),
 * else `http_<status>`, else a generic one. Only the leading position counts: a message naming a
 * parameter ("'max_tokens' is not supported") must not turn the parameter into the code.
 */
function errorCode(state: JobState, error: string | null): string {
  if (state !== 'failed') return `job_${state}`;
  const code = error?.match(/^(?:HTTP )?\d{3}:? ([a-z]+(?:_[a-z]+)+)\b/)?.[1];
  if (code) return code;
  const status = error?.match(/\b([45]\d\d)\b/)?.[1];
  return status ? `http_${status}` : 'request_failed';
}

export interface ExportOptions {
  readonly format: ExportFormat;
  /** States to write; rows in other states are counted as skipped. Null: the format's default. */
  readonly states?: readonly JobState[] | null;
}

/**
 * What a format reads besides the item and its job: JSON Lines and CSV have latency_ms and the
 * finish_reason (from the response body), openai-batch the response body.
 */
export function columnsFor(format: ExportFormat | 'files'): { response: boolean; latency: boolean } {
  return { response: format !== 'files', latency: format === 'jsonl' || format === 'csv' };
}

/** What a format writes when no --state is given: openai-batch has no shape for unfinished requests. */
export function defaultStates(format: ExportFormat): readonly JobState[] | null {
  return format === 'openai-batch' ? ['done', 'failed'] : null;
}

/** Lines are handed to the stream in chunks of about this many characters: one write per row costs more than the row. */
const CHUNK_CHARS = 64 * 1024;

/** The line writer of a format. */
export function lineOf(format: ExportFormat): (r: ExportRow) => string {
  return format === 'csv' ? csvRow : format === 'openai-batch' ? openAiBatchLine : jsonlLine;
}

/** What an export starts with before its first row: CSV's header. */
export function exportHead(format: ExportFormat): string {
  return format === 'csv' ? CSV_COLUMNS.join(',') + '\r\n' : '';
}

/**
 * Pages of rows as text in the chosen format, in chunks of about `chunkChars`, rows in states not
 * written counted in `counts` (the caller's, added to). No head: the caller writes it once.
 */
export async function* formatPages(
  pages: AsyncIterable<readonly ExportRow[]>,
  o: ExportOptions,
  counts: ExportCounts,
  chunkChars = CHUNK_CHARS,
): AsyncGenerator<string> {
  const states = o.states?.length ? o.states : defaultStates(o.format);
  const line = lineOf(o.format);
  let chunk = '';
  for await (const page of pages) {
    for (const r of page) {
      if (states && !states.includes(r.state)) {
        counts.skipped[r.state]++;
        continue;
      }
      chunk += line(r);
      counts.written++;
      if (chunk.length >= chunkChars) {
        yield chunk;
        chunk = '';
      }
    }
  }
  if (chunk) yield chunk;
}

/**
 * Text to write, or bytes whose owner wants to hear when the stream has them: `written(true)` when
 * their buffer may be filled again, from a stream known to be done with a chunk when its write's
 * callback comes (a file, a pipe, a socket); `written(false)` as soon as any other stream has taken
 * them (it may keep the chunk or pass it on: the buffer is left to it).
 */
export type ExportChunk = string | { readonly bytes: Uint8Array; readonly written: (reusable: boolean) => void };

function releasesChunks(out: Writable): boolean {
  return out instanceof WriteStream || out instanceof Socket;
}

/**
 * Write text to `out` chunk by chunk, waiting for 'drain' whenever the stream's buffer is full, so
 * memory stays flat however long the text. Does not end `out`. A write that fails (a full disk, a
 * closed pipe) rejects with the stream's error instead of waiting for a 'drain' that never comes.
 */
export async function writeText(chunks: AsyncIterable<ExportChunk>, out: Writable): Promise<void> {
  let failed: Error | null = null;
  const onError = (error: Error) => {
    failed ??= error;
  };
  out.on('error', onError);
  const releases = releasesChunks(out);
  for await (const chunk of chunks) {
    if (failed || out.errored) throw failed ?? out.errored;
    let more: boolean;
    if (typeof chunk === 'string') more = out.write(chunk);
    else if (releases) more = out.write(chunk.bytes, () => chunk.written(true));
    else {
      more = out.write(chunk.bytes);
      chunk.written(false);
    }
    if (!more) {
      if (failed || out.errored) throw failed ?? out.errored;
      await once(out, 'drain');
    }
  }
  if (failed || out.errored) throw failed ?? out.errored;
  // Kept on failure: an error the stream has yet to emit must find a listener, or it crashes the process.
  out.off('error', onError);
}

/** Stream pages of rows to `out` in the chosen format (head included), a chunk of lines at a time. Does not end `out`. */
export async function writeExport(pages: AsyncIterable<readonly ExportRow[]>, out: Writable, o: ExportOptions): Promise<ExportCounts> {
  const counts = emptyCounts();
  // no bigger than the stream's buffer: a slow reader then has at most a buffer of rows ahead of it
  const chunkChars = Math.min(CHUNK_CHARS, out.writableHighWaterMark || CHUNK_CHARS);
  await writeText(withHead(exportHead(o.format), formatPages(pages, o, counts, chunkChars)), out);
  return counts;
}

/** `head`, then the chunks. */
export async function* withHead(head: string, chunks: AsyncIterable<string>): AsyncGenerator<string> {
  if (head) yield head;
  yield* chunks;
}
