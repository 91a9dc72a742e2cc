import { readFileSync } from 'node:fs';
import { UsageError } from '../errors.js';
import type { Usage } from '../store/types.js';

/** USD per million tokens: [input (prompt), output (completion)]. */
export type Price = readonly [input: number, output: number];

export interface PriceTable {
  /** Per model name; looked up exactly, then by the longest name the model starts with (dated snapshots). */
  readonly models: Readonly<Record<string, Price>>;
  /** `--price in,out`: one price for every model, ahead of the table. */
  readonly override: Price | null;
}

/**
 * Standard-tier list prices from OpenAI's pricing page (platform.openai.com/docs/pricing), as of
 * August 2025, in USD per million tokens, without cached-input or Batch API discounts. Prices
 * change: `--price in,out`, `--prices FILE` or LLMQ_PRICES override them.
 */
export const BUILTIN_PRICES: Readonly<Record<string, Price>> = Object.freeze({
  'gpt-5': [1.25, 10],
  'gpt-5-mini': [0.25, 2],
  'gpt-5-nano': [0.05, 0.4],
  'gpt-4.1': [2, 8],
  'gpt-4.1-mini': [0.4, 1.6],
  'gpt-4.1-nano': [0.1, 0.4],
  'gpt-4o': [2.5, 10],
  'gpt-4o-2024-05-13': [5, 15],
  'gpt-4o-mini': [0.15, 0.6],
  'o1': [15, 60],
  'o1-mini': [1.1, 4.4],
  'o3': [2, 8],
  'o3-mini': [1.1, 4.4],
  'o4-mini': [1.1, 4.4],
  'gpt-4-turbo': [10, 30],
  'gpt-4': [30, 60],
  'gpt-3.5-turbo': [0.5, 1.5],
});

const SNAPSHOT = /^(.+?)-(?:\d{4}-\d{2}-\d{2}|\d{4}|preview|latest)$/;

/** The offline mock provider's models cost nothing. */
const FREE = /^mock($|[-/:])/;

/** The price of one model, or null when the table does not know it (cost unknown, never 0). */
export function priceOf(model: string, table: PriceTable): Price | null {
  if (table.override) return table.override;
  if (FREE.test(model)) return [0, 0];
  const models = table.models;
  if (Object.hasOwn(models, model)) return models[model]!;
  // "openai/gpt-4o" (LiteLLM, OpenRouter) prices as "gpt-4o".
  const bare = model.slice(model.lastIndexOf('/') + 1);
  if (Object.hasOwn(models, bare)) return models[bare]!;
  // Dated snapshots ("gpt-4o-mini-2024-07-18", "gpt-3.5-turbo-0125") price as their family; any
  // other suffix is a different model whose price we do not know.
  const family = bare.match(SNAPSHOT)?.[1];
  return family !== undefined && Object.hasOwn(models, family) ? models[family]! : null;
}

/** USD for this usage, or null when the model's price is unknown. */
export function costOf(model: string, usage: Usage, table: PriceTable): number | null {
  const price = priceOf(model, table);
  if (!price) return null;
  return (usage.promptTokens * price[0] + usage.completionTokens * price[1]) / 1_000_000;
}

/** Parse `--price 0.15,0.60` (USD per million input, output tokens). */
export function parsePrice(value: string, what = '--price'): Price {
  const parts = value.split(',').map((s) => s.trim());
  const nums = parts.map(Number);
  if (parts.length !== 2 || parts.some((p) => p === '') || nums.some((n) => !Number.isFinite(n) || n < 0)) {
    throw new UsageError(`Expected ${what} to be two non-negative numbers "input,output" in USD per million tokens (e.g. 0.15,0.60), got '${value}'.`);
  }
  return [nums[0]!, nums[1]!];
}

/** Read a `{ "model": [in, out] }` price object; `origin` names the file or variable in errors. */
export function parsePriceFile(text: string, origin: string): Record<string, Price> {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`Expected ${origin} to be JSON like {"gpt-4o": [2.5, 10]}: ${(error as Error).message}.`);
  }
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    throw new UsageError(`Expected ${origin} to be a JSON object like {"gpt-4o": [2.5, 10]}, got ${Array.isArray(data) ? 'an array' : typeof data}.`);
  }
  const out: Record<string, Price> = {};
  for (const [model, v] of Object.entries(data)) {
    const ok = Array.isArray(v) && v.length === 2 && v.every((n) => typeof n === 'number' && Number.isFinite(n) && n >= 0);
    if (!ok) {
      throw new UsageError(`Expected the price of "${model}" in ${origin} to be [input, output] USD per million tokens, got ${JSON.stringify(v)}.`);
    }
    out[model] = [v[0], v[1]];
  }
  return out;
}

export interface PriceSources {
  /** `--price in,out`, already parsed. */
  readonly price?: Price | null;
  /** `--prices FILE`. */
  readonly file?: string | null;
  /** LLMQ_PRICES: a file path, or the JSON itself. */
  readonly env?: string | null;
}

/** The built-in table, then LLMQ_PRICES, then `--prices FILE` on top, then `--price` over all. */
export function loadPriceTable(sources: PriceSources = {}): PriceTable {
  const models: Record<string, Price> = { ...BUILTIN_PRICES };
  const env = sources.env?.trim();
  if (env) {
    Object.assign(models, env.startsWith('{') ? parsePriceFile(env, 'LLMQ_PRICES') : parsePriceFile(readPrices(env, 'LLMQ_PRICES'), `LLMQ_PRICES file ${env}`));
  }
  if (sources.file) Object.assign(models, parsePriceFile(readPrices(sources.file, '--prices'), `--prices file ${sources.file}`));
  return { models, override: sources.price ?? null };
}

function readPrices(path: string, what: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(`Cannot read the price file ${path} given by ${what}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}.`);
  }
}
