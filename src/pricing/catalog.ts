import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Usage } from '../store/types.js';
import { CatalogCache, type FlatCatalogPrice } from './catalog-cache.js';
import type { ModelPricing } from './model-pricing.js';

type GenaiPrices = typeof import('@pydantic/genai-prices');
type Calculation = NonNullable<ReturnType<GenaiPrices['calcPrice']>>;

const require = createRequire(import.meta.url);

/** The price data is ~800 KB of JavaScript: loaded on the first model that needs it, not by every command. */
let lib: GenaiPrices | null = null;
function genaiPrices(): GenaiPrices {
  lib ??= require('@pydantic/genai-prices') as GenaiPrices;
  return lib;
}

/**
 * genai-prices carries no date for its data: each release bundles the data of the day it was
 * published, so that day is the data's date. Upgrading the package means adding its line here
 * (test/prices.test.ts fails until the installed version has one); an unknown version is named by
 * its number instead.
 */
export const GENAI_PRICES_RELEASES: Readonly<Record<string, string>> = Object.freeze({
  '0.1.8': '2026-09-23',
});

let installed: string | null = null;
/** Read once: the cache's file name and every price's label both need it. */
export function installedGenaiPricesVersion(): string {
  if (installed === null) {
    const main = require.resolve('@pydantic/genai-prices');
    installed = (JSON.parse(readFileSync(join(dirname(main), '..', 'package.json'), 'utf8')) as { version: string }).version;
  }
  return installed;
}

let sourceLabel: string | null = null;
/** `genai-prices 2026-09-23`: what every price from the catalog is labelled with. */
export function catalogSource(): string {
  if (sourceLabel === null) {
    const version = installedGenaiPricesVersion();
    sourceLabel = `genai-prices ${GENAI_PRICES_RELEASES[version] ?? version}`;
  }
  return sourceLabel;
}

/**
 * Batch API prices as a share of the online price, for providers that publish one flat discount
 * (OpenAI Batch API, Anthropic Message Batches, Gemini Batch Mode: half price). genai-prices has
 * online prices only; other providers' batch prices are unknown.
 */
export const BATCH_SHARE: Readonly<Record<string, number>> = Object.freeze({ openai: 0.5, anthropic: 0.5, google: 0.5 });

let cache: CatalogCache | null = null;
function catalogCache(): CatalogCache {
  cache ??= new CatalogCache(installedGenaiPricesVersion());
  return cache;
}

/**
 * The price genai-prices has for a model at `at`, or null (`catalogMatch` says how it is looked up).
 * A flat, unconditional price (or the model being unknown) is remembered in the CatalogCache, so
 * the next command does not load genai-prices for it.
 */
export function catalogPricing(model: string, at: Date): ModelPricing | null {
  const cached = catalogCache().get(model);
  if (cached !== undefined) return cached && flatCatalogPricing(cached);
  const match = catalogMatch(model, at);
  if (!match) {
    catalogCache().set(model, null);
    return null;
  }
  const flat = flatPriceOf(match.found);
  if (!flat) return tieredPricing(match.found, match.name, at);
  catalogCache().set(model, flat);
  return flatCatalogPricing(flat);
}

/**
 * How many tokens the model takes in one request, its prompt and its answer together (its context
 * window), as genai-prices knows it; null when it does not. A request asking more is refused, unbilled.
 */
export function catalogContextWindow(model: string, at: Date): number | null {
  // a flat price is cached with its window (and an unknown model as such): the next command need not load genai-prices
  if (catalogCache().get(model) === undefined) catalogPricing(model, at);
  const cached = catalogCache().get(model);
  if (cached !== undefined) return cached?.contextWindow ?? null;
  return contextWindowOf(catalogMatch(model, at)?.found ?? null); // a tiered price is never cached
}

/** Tried as named, then, for `provider/model` names (LiteLLM, OpenRouter), as that provider's model, then as the bare model. */
function catalogMatch(model: string, at: Date): { found: Calculation; name: string } | null {
  const { calcPrice } = genaiPrices();
  const zero = { input_tokens: 0, output_tokens: 0 };
  const slash = model.indexOf('/');
  const tries: Array<{ name: string; providerId?: string }> = [{ name: model }];
  if (slash > 0)
    tries.push({ name: model.slice(slash + 1), providerId: model.slice(0, slash) }, { name: model.slice(model.lastIndexOf('/') + 1) });
  for (const t of tries) {
    const found = calcPrice(zero, t.name, { providerId: t.providerId, timestamp: at });
    if (found) return { found, name: t.name };
  }
  return null;
}

function contextWindowOf(found: Calculation | null): number | null {
  const window = (found?.model as { context_window?: unknown } | undefined)?.context_window;
  return typeof window === 'number' && window > 0 ? window : null;
}

/** The price as a straight line, when it is one at every moment: not tiered by prompt size, not changing on a date or by time of day. */
function flatPriceOf(found: Calculation): FlatCatalogPrice | null {
  if (Array.isArray(found.model.prices)) return null;
  const p = found.model_price;
  if (Object.values(p).some((v) => v !== undefined && typeof v !== 'number')) return null;
  const rate = (key: string): number | undefined => (typeof p[key] === 'number' ? (p[key] as number) : undefined);
  const input = rate('input_mtok') ?? 0;
  return {
    providerId: found.provider.id,
    input,
    cachedInput: rate('cache_read_mtok') ?? input,
    output: rate('output_mtok') ?? 0,
    perRequest: (rate('requests_kcount') ?? 0) / 1000,
    contextWindow: contextWindowOf(found),
  };
}

/** Most models: worked out here (the library's general path costs ~10 µs a call). */
function flatCatalogPricing(f: FlatCatalogPrice): ModelPricing {
  const cost = (u: Usage): number => {
    const hit = Math.min(u.cachedTokens ?? 0, u.promptTokens);
    return ((u.promptTokens - hit) * f.input + hit * f.cachedInput + u.completionTokens * f.output) / 1_000_000 + f.perRequest;
  };
  return withBatchShare(f.providerId, [f.input, f.output], cost);
}

/** Tiers depend on the prompt's size, and dated or time-of-day prices on `at`: the library works each request out. */
function tieredPricing(found: Calculation, name: string, at: Date): ModelPricing {
  const p = found.model_price;
  const base = (key: string): number => {
    const v = p[key];
    return typeof v === 'number' ? v : v && typeof v === 'object' ? v.base : 0;
  };
  const pinned = { ...found.provider, models: [found.model] };
  const cost = (u: Usage): number => genaiPrices().calcPrice(usageFor(u), name, { provider: pinned, timestamp: at })?.total_price ?? 0;
  return withBatchShare(found.provider.id, [base('input_mtok'), base('output_mtok')], cost);
}

function withBatchShare(providerId: string, perMillion: [number, number], cost: (u: Usage) => number): ModelPricing {
  const share = BATCH_SHARE[providerId];
  return {
    perMillion,
    source: catalogSource(),
    cost,
    batchCost: share === undefined ? () => null : (u) => cost(u) * share,
    batchShare: share ?? null,
  };
}

function usageFor(u: Usage): Record<string, number> {
  const cached = Math.min(u.cachedTokens ?? 0, u.promptTokens);
  return cached > 0
    ? { input_tokens: u.promptTokens, cache_read_tokens: cached, output_tokens: u.completionTokens }
    : { input_tokens: u.promptTokens, output_tokens: u.completionTokens };
}
