import type { Usage } from '../store/types.js';
import type { Price } from './overrides.js';

/** What one model costs, and where that figure came from. */
export interface ModelPricing {
  /** USD per million [input, output] tokens (the first tier, when the price has tiers). */
  readonly perMillion: Price;
  /** Where the price came from and how recent it is: `genai-prices 2026-09-23`, `--price`, `--prices FILE`, `LLMQ_PRICES`. */
  readonly source: string;
  /** USD for the usage of one request. */
  cost(usage: Usage): number;
  /** USD for the same usage at the provider's batch price; null when no batch price is known. */
  batchCost(usage: Usage): number | null;
}

/** One flat price per token, as `--price` and price files give it: cached input costs full price (none was given for it). */
export function flatPricing(price: Price, source: string): ModelPricing {
  const [input, output] = price;
  return {
    perMillion: price,
    source,
    cost: (u) => (u.promptTokens * input + u.completionTokens * output) / 1_000_000,
    batchCost: () => null,
  };
}

/** The offline mock provider sends nothing anywhere, so its models cost nothing. */
export const FREE: ModelPricing = Object.freeze({
  perMillion: [0, 0] as Price,
  source: 'free (mock provider)',
  cost: () => 0,
  batchCost: () => 0,
});
