/**
 * Number, time and money formatting shared by `status`, `show` and the progress display. Plain
 * strings only: the CLI hands in a `Paint` (chalk satisfies it) when it wants color.
 */
import { flagDuration } from '../duration.js';

/** The color functions the renderers use; identity functions give plain text. */
export interface Paint {
  bold(s: string): string;
  dim(s: string): string;
  red(s: string): string;
  green(s: string): string;
  yellow(s: string): string;
  cyan(s: string): string;
}

const id = (s: string): string => s;
export const NO_PAINT: Paint = Object.freeze({ bold: id, dim: id, red: id, green: id, yellow: id, cyan: id });

/** "1 job", "2 jobs", "80,000 items": a count with its noun, singular for one. */
export function count(n: number, noun: string, plural = `${noun}s`): string {
  return `${int(n)} ${n === 1 ? noun : plural}`;
}

/** 40000 -> "40,000". */
/** `a`, `a and b`, `a, b and c` (or `or`): a few names in a sentence. */
export function listed(items: readonly string[], word: 'and' | 'or' = 'and'): string {
  return items.length > 1 ? `${items.slice(0, -1).join(', ')} ${word} ${items.at(-1)}` : (items[0] ?? '');
}

export function int(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** 14_200_000 -> "14.2M", for token counts where the last digits do not matter. */
export function compact(n: number): string {
  if (Math.abs(n) < 10_000) return int(n);
  // rounded first: 999,750 is "1.0M", not "1000k"
  for (const [unit, size] of COMPACT_UNITS) {
    const v = n / size;
    const shown = Math.abs(v) < 99.95 ? v.toFixed(1) : v.toFixed(0);
    if (Math.abs(Number(shown)) < 1000) return `${shown}${unit}`;
  }
  return `${(n / 1e9).toFixed(1)}B`;
}

const COMPACT_UNITS = [
  ['k', 1e3],
  ['M', 1e6],
] as const;

/** USD with enough digits to see small batches: $0.0042, $1.23, $1,234. null -> "unknown". */
export function usd(n: number | null): string {
  if (n === null) return 'unknown';
  if (n === 0) return '$0.00';
  const sign = n < 0 ? '-' : '';
  // To the nano-dollar the ledger keeps first: two sums of the same answers, added in another order
  // (the run's as they came, status's in the store), differ in their last bits, which at a digit's
  // edge ($0.0009045) showed the run's summary and status a cent's tenth apart.
  const a = Math.round(Math.abs(n) * 1e9) / 1e9;
  if (a === 0) return '$0.00';
  if (a >= 1000) return `${sign}$${int(a)}`;
  if (a >= 1) return `${sign}$${a.toFixed(2)}`;
  // Under a dollar, three significant digits (at least cents): $0.0146 spent of a $0.02 budget is
  // not "$0.01 of $0.02", and a tenth of a cent is not $0.00.
  const decimals = Math.min(12, Math.max(2, 2 - Math.floor(Math.log10(a))));
  return `${sign}$${a.toFixed(decimals).replace(/(\.\d\d\d*?)0+$/, '$1')}`;
}

/**
 * Two amounts said side by side as different (`$0.005251` more than `$0.00525`): `usd` rounds both
 * to three significant digits, which can make "more than" read false. Digits are added, up to the
 * nano-dollar, until the two read apart.
 */
export function usdApart(a: number, b: number): [string, string] {
  let [x, y] = [usd(a), usd(b)];
  for (let extra = 1; x === y && extra <= 7; extra++) [x, y] = [usdDigits(a, extra), usdDigits(b, extra)];
  return [x, y];
}

/** `usd` with `extra` more decimals, trailing zeros past the cents dropped. */
function usdDigits(n: number, extra: number): string {
  const a = Math.round(Math.abs(n) * 1e9) / 1e9;
  if (a === 0 || a >= 1000) return usd(n);
  const base = a >= 1 ? 2 : Math.min(12, Math.max(2, 2 - Math.floor(Math.log10(a))));
  return `${n < 0 ? '-' : ''}$${a.toFixed(Math.min(9, base + extra)).replace(/(\.\d\d\d*?)0+$/, '$1')}`;
}

/** Seconds -> "45s", "3m 05s", "2h 14m", "3d 4h". */
/** A moment as people read it, to the second: `2026-12-04 08:12:08Z`. */
export function utcTime(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, 'Z');
}

export function duration(seconds: number | null): string {
  if (seconds === null || !Number.isFinite(seconds)) return '--';
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  return `${Math.floor(s / 86_400)}d ${Math.floor((s % 86_400) / 3600)}h`;
}

/**
 * An ETA needs no seconds once it is ten minutes away: "45s", "1m 34s", "31m", "2h 14m". Minutes are
 * rounded, not cut (1m 59s read "1m" while status said 1m 59s).
 */
export function shortDuration(seconds: number): string {
  return seconds >= 600 && seconds < 3570 ? `${Math.round(seconds / 60)}m` : duration(seconds);
}

/**
 * "down 7m 12s (--max-outage 15m)": how long the provider has been down, and how long the run waits
 * for it, as the flag takes it (`1h30m`, one word): a user types it back.
 */
export function outageText(downSince: number, givesUpAt: number, now: number): string {
  return `down ${duration(Math.max(0, now - downSince) / 1000)} (--max-outage ${flagDuration(givesUpAt - downSince)})`;
}

/**
 * When the paused run tries the provider again: `next try in 8s`, or, when --max-outage ends the run
 * first, `gives up in 2s` (a try promised after the end never comes).
 */
export function nextTryText(nextAt: number, givesUpAt: number | undefined, now: number): string {
  if (givesUpAt !== undefined && nextAt >= givesUpAt) return `gives up in ${duration(Math.max(0, givesUpAt - now) / 1000)}`;
  return `next try in ${duration(Math.max(0, nextAt - now) / 1000)}`;
}

/** A rate with a sensible number of digits: 0.0031/s, 0.42/s, 4.6/s, 120/s. */
export function rate(perSecond: number): string {
  if (!Number.isFinite(perSecond) || perSecond <= 0) return '0';
  // a request every few minutes (a --tpm below one request) is not "0.00" a second
  if (perSecond < 0.01) return String(Number(perSecond.toPrecision(2)));
  if (perSecond < 1) return perSecond.toFixed(2);
  if (perSecond < 100) return perSecond.toFixed(1);
  return int(perSecond);
}

export function percent(part: number, whole: number): string {
  if (whole <= 0) return '0%';
  const p = (100 * part) / whole;
  // near the end to the tenth, as status --json's percentDone
  if (part < whole && p >= 99.5) return `${percentTenths(part, whole).toFixed(1)}%`;
  return `${p.toFixed(p < 10 && p > 0 ? 1 : 0)}%`;
}

/** The percent to the tenth, never 100 while something is left (597 of 600 rounded to 100). */
export function percentTenths(part: number, whole: number): number {
  if (whole <= 0) return 0;
  return Math.min(part < whole ? 99.9 : 100, Math.round((1000 * part) / whole) / 10);
}

/**
 * Control characters shown as escapes: a file name, an item id or a malformed line (quoted in
 * JSON.parse's message) may hold newlines or terminal escape sequences, and what shows it must
 * stay one line and not drive the terminal.
 */
export function printable(s: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it escapes.
  return s.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, escapeChar);
}

/**
 * Text of many lines (an answer, a request's messages) as `printable`, but its newlines and tabs
 * kept: a document or an answer holding terminal escape sequences must not drive the terminal.
 */
export function printableText(s: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it escapes.
  return s.replace(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g, escapeChar);
}

/**
 * A name (an item's id, a field's) in double quotes, its control characters as `printable` writes
 * them: `"new\u000aline.txt"`, the form `show` and `forget` take back. JSON's quoting wrote
 * `"new\\u000aline.txt"` over `printable`'s escapes, which nothing takes back.
 */
export function quotedName(s: string): string {
  return `"${printable(s)}"`;
}

const escapeChar = (ch: string): string => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`;

/** One line, at most `max` characters, with an ellipsis when cut. */
export function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  if (flat.length <= max) return flat;
  const cut = flat.slice(0, Math.max(0, max - 1));
  // at the last space when it is near the end, so a reason is not cut inside a word ("rate lim…")
  const space = cut.lastIndexOf(' ');
  return (space >= max * 0.75 ? cut.slice(0, space) : cut) + '…';
}

/**
 * `text` as lines of at most `width` characters, broken at spaces (a longer word is cut): nothing is
 * lost, unlike `oneLine`. A text of parts joined by ` · ` breaks between parts first, each `·` kept at
 * the end of its line, so a figure stays beside its label (`worst $0.52`, not `worst` / `$0.52`).
 */
export function wrap(text: string, width: number): string[] {
  const parts = text
    .replace(/[\t\r\n]+/g, ' ')
    .trim()
    .split(' · ');
  if (parts.length === 1) return wrapWords(text, width);
  const lines: string[] = [];
  let line: string | null = null;
  for (const part of parts) {
    if (line !== null && line.length + 3 + part.length <= width) {
      line += ` · ${part}`;
      continue;
    }
    if (line !== null) lines.push(line.length + 2 <= width ? `${line} ·` : line);
    const words = wrapWords(part, width);
    lines.push(...words.slice(0, -1));
    line = words.at(-1)!;
  }
  lines.push(line!);
  return lines;
}

function wrapWords(text: string, width: number): string[] {
  const lines: string[] = [];
  let line: string | null = null;
  // split on each space, not on runs of them: a path with two spaces in it is shown as it is
  for (let word of text
    .replace(/[\t\r\n]+/g, ' ')
    .trim()
    .split(' ')) {
    while (word.length > width) {
      if (line) lines.push(line);
      lines.push(word.slice(0, width));
      word = word.slice(width);
      line = null;
    }
    if (line === null) line = word;
    else if (line.length + 1 + word.length <= width) line += ` ${word}`;
    else {
      lines.push(line);
      line = word;
    }
  }
  if (line || lines.length === 0) lines.push(line ?? '');
  return lines;
}

/** Align label/value rows: labels padded to the widest. */
export function table(rows: ReadonlyArray<readonly [string, string]>, indent = '  '): string[] {
  const w = Math.max(0, ...rows.map(([l]) => l.length));
  return rows.map(([l, v]) => `${indent}${l.padEnd(w)}  ${v}`);
}

/** Remove ANSI escape sequences (to measure or test printed text). */
export function stripAnsi(s: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ESC and BEL delimit the sequences it removes.
  return s.replace(/\x1B(?:\[[0-?]*[ -/]*[@-~]|[78]|\][^\x07]*\x07)/g, '');
}
