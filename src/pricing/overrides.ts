import { readFileSync } from 'node:fs';
import { UsageError } from '../errors.js';

/** USD per million tokens: [input (prompt), output (completion)]. */
export type Price = readonly [input: number, output: number];

/** Parse `--price 0.15,0.60` (USD per million input, output tokens). */
export function parsePrice(value: string, what = '--price'): Price {
  const parts = value.split(',').map((s) => s.trim());
  const nums = parts.map(Number);
  if (parts.length !== 2 || parts.some((p) => p === '') || nums.some((n) => !Number.isFinite(n) || n < 0)) {
    throw new UsageError(
      `Expected ${what} to be two non-negative numbers "input,output" in USD per million tokens (e.g. 0.15,0.60), got '${value}'.`,
    );
  }
  return [nums[0]!, nums[1]!];
}

/** Read a `{ "model": [in, out] }` price object; `origin` names the file or variable in errors. */
export function parsePriceFile(text: string, origin: string): Record<string, Price> {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`Expected ${origin} to be JSON like {"gpt-4o": [2.5, 10]}${jsonComplaint(text, error)}.`);
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    throw new UsageError(
      `Expected ${origin} to be a JSON object like {"gpt-4o": [2.5, 10]}, got ${Array.isArray(data) ? 'an array' : typeof data}.`,
    );
  }
  const out: Record<string, Price> = {};
  for (const [model, v] of Object.entries(data)) {
    const ok = Array.isArray(v) && v.length === 2 && v.every((n) => typeof n === 'number' && Number.isFinite(n) && n >= 0);
    if (!ok) {
      throw new UsageError(
        `Expected the price of "${model}" in ${origin} to be [input, output] USD per million tokens, got ${JSON.stringify(v)}.`,
      );
    }
    out[model] = [v[0], v[1]];
  }
  return out;
}

/**
 * JSON.parse's complaint on one line, with the line and column it points at, so that a hand-edited
 * file's mistake is found: Node says "at position 57", or quotes the text around it, new lines and all.
 */
/** How many characters V8 quotes before the token it could not parse, when it cuts the text ("..."). */
const QUOTED_BEFORE = 10;

function jsonComplaint(text: string, error: unknown): string {
  const message = (error as Error).message;
  let at: number | null = null;
  let what = message;
  const positioned = /^(.*?) (?:in|after) JSON at position (\d+)/s.exec(message);
  const quoted = /^(Unexpected token '(.+?)'), (\.\.\.)?"([\s\S]*?)"(?:\.\.\.)? is not valid JSON$/.exec(message);
  if (positioned) {
    what = positioned[1]!;
    at = Number(positioned[2]);
  } else if (quoted) {
    what = quoted[1]!;
    const token = quoted[2]!;
    const excerpt = quoted[4]!;
    if (quoted[3]) {
      // V8 quotes from QUOTED_BEFORE characters before the token: the first place the excerpt is with the token there
      for (let i = text.indexOf(excerpt); i !== -1 && at === null; i = text.indexOf(excerpt, i + 1))
        if (text.startsWith(token, i + QUOTED_BEFORE)) at = i + QUOTED_BEFORE;
    } else {
      // quoted from the start: the token is within its first characters
      const i = excerpt.indexOf(token);
      if (i !== -1 && i <= QUOTED_BEFORE) at = i;
    }
  }
  what = what.replace(/\s+/g, ' ');
  if (at === null) return `: ${what}`;
  const before = text.slice(0, at);
  return ` (line ${before.split('\n').length}, column ${before.length - before.lastIndexOf('\n')}): ${what}`;
}

export function readPriceFile(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(
      `Cannot read the price file ${path} given by ${what}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}.`,
    );
  }
}
