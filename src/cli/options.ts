import { InvalidArgumentError, Option } from 'commander';
import { readFileSync } from 'node:fs';
import { expandHome } from '../home-path.js';
import { durationWithUnitMs } from '../duration.js';

/** The --db flag every command that opens the queue takes. */
export function dbOption(): Option {
  // No real default value: resolveDbLocation falls back to LLMQ_DB, then ./llmq.db.
  return new Option('--db <path|url>', 'the queue: an SQLite file, or a postgres:// URL (env LLMQ_DB, default ./llmq.db)').argParser(
    queueLocation,
  );
}

/**
 * A queue's path or URL as given to --db, --from or --to: never empty (`--db ""`, from an unset
 * variable, would otherwise be ./llmq.db), and `~/` read as the home folder (`expandHome`).
 */
export function queueLocation(value: string): string {
  if (value.trim() === '') throw new InvalidArgumentError('Expected the path of an SQLite file or a postgres:// URL, not an empty value.');
  return expandHome(value);
}

/** `--out FILE`: `-` is stdout, as `-` is stdin to enqueue; never empty; `~/` read as home. */
export function outFile(value: string): string | undefined {
  if (value.trim() === '') throw new InvalidArgumentError('Expected a file, not an empty value (leave --out out to write to stdout).');
  return value === '-' ? undefined : expandHome(value);
}

/** A JSONL field's name (--id-field, --text-field): never empty, as no line could name it. */
export function fieldName(value: string): string {
  if (value === '') throw new InvalidArgumentError("Expected a field's name, not an empty value.");
  return value;
}

/** Defaults `run` and `estimate` (and so `run --dry-run`) share: they must not drift apart. */
export const DEFAULT_CONCURRENCY = 8;
export const DEFAULT_MAX_ATTEMPTS = 5;

export const DEFAULT_MOCK_LATENCY_MS = 200;

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

/**
 * A length of time for a flag that has always taken a bare number in `unit` (`--grace 30`, `--max-outage
 * 15`), which it still means; or a duration with its own unit (`30s`, `15m`, `1h30m`, `500ms`), as llmq
 * prints them (`paused: ... (--max-outage 15m)`) and a user types them back. Returned in `unit`.
 * `above` excludes its bound (greater than 0); `min` and `max` include theirs.
 */
type DurationBounds = { readonly above?: number; readonly min?: number; readonly max?: number };

/** What a flag of `durationIn` takes, as its refusal says it: "seconds greater than 0, or a duration with its unit (30s, 2m, 500ms)". */
export function durationExpected(unit: 'seconds' | 'minutes', bounds: DurationBounds): string {
  const range =
    bounds.above !== undefined
      ? `greater than ${bounds.above}`
      : bounds.max !== undefined
        ? `from ${bounds.min ?? 0} to ${bounds.max}`
        : `of at least ${bounds.min ?? 0}`;
  return `${unit} ${range}, or a duration with its unit ${unit === 'seconds' ? '(30s, 2m, 500ms)' : '(15m, 90s, 2h)'}`;
}

export function durationIn(unit: 'seconds' | 'minutes', bounds: DurationBounds): (value: string) => number {
  const perUnitMs = unit === 'seconds' ? 1000 : 60_000;
  const expected = `Expected ${durationExpected(unit, bounds)}.`;
  return (value) => {
    const text = value.trim();
    // a bare number as Number reads it (`.5`, `1e3`), as these flags always took it
    const bare = text !== '' && Number.isFinite(Number(text));
    const n = bare ? Number(text) : (durationWithUnitMs(text) ?? Number.NaN) / perUnitMs;
    const inRange =
      Number.isFinite(n) &&
      (bounds.above === undefined || n > bounds.above) &&
      (bounds.min === undefined || n >= bounds.min) &&
      (bounds.max === undefined || n <= bounds.max);
    if (!inRange) throw new InvalidArgumentError(expected);
    return n;
  };
}

export function positiveNumber(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0) throw new InvalidArgumentError('Expected a number greater than 0.');
  return n;
}

/**
 * A model name as the provider knows it: without the spaces a shell quote may carry (' gpt-4o '
 * was stored so, and every request would have been refused), and not empty.
 */
export function modelName(value: string): string {
  const name = value.trim();
  if (name === '') throw new InvalidArgumentError('Expected a model name, such as gpt-4o-mini.');
  return name;
}

/** A flag's value among `choices`; `hints` says what to use instead for a value that is not one but means something (`json`: the --json flag). */
export function oneOf<T extends string>(choices: readonly T[], hints: Readonly<Record<string, string>> = {}): (value: string) => T {
  return (value) => {
    if (!(choices as readonly string[]).includes(value)) {
      const hint = Object.hasOwn(hints, value) ? ` ${hints[value]}` : '';
      throw new InvalidArgumentError(`Expected one of: ${choices.join(', ')}.${hint}`);
    }
    return value as T;
  };
}

/** Collect a repeatable flag into an array. */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), value];
}

/**
 * A text flag that may name a file: `@prompt.txt` reads the file (UTF-8), anything else is the
 * text itself. Read at parse time so a missing file is reported against its flag.
 */
export function textOrFile(value: string): string {
  if (!value.startsWith('@')) return value;
  const file = value.slice(1);
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new InvalidArgumentError(`Cannot read ${file} (${code}). Give text, or @ and the path of a UTF-8 file.`);
  }
}

const BYTE_UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1000,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1000 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1000 ** 3,
  gib: 1024 ** 3,
};

/** A size in bytes: `65536`, `512KiB`, `1MiB`, `2MB`, `1m`. */
export function byteSize(value: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(value);
  const unit = m ? BYTE_UNITS[m[2]!.toLowerCase()] : undefined;
  const n = m && unit !== undefined ? Math.floor(Number(m[1]) * unit) : NaN;
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new InvalidArgumentError('Expected a size of 1 byte or more, like 65536, 512KiB or 1MiB.');
  }
  return n;
}
