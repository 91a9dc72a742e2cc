import { byteCount, overMaxDocBytes } from './types.js';
import { decodeUtf8, REASON_UTF8 } from './decode.js';

/** Receives each line of a stream: its text (no `\n`, no trailing `\r`) or why it has none. */
export interface LineSink {
  line(text: string, no: number): void;
  /** `bytes`: a line refused for its size, that size; `head`: its first HEAD_BYTES, as text (cut anywhere). */
  bad(no: number, reason: string, bytes?: number, head?: string): void;
}

const NL = 0x0a;

/**
 * How much of a line refused for its size is kept to read its fields from (an id before the long
 * part names the item the line was): the rest streams past unbuffered.
 */
export const HEAD_BYTES = 64 * 1024;

/** The first HEAD_BYTES of a line, as text; a character cut at the end reads as U+FFFD. */
function headOf(line: Buffer): string {
  return line.subarray(0, HEAD_BYTES).toString('utf8');
}

/**
 * Split a byte stream into UTF-8 lines without ever holding more than one chunk plus one line.
 *
 * Lines are cut on bytes, not on decoded text, so that each line can be checked on its own: a
 * line with broken UTF-8 is reported by number (readline would silently turn it into U+FFFD), and
 * a line longer than `maxLineBytes` is skipped as it streams past, never buffered. The common case
 * (a chunk of valid, short lines) is one decode and one split per chunk. Calls `flush` after each
 * chunk so the caller can hand a batch on while the next chunk is read.
 */
export async function splitLines(
  input: AsyncIterable<Buffer | string>,
  maxLineBytes: number,
  sink: LineSink,
  flush: () => Promise<void> | void,
): Promise<number> {
  let no = 0;
  let carry: Buffer | null = null;
  // While > 0, we are dropping an overlong line whose size so far is this many bytes.
  let skipping = 0;
  let skippedHead = '';

  const tooLong = (bytes: number) => sink.bad(++no, lineTooLong(bytes, maxLineBytes), bytes, skippedHead);

  for await (const chunk of input) {
    let buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (skipping > 0) {
      const nl = buf.indexOf(NL);
      if (nl === -1) {
        skipping += buf.length;
        continue;
      }
      tooLong(skipping + nl);
      skipping = 0;
      buf = buf.subarray(nl + 1);
    }
    if (carry !== null) {
      buf = Buffer.concat([carry, buf]);
      carry = null;
    }
    const last = buf.lastIndexOf(NL);
    if (last !== -1) {
      no = region(buf.subarray(0, last + 1), no, maxLineBytes, sink);
      buf = buf.subarray(last + 1);
    }
    if (buf.length > maxLineBytes) {
      skipping = buf.length;
      skippedHead = headOf(buf);
    }
    // Copy the tail so the whole chunk is not kept alive by a small remainder.
    else if (buf.length > 0) carry = Buffer.from(buf);
    await flush();
  }
  if (skipping > 0) tooLong(skipping);
  else if (carry !== null) no = region(carry, no, maxLineBytes, sink);
  await flush();
  return no;
}

/** Complete lines (the last one may lack its `\n`). Returns the last line number used. */
function region(bytes: Buffer, no: number, max: number, sink: LineSink): number {
  // Fast path: every line fits (true whenever the whole region does) and all of it is valid UTF-8.
  if (bytes.length <= max || longestLine(bytes) <= max) {
    const text = decodeUtf8(bytes);
    if (text !== null) {
      const lines = text.split('\n');
      // A region ending in `\n` splits into a trailing empty string that is not a line.
      const n = text.endsWith('\n') ? lines.length - 1 : lines.length;
      for (let i = 0; i < n; i++) sink.line(stripCr(lines[i]!), ++no);
      return no;
    }
  }
  // Slow path, only for regions holding a bad line: look at each line on its own.
  let start = 0;
  while (start < bytes.length) {
    let end = bytes.indexOf(NL, start);
    if (end === -1) end = bytes.length;
    const len = end - start;
    if (len > max) {
      sink.bad(++no, lineTooLong(len, max), len, headOf(bytes.subarray(start, end)));
    } else {
      const text = decodeUtf8(bytes.subarray(start, end));
      if (text === null) sink.bad(++no, REASON_UTF8);
      else sink.line(stripCr(text), ++no);
    }
    start = end + 1;
  }
  return no;
}

function lineTooLong(bytes: number, max: number): string {
  return `line is ${byteCount(bytes)} bytes, ${overMaxDocBytes(max)}`;
}

function longestLine(bytes: Buffer): number {
  let longest = 0;
  let start = 0;
  while (start < bytes.length) {
    let end = bytes.indexOf(NL, start);
    if (end === -1) end = bytes.length;
    if (end - start > longest) longest = end - start;
    start = end + 1;
  }
  return longest;
}

function stripCr(line: string): string {
  return line.charCodeAt(line.length - 1) === 13 ? line.slice(0, -1) : line;
}
