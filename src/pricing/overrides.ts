import { readFileSync } from 'node:fs';
import { UsageError } from '../errors.js';
import { jsonComplaint } from '../json-complaint.js';

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

export function readPriceFile(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    // a run's --prices file moved or deleted since: its path still comes in the commands proposed
    const why =
      code === 'ENOENT'
        ? 'no such file'
        : code === 'EACCES'
          ? 'permission denied'
          : code === 'EISDIR'
            ? 'it is a folder'
            : (code ?? (error as Error).message);
    throw new UsageError(`Cannot read the price file ${path} given by ${what}: ${why}.`);
  }
}
