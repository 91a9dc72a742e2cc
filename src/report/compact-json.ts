/**
 * `JSON.stringify(JSON.parse(text))` without building the value, when the text is already that
 * but for whitespace between tokens (a provider's body, compact or pretty-printed); null when it is
 * not sure (the caller then parses and writes it again). Parsing and writing again is 5 us for a
 * 400-byte chat completion: half of an openai-batch export's CPU; this scan is a tenth of it.
 *
 * It answers only for text JSON.stringify would write back unchanged: strings with no escape but
 * \" \\ \b \f \n \r \t and no control character or surrogate, numbers that are their own shortest
 * form (String(Number(n)) === n), and objects with no repeated key and no key that starts with a
 * digit (V8 puts integer keys first). Anything else, invalid JSON included, is null.
 */
export function compactJson(text: string): string | null {
  let out = ''; // the text before `from`, less its whitespace
  let from = 0;
  let at = 0;
  /** Per open container: an object's keys so far, or null for an array. */
  const open: Array<string[] | null> = [];
  let next = VALUE;
  for (;;) {
    let c = text.charCodeAt(at);
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) {
      out += text.slice(from, at);
      do c = text.charCodeAt(++at);
      while (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09);
      from = at;
    }
    if (next === VALUE || next === FIRST_VALUE) {
      if (next === FIRST_VALUE && c === 0x5d) {
        open.pop();
        at++;
        next = AFTER;
      } else if (c === 0x7b) {
        open.push([]);
        at++;
        next = FIRST_KEY;
      } else if (c === 0x5b) {
        open.push(null);
        at++;
        next = FIRST_VALUE;
      } else {
        const end = c === 0x22 ? sticky(STRING, text, at) : c === 0x74 || c === 0x66 || c === 0x6e ? word(text, at, c) : number(text, at);
        if (end < 0) return null;
        at = end;
        next = AFTER;
      }
    } else if (next === KEY || next === FIRST_KEY) {
      if (next === FIRST_KEY && c === 0x7d) {
        open.pop();
        at++;
        next = AFTER;
        continue;
      }
      // V8 puts integer keys first: one that starts with a digit may not keep its place
      const first = text.charCodeAt(at + 1);
      if (c !== 0x22 || (first >= 0x30 && first <= 0x39)) return null;
      const end = sticky(STRING, text, at);
      if (end < 0) return null;
      // the raw text is a fair key: with only short escapes, one key has one spelling
      const key = text.slice(at, end);
      const keys = open[open.length - 1]!;
      if (keys.includes(key)) return null;
      keys.push(key);
      at = end;
      next = COLON;
    } else if (next === COLON) {
      if (c !== 0x3a) return null;
      at++;
      next = VALUE;
    } else {
      if (open.length === 0) return at === text.length ? (from === 0 ? text : out + text.slice(from)) : null;
      const keys = open[open.length - 1];
      at++;
      if (c === 0x2c) next = keys ? KEY : VALUE;
      else if (c === (keys ? 0x7d : 0x5d)) open.pop();
      else return null;
    }
  }
}

// what the scan expects next
const VALUE = 0;
/** A value or the `]` of an empty array. */
const FIRST_VALUE = 1;
const KEY = 2;
/** A key or the `}` of an empty object. */
const FIRST_KEY = 3;
const COLON = 4;
/** A comma or the end of the container (or of the text, at the top). */
const AFTER = 5;

/** A string with no escape but a short one JSON.stringify writes, no control character, no surrogate. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
const STRING = /"[^"\\\u0000-\u001f\ud800-\udfff]*(?:\\["\\bfnrt][^"\\\u0000-\u001f\ud800-\udfff]*)*"/y;
const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?/y;

/** Where the match of a sticky pattern at `at` ends, or -1. */
function sticky(pattern: RegExp, text: string, at: number): number {
  pattern.lastIndex = at;
  return pattern.test(text) ? pattern.lastIndex : -1;
}

function word(text: string, at: number, c: number): number {
  const w = c === 0x74 ? 'true' : c === 0x66 ? 'false' : 'null';
  return text.startsWith(w, at) ? at + w.length : -1;
}

/** A number JSON.stringify writes the same: its own shortest form (not 1.0, 1E5, -0, 1e999). */
function number(text: string, at: number): number {
  // An integer of up to 15 digits, no leading zero, is its own shortest form: no parse needed.
  let i = text.charCodeAt(at) === 0x2d ? at + 1 : at;
  const digits = i;
  let c = text.charCodeAt(i);
  if (c >= 0x31 && c <= 0x39) {
    do c = text.charCodeAt(++i);
    while (c >= 0x30 && c <= 0x39);
    if (c !== 0x2e && c !== 0x65 && c !== 0x45 && i - digits <= 15) return i;
  }
  const end = sticky(NUMBER, text, at);
  if (end < 0) return -1;
  const token = text.slice(at, end);
  return String(Number(token)) === token ? end : -1;
}
