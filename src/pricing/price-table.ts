import { BATCH_SHARE, catalogContextWindow, catalogPricing } from './catalog.js';
import { FREE, flatPricing, type ModelPricing } from './model-pricing.js';
import { parsePriceFile, readPriceFile, type Price } from './overrides.js';

export interface PriceSources {
  /** `--price in,out`, already parsed: one price for every model. */
  readonly price?: Price | null;
  /** `--prices FILE`. */
  readonly file?: string | null;
  /** LLMQ_PRICES: a file path, or the JSON itself. */
  readonly env?: string | null;
  /** Look models up in genai-prices. @default true */
  readonly catalog?: boolean;
  /** The moment prices are taken at (some change on a date or by time of day). @default now */
  readonly at?: Date;
  /** Every model is free: the offline mock provider answers, nobody bills. @default false */
  readonly free?: boolean;
  /** Where `price` and `file` were given, when not on this command line: "of run 1a2b3c4d". */
  readonly givenBy?: string;
}

const SNAPSHOT = /^(.+?)-(?:\d{4}-\d{2}-\d{2}|\d{4}|preview|latest)$/;
const MOCK = /^mock($|[-/:])/;

/**
 * Which price applies to a model: `--price` over everything, then `--prices FILE`, then
 * LLMQ_PRICES, then genai-prices. The offline mock provider's models are free but for a price given
 * on the command line (`--price`, or the model in `--prices FILE`: a budget tried offline). A model
 * nobody prices is null: its cost is unknown, never 0.
 */
export class PriceTable {
  /** `--price`, with the source it is named by. */
  readonly #override: { readonly price: Price; readonly source: string } | null;
  readonly #given = new Map<string, ModelPricing>();
  /** Of those, the ones `--prices FILE` gave: they price the mock's models too. */
  readonly #givenInFile = new Map<string, ModelPricing>();
  readonly #catalog: boolean;
  readonly #at: Date;
  readonly #seen = new Map<string, ModelPricing | null>();
  readonly #free: boolean;

  constructor(sources: PriceSources = {}) {
    this.#free = sources.free ?? false;
    const by = sources.givenBy ? ` ${sources.givenBy}` : '';
    this.#override = sources.price ? { price: sources.price, source: `--price${by}` } : null;
    this.#catalog = sources.catalog ?? true;
    this.#at = sources.at ?? new Date();
    const given = (price: Price, source: string, model: string) => flatPricing(price, source, () => this.#batchShare(model));
    const env = sources.env?.trim();
    if (env) {
      const prices = env.startsWith('{')
        ? parsePriceFile(env, 'LLMQ_PRICES')
        : parsePriceFile(readPriceFile(env, 'LLMQ_PRICES'), `LLMQ_PRICES file ${env}`);
      for (const [model, price] of Object.entries(prices)) this.#given.set(model, given(price, 'LLMQ_PRICES', model));
    }
    if (sources.file) {
      const prices = parsePriceFile(readPriceFile(sources.file, '--prices'), `--prices file ${sources.file}`);
      for (const [model, price] of Object.entries(prices)) {
        const pricing = given(price, `--prices ${sources.file}${by}`, model);
        this.#given.set(model, pricing);
        this.#givenInFile.set(model, pricing);
      }
    }
  }

  /** The model's pricing, or null when no source knows it. */
  lookup(model: string): ModelPricing | null {
    let found = this.#seen.get(model);
    if (found === undefined) {
      const o = this.#override;
      found = o
        ? flatPricing(o.price, o.source, () => this.#batchShare(model))
        : this.#free || MOCK.test(model)
          ? (this.#fromGiven(model, this.#givenInFile) ?? FREE)
          : (this.#fromGiven(model, this.#given) ?? (this.#catalog ? catalogPricing(model, this.#at) : null));
      this.#seen.set(model, found);
    }
    return found;
  }

  /**
   * How many tokens the model takes in one request, prompt and answer together, as genai-prices
   * knows it; null when it does not, or when nothing would refuse a longer one (the offline mock).
   */
  contextWindow(model: string): number | null {
    if (this.#free || MOCK.test(model) || !this.#catalog) return null;
    return catalogContextWindow(model, this.#at);
  }

  /**
   * A given price is the online one: a batch of the model costs the share its provider takes, as
   * genai-prices knows the provider (half for OpenAI, Anthropic and Google), else unknown. The
   * offline mock's batch lane stands in for OpenAI's Batch API: half.
   */
  #batchShare(model: string): number | null {
    if (MOCK.test(model)) return BATCH_SHARE.openai!;
    return this.#catalog ? (catalogPricing(model, this.#at)?.batchShare ?? null) : null;
  }

  /**
   * Exactly as named; "openai/gpt-4o" (LiteLLM, OpenRouter) as "gpt-4o"; dated snapshots
   * ("gpt-4o-mini-2024-07-18", "gpt-3.5-turbo-0125") as their family. Any other suffix is a
   * different model.
   */
  #fromGiven(model: string, given: ReadonlyMap<string, ModelPricing>): ModelPricing | null {
    if (given.size === 0) return null;
    const bare = model.slice(model.lastIndexOf('/') + 1);
    const family = bare.match(SNAPSHOT)?.[1];
    return given.get(model) ?? given.get(bare) ?? (family !== undefined ? (given.get(family) ?? null) : null);
  }
}

/** The prices `status`, `export`, `estimate` and `run` use, from the flags and environment given. */
export function loadPriceTable(sources: PriceSources = {}): PriceTable {
  return new PriceTable(sources);
}
