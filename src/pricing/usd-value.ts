/**
 * An amount of USD without the noise of binary fractions (tokens times a price per million:
 * 0.00006584999999999999 for 0.00006585), as people and programs read it: 12 significant digits.
 */
export function usdValue<T extends number | null | undefined>(usd: T): T {
  return (typeof usd === 'number' && Number.isFinite(usd) ? Number(usd.toPrecision(12)) : usd) as T;
}

/** JSON.stringify's replacer for reports holding money: fractions written without that noise. */
export function withoutFractionNoise(_key: string, value: unknown): unknown {
  return typeof value === 'number' && !Number.isInteger(value) ? usdValue(value) : value;
}
