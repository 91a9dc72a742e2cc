import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
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

/**
 * The prices a report of the queue uses (`status`, `serve`): those of the flags and LLMQ_PRICES;
 * when none is given, the `--price` or `--prices` the queue's last run was given, so what the rest
 * will cost is reckoned at the price its answers so far were stored at.
 */
export async function reportPriceTable(
  flags: PriceFlags,
  lastRun: { readonly id: string; readonly options: Record<string, unknown> } | null,
  env: NodeJS.ProcessEnv = process.env,
  warn: (text: string) => void = (text) => process.stderr.write(text),
): Promise<PriceTable> {
  const given = flags.price !== undefined || flags.prices !== undefined || Boolean(env.LLMQ_PRICES?.trim());
  const o = lastRun?.options ?? {};
  const price =
    Array.isArray(o.price) && o.price.length === 2 && o.price.every((n) => typeof n === 'number')
      ? (o.price as unknown as Price)
      : undefined;
  // a file moved or deleted since: the run's prices are not known any more (genai-prices then), said
  const prices = typeof o.prices === 'string' && existsSync(o.prices) ? o.prices : undefined;
  if (!given && typeof o.prices === 'string' && !prices)
    warn(
      `warning: the last run (${lastRun!.id.slice(0, 8)}) was priced by --prices ${o.prices}, which is not there any more: ` +
        `what is left is priced by ${price ? "that run's --price" : 'genai-prices'}. Give --prices FILE to price it as that run did.\n`,
    );
  if (given || (!price && !prices)) return priceTableFrom(flags, env);
  const { loadPriceTable } = await import('../../pricing/price-table.js');
  return loadPriceTable({ price, file: prices, givenBy: `of run ${lastRun!.id.slice(0, 8)}` });
}

/** What a run records of its prices (in its options), for `reportPriceTable`. */
export function pricesOfRun(flags: PriceFlags): { price: Price | null; prices: string | null } {
  return { price: flags.price ?? null, prices: flags.prices ? resolve(flags.prices) : null };
}
