import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { brokenLineId } from './broken-line-id.js';
import { blankReason, encodingReason, isBlank } from './decode.js';
import { fieldList, likelyMeant } from './fields-it-has.js';
import { nestsDeeperThan, reasonTooDeep } from './depth.js';
import { namedSourceReason } from './file-kind.js';
import { firstRoundedNumber } from './rounded-numbers.js';
import { splitLines } from './lines.js';
import { shellWord } from '../shell-word.js';
import { printable } from '../report/format.js';
import { fsReason, StopReading, type Entry, type ReadOptions } from './types.js';

/** The JSONL field a document's text is read from unless --text-field names another. */
export const DEFAULT_TEXT_FIELD = 'text';
export const DEFAULT_ID_FIELD = 'id';

export interface JsonlOptions extends ReadOptions {
  /** The field holding the item id; lines without it get `file:line`. @default 'id' */
  readonly idField: string;
  /** The field holding the document text. @default DEFAULT_TEXT_FIELD */
  readonly textField: string;
}

/** Where a reader puts what it reads; `flush` lets the consumer write a full batch (backpressure). */
export interface EntrySink {
  add(entry: Entry): void;
  flush(): Promise<void>;
}

/** Read size: large enough that per-chunk work is amortized, small enough to be nothing in memory. */
const CHUNK_BYTES = 1024 * 1024;

/** A JSONL file or pipe, streamed: one document per non-blank line. Devices are refused unread. */
export async function readJsonlFile(file: string, path: string, options: JsonlOptions, sink: EntrySink): Promise<void> {
  let why: string | null;
  let pipe = false;
  try {
    const s = await stat(file);
    why = namedSourceReason(s);
    pipe = s.isFIFO();
  } catch (error) {
    why = fsReason(error);
  }
  if (why !== null) {
    sink.add({ path, reason: why });
    return sink.flush();
  }
  await readJsonl(createReadStream(file, { highWaterMark: CHUNK_BYTES }), path, options, sink, pipe);
}

/**
 * A JSONL stream (a file or stdin). Each line is a document or a rejection; blank lines are skipped.
 * A read error part way (EACCES on open, EIO) is reported once for the file, after the lines read.
 * `unnamed`: stdin or a pipe, whose ids of lines without one are positional (Document.positional).
 */
export async function readJsonl(
  input: AsyncIterable<Buffer | string>,
  path: string,
  options: JsonlOptions,
  sink: EntrySink,
  unnamed = false,
): Promise<void> {
  let lastLine = 0;
  let hinted = !unnamed;
  let firstSeen = false;
  /** Documents read so far (each had the text field), and lines rejected for having none. */
  let records = 0;
  let withoutText = 0;
  const noTextField = missingField(options.textField);
  // What the sink throws (the store failed, or reading was asked to stop) is not a read error of this file.
  let sinkFailed = false;
  const flush = async (): Promise<void> => {
    try {
      await sink.flush();
    } catch (error) {
      sinkFailed = true;
      throw error;
    }
  };
  try {
    const lines = await unlessWrongEncoding(input);
    if (typeof lines === 'string') {
      sink.add({ path, reason: lines });
      return await flush();
    }
    await splitLines(
      lines,
      options.maxDocBytes,
      {
        line: (text, no) => {
          lastLine = no;
          let entry = parseJsonLine(text, no, path, options, unnamed, records > withoutText);
          if (entry !== null && 'reason' in entry && entry.reason.startsWith(noTextField)) withoutText++;
          const first = !firstSeen && entry !== null;
          if (first) firstSeen = true;
          if (
            first &&
            entry !== null &&
            'reason' in entry &&
            entry.reason.startsWith('malformed JSON') &&
            /^\s*[{[]\s*$|^\s*\[\s*\{.*,\s*$/.test(text)
          ) {
            // "{" or "[" alone on the first line: one JSON document written over many lines. Refused
            // whole, read no further: each of its lines rejected said nothing more, and the last
            // record of an array (no comma after it) was enqueued alone, a part of the file.
            sink.add({ path, reason: prettyPrinted(path, text) });
            throw new RefusedWhole();
          }
          if (!hinted && entry !== null && 'reason' in entry && entry.reason.startsWith('malformed JSON') && !/^\s*[{[]/.test(text)) {
            entry = { ...entry, reason: `${entry.reason}; ${STREAM_IS_JSONL}` };
            hinted = true;
          }
          // a stream whose lines were records is JSON Lines: a broken line later in it is only that
          if (entry !== null && !('reason' in entry)) {
            hinted = true;
            records++;
          }
          if (entry !== null) sink.add(entry);
        },
        bad: (no, reason, bytes, head) => {
          lastLine = no;
          // a line too long to read still names the item it was, if its id comes before the long part
          const id = head === undefined ? undefined : brokenLineId(head, options.idField, path, no);
          sink.add({ path, line: no, reason, ...(bytes !== undefined && { bytes }), ...(id !== undefined && { id }) });
        },
      },
      flush,
    );
  } catch (error) {
    if (error instanceof RefusedWhole) return await flush();
    if (sinkFailed || error instanceof StopReading) throw error;
    const after = lastLine > 0 ? ` after line ${lastLine}; the rest of the file was not read` : '';
    sink.add({ path, reason: fsReason(error) + after });
    await sink.flush();
  }
}

/** The stream as it is, or why its first bytes say it is no UTF-8 text (`encodingReason`), the rest of it unread. */
async function unlessWrongEncoding(input: AsyncIterable<Buffer | string>): Promise<AsyncIterable<Buffer | string> | string> {
  const it = input[Symbol.asyncIterator]();
  const first = await it.next();
  if (first.done) return input; // empty: read again, it ends at once
  const head = first.value;
  const reason = typeof head === 'string' ? null : encodingReason(head);
  if (reason !== null) {
    await it.return?.();
    return reason;
  }
  return (async function* () {
    try {
      yield head;
      for (let next = await it.next(); !next.done; next = await it.next()) yield next.value;
    } finally {
      // a reader that stops early (StopReading) closes the file too
      await it.return?.();
    }
  })();
}

/** Thrown by a line that shows the whole input is no JSON Lines (`prettyPrinted`): the rest is not read. */
class RefusedWhole extends Error {}

/** A file that is one JSON document over many lines, from its first line: what it is, and the conversion to JSON Lines. */
function prettyPrinted(path: string, firstLine: string): string {
  const file = path === '-' ? 'FILE' : shellWord(path);
  const shown = firstLine.trim();
  return (
    `one JSON document written over many lines (its first line is ${printable(shown.length > 40 ? `${shown.slice(0, 40)}…` : shown)}), ` +
    'not JSON Lines (one {...} object per line), so none of it was read: ' +
    `convert it with jq -c '.[]' ${file} > records.jsonl (an array of records) or jq -c . ${file} > records.jsonl (one object)`
  );
}

/**
 * Said once per stream, with the first line of it that is not JSON and does not look like broken
 * JSON either, when no record came before it: plain text piped in (`cat notes.txt | llmq enqueue -`), which only a file name
 * makes one document.
 */
const STREAM_IS_JSONL =
  'a stream is read as JSON Lines, one {"text": ...} object per line: to enqueue a text file, name it (llmq enqueue notes.txt)';

/** How a line's rejection for lacking the text field begins: readJsonl counts such lines by it. */
function missingField(field: string): string {
  return `no "${field}" field`;
}

/**
 * One line (decoded from strict UTF-8, so it holds no lone surrogate) to a document or a rejection;
 * null for a blank line. `textFieldUsual`: most lines before it in its file had the text field (more
 * of them than lacked it): a line without one is that line's mistake, not the flag's.
 */
export function parseJsonLine(
  text: string,
  line: number,
  path: string,
  o: JsonlOptions,
  unnamed = false,
  textFieldUsual = false,
): Entry | null {
  if (isBlank(text)) return null;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return { path, line, id: brokenLineId(text, o.idField, path, line), reason: `malformed JSON (${(error as Error).message})` };
  }
  // Before anything recursive (key sorting, JSON.stringify of meta) sees the value.
  if (nestsDeeperThan(value)) return { path, line, id: brokenLineId(text, o.idField, path, line), reason: reasonTooDeep() };
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    // no fields to read an id from: the item of this line, if it had none
    return { path, line, id: `${path}:${line}`, reason: `not a JSON object (each line must be one {...} document, got ${kind(value)})` };
  }
  const obj = value as Record<string, unknown>;
  if ('custom_id' in obj && ('body' in obj || 'url' in obj || 'method' in obj)) return batchLine(obj, line, path);

  // the id before the text, so that a line rejected for its text names the item it would have
  // replaced; a bad id is said after the text's problems, as before
  const rawId = own(obj, o.idField);
  let id: string | undefined;
  let badId: string | undefined;
  const positional = unnamed && (rawId === undefined || rawId === null);
  if (rawId === undefined || rawId === null) id = `${path}:${line}`;
  else if (typeof rawId === 'string' && rawId !== '') id = rawId;
  else if (typeof rawId === 'number') {
    const written = numericId(text, o.idField, rawId);
    if (written === null) badId = inexactId(o.idField, rawId);
    else id = written;
  } else badId = `"${o.idField}" is ${kind(rawId)}; an id must be a non-empty string or a number`;
  if (id?.includes('\0')) {
    badId = nulInId(o.idField);
    id = undefined;
  }

  const body = own(obj, o.textField);
  if (body === undefined) {
    // the fields it has, so the fix (--text-field <one of them>) needs no look into the file
    const has = Object.keys(obj).length === 0 ? 'it has no fields' : `it has ${fieldList(obj)}`;
    // one text for every such line (no count in it): the rejection log groups lines by their reason
    if (textFieldUsual)
      return { path, line, id, reason: `${missingField(o.textField)} (${has}), where most lines before it have one: mend this line` };
    const meant = likelyMeant(o.textField, obj);
    const fix =
      meant !== undefined
        ? `did you mean --text-field ${shellWord(meant)}?`
        : o.textField === DEFAULT_TEXT_FIELD
          ? 'name the text field with --text-field'
          : 'check the name given to --text-field';
    return { path, line, id, reason: `${missingField(o.textField)} (${has}: ${fix})` };
  }
  if (typeof body !== 'string') return { path, line, id, reason: `"${o.textField}" is ${kind(body)}, not a string` };
  if (isBlank(body)) return { path, line, id, reason: blankReason(body) };
  if (id === undefined) return { path, line, reason: badId! };

  // A line without a backslash has no escape in it, so none of its strings holds a quote, a backslash,
  // a control character (JSON takes none of them raw) or a lone surrogate (the line was decoded from
  // strict UTF-8): JSON.stringify would put each in quotes unchanged (surrogate pairs stay as they are).
  const textJsonSafe = text.indexOf('\\') === -1;
  const meta = otherFields(obj, o.textField, o.idField);
  const roundedNumber = firstRoundedNumber(text, meta, typeof rawId === 'number' && !Number.isSafeInteger(rawId));
  // the fields a line without an id has (the field missing or null), for the warning that its name
  // may be mistyped there, or its value left out
  const withoutIdField = rawId === undefined || rawId === null ? Object.keys(obj) : undefined;
  return { id, path, line, text: body, meta, textJsonSafe, positional, withoutIdField, ...(roundedNumber && { roundedNumber }) };
}

/**
 * A numeric id as the line writes it. JSON.parse makes a number of it, and a number past 2^53 (a
 * 64-bit database or snowflake id) loses digits: 1234567890123456789 reads 1234567890123456800, and
 * two ids can come out as one. Such a number (or one past a double's range) is taken from the line's
 * text, where its key is written once (null when it cannot be told apart); safe integers and
 * fractions read as before, so that ids enqueued before keep matching.
 */
function numericId(line: string, field: string, value: number): string | null {
  if (Number.isSafeInteger(value) || (Number.isFinite(value) && !Number.isInteger(value))) return String(value);
  const key = JSON.stringify(field).replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const written = [...line.matchAll(new RegExp(`${key}\\s*:\\s*(-?\\d+(?:\\.\\d+)?(?:[eE][+-]?\\d+)?)`, 'g'))];
  return written.length === 1 ? written[0]![1]! : null;
}

function inexactId(field: string, value: number): string {
  return `"${field}" is a number llmq cannot read exactly from this line (it reads ${value}): write the id as a string`;
}

/** An id is a name to show, export and look up; PostgreSQL's text cannot even hold a NUL. */
function nulInId(field: string): string {
  return `"${field}" holds a NUL character (\\u0000); an id must not`;
}

/** An OpenAI Batch API line: `body` is the request, sent as it is; `custom_id` is the item id. */
function batchLine(obj: Record<string, unknown>, line: number, path: string): Entry {
  const id = obj.custom_id;
  if (typeof id !== 'string' || id === '') {
    return { path, line, reason: `batch line "custom_id" is ${kind(id)}; it must be a non-empty string` };
  }
  if (id.includes('\0')) return { path, line, reason: nulInId('custom_id') };
  if (obj.method !== undefined && obj.method !== 'POST') {
    return { path, line, id, reason: `batch line method is ${JSON.stringify(obj.method)}; only POST is supported` };
  }
  if (obj.url !== undefined && (typeof obj.url !== 'string' || !obj.url.endsWith('/chat/completions'))) {
    return { path, line, id, reason: `batch line url is ${JSON.stringify(obj.url)}; llmq sends /v1/chat/completions requests only` };
  }
  const body = obj.body;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    return { path, line, id, reason: `batch line "body" is ${kind(body)}; it must be an object with "model" and "messages"` };
  }
  const b = body as Record<string, unknown>;
  if (typeof b.model !== 'string' || b.model === '' || !Array.isArray(b.messages) || b.messages.length === 0) {
    return { path, line, id, reason: 'batch line "body" must have a "model" string and a non-empty "messages" array' };
  }
  // The answer would come as server-sent events, which llmq does not read: each try would be paid
  // for and fail as "not JSON", up to --max-attempts.
  if (b.stream !== undefined && b.stream !== false) {
    return { path, line, id, reason: 'batch line "body" sets "stream"; llmq reads whole answers: remove "stream" (or set it to false)' };
  }
  return { id, path, line, text: '', meta: otherFields(obj, 'custom_id', 'body'), body: b };
}

/** The line's fields but two, as meta; null when there are none. */
function otherFields(obj: Record<string, unknown>, skip1: string, skip2: string): Record<string, unknown> | null {
  let meta: Record<string, unknown> | null = null;
  for (const k of Object.keys(obj)) {
    if (k === skip1 || k === skip2) continue;
    meta ??= {};
    // Assigning a "__proto__" key would set meta's prototype instead of keeping the field (losing
    // it, and making its fields look like meta's own), so that one is defined.
    if (k === '__proto__') Object.defineProperty(meta, k, { value: obj[k], enumerable: true, writable: true, configurable: true });
    else meta[k] = obj[k];
  }
  return meta;
}

/** A field of the line itself: `--text-field constructor` must not find Object's. */
function own(obj: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(obj, key) ? obj[key] : undefined;
}

function kind(v: unknown): string {
  if (v === undefined) return 'missing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  if (v === '') return 'an empty string';
  return `a ${typeof v}`;
}
