import { UsageError } from '../errors.js';

/** What a template can be filled in from. */
export interface TemplateValues {
  readonly text: string;
  readonly id: string;
  /** The file the document came from, as given (`-` for stdin). */
  readonly path: string;
  readonly meta: Readonly<Record<string, unknown>> | null;
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
  render(values: TemplateValues): string;
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
  let last = 0;
  for (const m of source.matchAll(PLACEHOLDER)) {
    if (m.index > last) parts.push(source.slice(last, m.index));
    last = m.index + m[0].length;
    const name = m[1]!;
    if (name === 'text') {
      usesText = true;
      parts.push((v) => v.text);
    } else if (name === 'id') {
      parts.push((v) => v.id);
    } else if (name === 'path') {
      parts.push((v) => v.path);
    } else if (META.test(name)) {
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
  const render =
    isConstant ? () => source
    : parts.length === 1 ? (parts[0] as (v: TemplateValues) => string)
    : (v: TemplateValues) => {
        let out = '';
        for (const p of parts) out += typeof p === 'string' ? p : p(v);
        return out;
      };
  return { source, usesText, isConstant, render };
}

function metaGetter(field: string): (v: TemplateValues) => string {
  return (v) => {
    const value = v.meta?.[field];
    if (value === undefined || value === null) {
      throw new MissingValueError(`the template needs {{meta.${field}}} but the document has no "${field}" field`);
    }
    return typeof value === 'string' ? value : JSON.stringify(value);
  };
}
