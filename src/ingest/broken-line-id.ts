/**
 * The item id of a JSONL line that is not a JSON object (malformed, nested too deep, an array), as
 * far as it can be read: a line edited into broken JSON is rejected, and the item that line was
 * (its id, or `file:line` without one) keeps its earlier document and answer. Without an id on the
 * rejection, enqueue said nothing of that item and export still gave its old answer
 * (`EnqueueSummary.keptEarlier` names it when the id is known).
 *
 * The line's top-level fields are read in order up to where it breaks: the id field's string or
 * number before the break is the id (or a Batch line's `custom_id`). None before it is taken for a
 * line without one (`file:line`).
 * An id written only after the break is not seen: that item stays unnamed, as before.
 */
export function brokenLineId(text: string, idField: string, path: string, line: number): string {
  return idBeforeBreak(text, idField) ?? `${path}:${line}`;
}

/**
 * The id field's value among `text`'s top-level fields before it breaks, else an OpenAI Batch line's
 * `custom_id` (what names such a line's item); undefined when neither is read.
 */
function idBeforeBreak(text: string, idField: string): string | undefined {
  const s = new Scanner(text);
  if (!s.take('{')) return undefined;
  let customId: string | undefined;
  for (;;) {
    const key = s.string();
    if (key === undefined || !s.take(':')) return customId;
    if (key === idField) return s.idValue() ?? customId;
    if (key === 'custom_id' && customId === undefined) customId = s.idValue();
    else if (!s.skipValue()) return customId;
    if (!s.take(',')) return customId;
  }
}

/** Just enough of a JSON reader to walk a line's top-level fields and stop where it breaks. */
class Scanner {
  #at = 0;
  readonly #text: string;

  constructor(text: string) {
    this.#text = text;
  }

  /** Whether `c` comes next (after blanks), taking it. */
  take(c: string): boolean {
    this.#blanks();
    if (this.#text[this.#at] !== c) return false;
    this.#at++;
    return true;
  }

  /** A string value next, decoded; undefined when none is whole. */
  string(): string | undefined {
    this.#blanks();
    const t = this.#text;
    if (t[this.#at] !== '"') return undefined;
    let i = this.#at + 1;
    for (; i < t.length && t[i] !== '"'; i++) if (t[i] === '\\') i++;
    if (i >= t.length) return undefined;
    try {
      const value = JSON.parse(t.slice(this.#at, i + 1)) as string;
      this.#at = i + 1;
      return value;
    } catch {
      return undefined;
    }
  }

  /** An id's value next: a non-empty string, or a number as the line writes it (as `parseJsonLine` reads both). */
  idValue(): string | undefined {
    this.#blanks();
    const id = this.#text[this.#at] === '"' ? this.string() : this.#number();
    return id === '' || id?.includes('\0') ? undefined : id;
  }

  #number(): string | undefined {
    // whole only where the value ends (a comma or the object's end next): a line cut at `"id": 12`
    // may have been 123, another item's id, and `12x` is no number
    const m = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?(?=\s*[,}])/.exec(this.#text.slice(this.#at));
    if (!m) return undefined;
    const value = Number(m[0]);
    // parseJsonLine's numericId: a safe integer or a fraction as JavaScript writes it, a larger one as written
    return Number.isSafeInteger(value) || (Number.isFinite(value) && !Number.isInteger(value)) ? String(value) : m[0];
  }

  /** Skip one value of any kind; false where the line breaks inside it. */
  skipValue(): boolean {
    this.#blanks();
    const t = this.#text;
    if (t[this.#at] === '"') return this.string() !== undefined;
    let depth = 0;
    for (; this.#at < t.length; this.#at++) {
      const c = t[this.#at]!;
      if (c === '"') {
        if (this.string() === undefined) return false;
        this.#at--; // the loop steps past the string's closing quote
      } else if (c === '{' || c === '[') depth++;
      else if (c === '}' || c === ']') {
        if (depth === 0) return true; // the object's own end: no more fields
        depth--;
      } else if (c === ',' && depth === 0) return true;
    }
    return false;
  }

  #blanks(): void {
    while (/\s/.test(this.#text[this.#at] ?? '')) this.#at++;
  }
}
