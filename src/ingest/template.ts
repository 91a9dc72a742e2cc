import { UsageError } from '../errors.js';
import { fieldList, likelyMeant } from './fields-it-has.js';

/** What a template can be filled in from. */
export interface TemplateValues {
  readonly text: string;
  readonly id: string;
  /** The file the document came from, as given (`-` for stdin). */
  readonly path: string;
  readonly meta: Readonly<Record<string, unknown>> | null;
  /** `text` needs no JSON escaping (`JSON.stringify(text)` is `text` in quotes), so `renderJson` need not look. */
  readonly textJsonSafe?: boolean;
}

/** A placeholder the document does not fill: the document is rejected with this reason. */
export class MissingValueError extends Error {}

type Part = string | ((v: TemplateValues) => string);

/**
 * A prompt template parsed once: literal text and `{{text}}`, `{{id}}`, `{{path}}`,
 * `{{meta.FIELD}}` placeholders (spaces inside the braces allowed). Rendering is a concatenation,
 * so it costs nothing per document beyond the text itself.
 */
export interface Template {
  readonly source: string;
  /** Whether `{{text}}` appears; without it every document renders the same request. */
  readonly usesText: boolean;
  /** Whether any placeholder appears at all. */
  readonly isConstant: boolean;
  /** Whether `{{path}}` appears: the request then depends on how the source was named (sourcePath). */
  readonly usesPath: boolean;
  /** The `{{meta.FIELD}}` placeholders, as written: only JSONL lines have fields to fill them. */
  readonly metaPlaceholders: readonly string[];
  render(values: TemplateValues): string;
  /**
   * `JSON.stringify(render(values))`, built from pre-escaped literal parts and escaped values so
   * the rendered text is never built and copied only to be escaped again. Same bytes, always.
   */
  renderJson(values: TemplateValues): string;
  /**
   * Whether `text` could be a rendering of this template: its literal parts, in order, with anything
   * between them. Tells a changed document (an old request the template still renders) from a
   * changed prompt.
   */
  couldRender(text: string): boolean;
}

const PLACEHOLDER = /\{\{\s*([^{}]*?)\s*\}\}/g;
const META = /^meta\.(.+)$/;

/**
 * Parse a template. `option` names the flag it came from, for messages. Unknown placeholders are a
 * usage error that names every one of them, so a typo is caught before anything is enqueued.
 */
export function parseTemplate(source: string, option = '--prompt'): Template {
  const parts: Part[] = [];
  const unknown: string[] = [];
  let usesText = false;
  let usesPath = false;
  const metaPlaceholders: string[] = [];
  let last = 0;
  for (const m of source.matchAll(PLACEHOLDER)) {
    if (m.index > last) parts.push(source.slice(last, m.index));
    last = m.index + m[0].length;
    const name = m[1]!;
    if (name === 'text') {
      usesText = true;
      parts.push(textOf);
    } else if (name === 'id') {
      parts.push((v) => v.id);
    } else if (name === 'path') {
      usesPath = true;
      parts.push((v) => v.path);
    } else if (META.test(name)) {
      metaPlaceholders.push(m[0]);
      parts.push(metaGetter(META.exec(name)![1]!));
    } else {
      unknown.push(m[0]);
    }
  }
  if (last < source.length) parts.push(source.slice(last));
  if (unknown.length > 0) {
    throw new UsageError(
      `Unknown placeholder${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')} in ${option}. ` +
        'Use {{text}}, {{id}}, {{path}} or {{meta.FIELD}}.',
    );
  }
  const isConstant = parts.every((p) => typeof p === 'string');
  const render = isConstant
    ? () => source
    : parts.length === 1
      ? (parts[0] as (v: TemplateValues) => string)
      : (v: TemplateValues) => {
          let out = '';
          for (const p of parts) out += typeof p === 'string' ? p : p(v);
          return out;
        };
  const couldRender = (text: string) => matchesLiterals(parts, text);
  return { source, usesText, usesPath, metaPlaceholders, isConstant, render, renderJson: jsonRenderer(parts, render), couldRender };
}

/**
 * `parts` with each placeholder taken as any text: the first literal at the start, the last at the
 * end, those between leftmost first (which finds a match whenever there is one). Linear in the text,
 * where a regular expression of several wildcards backtracks over a long document.
 */
function matchesLiterals(parts: readonly Part[], text: string): boolean {
  if (parts.every((p) => typeof p === 'string')) return parts.join('') === text;
  let start = 0;
  let end = text.length;
  let i = 0;
  let j = parts.length - 1;
  if (typeof parts[0] === 'string') {
    if (!text.startsWith(parts[0])) return false;
    start = parts[0].length;
    i = 1;
  }
  const last = parts[j];
  if (typeof last === 'string') {
    if (!text.endsWith(last) || text.length - last.length < start) return false;
    end = text.length - last.length;
    j--;
  }
  for (; i <= j; i++) {
    const p = parts[i]!;
    if (typeof p !== 'string') continue;
    const at = text.indexOf(p, start);
    if (at < 0 || at + p.length > end) return false;
    start = at + p.length;
  }
  return true;
}

/** The `{{text}}` part: one function, so that `renderJson` knows it when it sees it. */
const textOf = (v: TemplateValues) => v.text;

const isHigh = (c: number) => c >= 0xd800 && c <= 0xdbff;
const isLow = (c: number) => c >= 0xdc00 && c <= 0xdfff;
/** What JSON.stringify escapes in a string: quote, backslash, control characters, surrogates (lone ones; paired ones go the slow way too). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what JSON escapes
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;
/** The JSON string body of `s`, without its quotes: most text has nothing to escape and is used as is (the test is cheaper than the copy). */
const escapeJson = (s: string) => (NEEDS_ESCAPE.test(s) ? JSON.stringify(s).slice(1, -1) : s);

function jsonRenderer(parts: readonly Part[], render: (v: TemplateValues) => string): (v: TemplateValues) => string {
  // Escaping piece by piece equals escaping the whole, except where a high and a low surrogate
  // meet across a piece boundary (whole: one pair kept as is; pieces: two escaped halves).
  // Such pieces take the slow path.
  const slow = (v: TemplateValues) => JSON.stringify(render(v));
  if (parts.some((p) => typeof p === 'string' && (isLow(p.charCodeAt(0)) || isHigh(p.charCodeAt(p.length - 1))))) return slow;
  const escaped = parts.map((p) => (typeof p === 'string' ? escapeJson(p) : p));
  return (v) => {
    let out = '"';
    for (const p of escaped) {
      if (typeof p === 'string') {
        out += p;
      } else {
        const value = p(v);
        if (isLow(value.charCodeAt(0)) || isHigh(value.charCodeAt(value.length - 1))) return slow(v);
        // 1 KB of text took 1.4-2 us to test; a JSONL reader knows for the price of an indexOf on the line
        out += p === textOf && v.textJsonSafe === true ? value : escapeJson(value);
      }
    }
    return out + '"';
  };
}

function metaGetter(field: string): (v: TemplateValues) => string {
  const path = field.split('.');
  return (v) => {
    const value = v.meta === null ? undefined : lookup(v.meta, field, path);
    if (value === undefined) {
      // the fields it has: a misspelt name ({{meta.subjekt}}) is then plain to see
      const has = v.meta === null || Object.keys(v.meta).length === 0 ? 'it has no other fields' : `its other fields: ${fieldList(v.meta)}`;
      const meant = v.meta === null ? undefined : likelyMeant(field, v.meta);
      const guess = meant === undefined ? '' : `; did you mean {{meta.${meant}}}?`;
      throw new MissingValueError(`the template needs {{meta.${field}}} but the document has no "${field}" field (${has}${guess})`);
    }
    // null is as good as missing: "null" in a prompt is seldom what was meant
    if (value === null) throw new MissingValueError(`the template needs {{meta.${field}}} but the document's "${field}" is null`);
    if (typeof value === 'string') return value;
    // Parsed JSON only holds strings, numbers, booleans, arrays and objects, all of which
    // stringify to a string; anything else is treated as missing rather than crashing the render.
    const json = JSON.stringify(value) as string | undefined;
    if (json === undefined) throw new MissingValueError(`the template needs {{meta.${field}}} but "${field}" has no JSON value`);
    return json;
  };
}

/**
 * The document's own field `field` (a key that contains dots, as written), else the nested field
 * at `path` (`a.b` = field `b` of object `a`, `a.0` = the first element of array `a`). Own
 * properties only at every level, so `constructor`, `__proto__` or `length` never reach Object's
 * or Array's built-ins: a field is what the document has, nothing else.
 */
function lookup(meta: Readonly<Record<string, unknown>>, field: string, path: readonly string[]): unknown {
  if (Object.hasOwn(meta, field)) return meta[field];
  let at: unknown = meta;
  for (const key of path) {
    if (at === null || typeof at !== 'object') return undefined;
    if (Array.isArray(at)) {
      if (!/^(0|[1-9]\d*)$/.test(key) || Number(key) >= at.length) return undefined;
    } else if (!Object.hasOwn(at, key)) {
      return undefined;
    }
    at = (at as Record<string, unknown>)[key];
  }
  return at;
}
