/**
 * JSON.parse reads every number as a 64-bit float, so an integer past 2^53 (a snowflake or 64-bit
 * database id) comes out with other last digits: 98765432109876543219 reads 98765432109876540000.
 * The id field is taken from the line's text instead (jsonl.ts); in the other fields such a number
 * is kept as read, and said, so that the user can write it as a string.
 */

/** A field whose number lost digits when the line was read. */
export interface RoundedNumber {
  /** Its path among the line's fields, dotted as in `{{meta.FIELD}}`. */
  readonly field: string;
  /** What JSON.parse made of it. */
  readonly read: number;
}

// 2^53 has 16 digits: a line without a run of 16 has no integer that big (an exponent form is not
// read as written digits, so it is not said)
const LONG_DIGITS = /\d{16}/;

/** The first field of `meta` whose integer differs from the digits the line wrote, or undefined. */
export function firstRoundedNumber(line: string, meta: Readonly<Record<string, unknown>> | null): RoundedNumber | undefined {
  if (meta === null || !LONG_DIGITS.test(line)) return undefined;
  return find(meta, '', line);
}

function find(value: unknown, path: string, line: string): RoundedNumber | undefined {
  if (typeof value === 'number') return isRounded(value, line) ? { field: path, read: value } : undefined;
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, inner] of Object.entries(value)) {
    const found = find(inner, path === '' ? key : `${path}.${key}`, line);
    if (found) return found;
  }
  return undefined;
}

/** An integer past 2^53 whose digits, as JavaScript writes them, stand nowhere in the line. */
function isRounded(value: number, line: string): boolean {
  // past 1e21 JavaScript writes an exponent, which no line's digits match
  if (!Number.isInteger(value) || Number.isSafeInteger(value) || Math.abs(value) >= 1e21) return false;
  const digits = String(value);
  for (let at = line.indexOf(digits); at !== -1; at = line.indexOf(digits, at + 1)) {
    const before = line.charCodeAt(at - 1);
    const after = line.charCodeAt(at + digits.length);
    // the whole number, not the start of a longer one or a fraction's digits
    if (!isDigitOrPoint(before) && !isDigitOrPoint(after) && after !== 0x65 && after !== 0x45) return false;
  }
  return true;
}

function isDigitOrPoint(code: number): boolean {
  return (code >= 0x30 && code <= 0x39) || code === 0x2e;
}
