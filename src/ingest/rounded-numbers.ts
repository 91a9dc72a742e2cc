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

// 2^53 has 16 digits: a line without a run of 16 has no integer that big
const LONG_DIGITS = /\d{16}/;
// an integer written with 16 digits or more, as a whole: not a fraction's digits, not before an
// exponent (1e16, 2e17 and 100000000000000000.0 are read as written, or are no digits to keep)
const LONG_INTEGER = /(?<![\d.eE+-])-?\d{16,}(?![\d.eE])/g;

/**
 * The first field of `meta` whose integer was written with digits JSON.parse does not keep, or
 * undefined. `idRounded`: the line's id was such a number too (it is read from the text: one of the
 * line's rounded integers is its own, not meta's).
 */
export function firstRoundedNumber(
  line: string,
  meta: Readonly<Record<string, unknown>> | null,
  idRounded = false,
): RoundedNumber | undefined {
  if (meta === null || !LONG_DIGITS.test(line)) return undefined;
  const rounded = new Set<number>();
  let count = 0;
  for (const [written] of line.matchAll(LONG_INTEGER)) {
    const read = Number(written);
    // (JSON writes no leading zeros: the digits are the number's own)
    if (String(read) !== written) {
      rounded.add(read);
      count++;
    }
  }
  // only the id's: nothing of meta to look for (a line of 30 fields is walked in about 8 us)
  if (count === 0 || (idRounded && count === 1)) return undefined;
  return find(meta, '', rounded);
}

function find(value: unknown, path: string, rounded: ReadonlySet<number>): RoundedNumber | undefined {
  if (typeof value === 'number') return rounded.has(value) ? { field: path, read: value } : undefined;
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, inner] of Object.entries(value)) {
    const found = find(inner, path === '' ? key : `${path}.${key}`, rounded);
    if (found) return found;
  }
  return undefined;
}
