import { InvalidArgumentError, Option } from 'commander';
import { parsePrice, type Price } from '../../pricing/overrides.js';
import type { PriceTable } from '../../pricing/price-table.js';
import { UsageError } from '../../errors.js';

/** The pricing flags `status`, `export`, `estimate` and `run` share. */
export interface PriceFlags {
  price?: Price;
  prices?: string;
}

export function priceOptions(): Option[] {
  return [
    new Option('--price <in,out>', 'USD per million input,output tokens for every model, e.g. 0.15,0.60 (over any other price)').argParser(
      (v) => {
        try {
          return parsePrice(v);
        } catch (error) {
          // commander prefixes "option '--price <in,out>' argument 'x' is invalid."
          if (error instanceof UsageError)
            throw new InvalidArgumentError('Expected two non-negative numbers "input,output" in USD per million tokens, e.g. 0.15,0.60.');
          throw error;
        }
      },
    ),
    new Option('--prices <file>', 'JSON file of prices per model: {"model": [in, out]} (env LLMQ_PRICES); over genai-prices'),
  ];
}

/**
 * The prices the flags and LLMQ_PRICES give; with `--provider mock` nothing is billed, so everything is free.
 * The price table is loaded here, by the commands that price something, not by every start of the CLI.
 */
export async function priceTableFrom(flags: PriceFlags & { provider?: string }, env: NodeJS.ProcessEnv = process.env): Promise<PriceTable> {
  const { loadPriceTable } = await import('../../pricing/price-table.js');
  return loadPriceTable({
    price: flags.price ?? null,
    file: flags.prices ?? null,
    env: env.LLMQ_PRICES ?? null,
    free: flags.provider === 'mock',
  });
}
