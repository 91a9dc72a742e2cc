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
  /** The provider's batch price as a share of its online one (0.5 for OpenAI's Batch API); null when unknown. */
  readonly batchShare: number | null;
}

/**
 * One flat price per token, as `--price` and price files give it: cached input costs full price
 * (none was given for it). The price given is the online one; `batchShare` says what the model's
 * provider takes off for a batch (asked when first needed: it may load the catalog), null when
 * nobody knows.
 */
export function flatPricing(price: Price, source: string, batchShare: () => number | null = () => null): ModelPricing {
  const [input, output] = price;
  const cost = (u: Usage): number => (u.promptTokens * input + u.completionTokens * output) / 1_000_000;
  let share: number | null | undefined;
  const shareOnce = (): number | null => {
    if (share === undefined) share = batchShare();
    return share;
  };
  return {
    perMillion: price,
    source,
    cost,
    batchCost: (u) => {
      const s = shareOnce();
      return s === null ? null : cost(u) * s;
    },
    get batchShare() {
      return shareOnce();
    },
  };
}

/** The offline mock provider sends nothing anywhere, so its models cost nothing. */
export const FREE: ModelPricing = Object.freeze({
  perMillion: [0, 0] as Price,
  source: 'free (mock provider)',
  cost: () => 0,
  batchCost: () => 0,
  batchShare: 0,
});
