import { InvalidArgumentError } from 'commander';

/**
 * Flag parsers for commander. Each one names what it expected, so a bad value reads as
 * "option '--concurrency <n>' argument 'abc' is invalid. Expected an integer of 1 or more."
 */
export function intAtLeast(min: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (!/^[-+]?\d+$/.test(value.trim()) || !Number.isSafeInteger(n) || n < min) {
      throw new InvalidArgumentError(`Expected an integer of ${min} or more.`);
    }
    return n;
  };
}

export function anyInt(value: string): number {
  const n = Number(value);
  if (!/^[-+]?\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('Expected an integer.');
  return n;
}

export function numberBetween(min: number, max: number): (value: string) => number {
  return (value) => {
    const n = Number(value);
    if (value.trim() === '' || !Number.isFinite(n) || n < min || n > max) {
      throw new InvalidArgumentError(`Expected a number from ${min} to ${max}.`);
    }
    return n;
  };
}

export function positiveNumber(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('Expected a number greater than 0.');
  return n;
}

export function oneOf<T extends string>(choices: readonly T[]): (value: string) => T {
  return (value) => {
    if (!(choices as readonly string[]).includes(value)) {
      throw new InvalidArgumentError(`Expected one of: ${choices.join(', ')}.`);
    }
    return value as T;
  };
}

/** Collect a repeatable flag into an array. */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}
