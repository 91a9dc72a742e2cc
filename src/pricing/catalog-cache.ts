import { randomBytes } from 'node:crypto';
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join } from 'node:path';
import { makeDirs } from '../make-dirs.js';

/**
 * A flat, unconditional catalog price: the same at any moment, a straight line in the tokens. Most
 * models' prices are this; the others (prices that change on a date or by time of day, or by the
 * prompt's size) are never cached and always come from genai-prices itself.
 */
export interface FlatCatalogPrice {
  /** The provider genai-prices matched (its batch discount depends on it). */
  readonly providerId: string;
  /** USD per million tokens. */
  readonly input: number;
  readonly cachedInput: number;
  readonly output: number;
  /** USD per request. */
  readonly perRequest: number;
  /** Tokens the model takes in one request, prompt and answer together; null when genai-prices does not say. */
  readonly contextWindow: number | null;
}

/** A model's cached lookup: its flat price, or null when genai-prices does not know the model. */
export type CachedLookup = FlatCatalogPrice | null;

/** Bumped when FlatCatalogPrice changes shape or catalogPricing looks names up differently, so no llmq reads an answer another one worked out. */
const FORMAT = 2;
/** A cache is a few models; a file past this many was filled by something odd, and starts over. */
const MAX_ENTRIES = 2000;

/**
 * What genai-prices said about each model, kept between commands. Its data is ~500 KB of
 * JavaScript that takes ~60 ms to load, more than everything else `status --json` does on a
 * million-job queue; the answers for the few models a queue uses are a few hundred bytes. Keyed by
 * the installed genai-prices version (its data changes only with it), in the user's cache folder
 * (XDG_CACHE_HOME, else ~/.cache). Any trouble reading or writing it only means genai-prices is
 * asked again: the cache is never a reason for a command to fail.
 */
export class CatalogCache {
  /** Null when there is no absolute place for it (no HOME): then nothing is cached. */
  readonly #file: string | null;
  #entries: Map<string, CachedLookup> | null = null;

  constructor(genaiPricesVersion: string, env: NodeJS.ProcessEnv = process.env) {
    const dir = cacheDir(env);
    this.#file = dir === null ? null : join(dir, `genai-prices-${genaiPricesVersion}.v${FORMAT}.json`);
  }

  /** The cached lookup, or undefined when this model was never looked up (or the file is unreadable). */
  get(model: string): CachedLookup | undefined {
    return this.#load().get(model);
  }

  /** Remember a lookup; written at once (a whole new file, renamed over the old one, so readers never see half). */
  set(model: string, lookup: CachedLookup): void {
    const entries = this.#load();
    if (entries.size >= MAX_ENTRIES) entries.clear();
    entries.set(model, lookup);
    if (this.#file === null) return;
    // pid and random: two containers sharing the folder may both be pid 1
    const tmp = `${this.#file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      makeDirs(dirname(this.#file));
      writeFileSync(tmp, JSON.stringify(Object.fromEntries(entries)));
      renameSync(tmp, this.#file);
    } catch {
      // A read-only home or a full disk: the next command asks genai-prices again.
      try {
        rmSync(tmp, { force: true });
      } catch {
        // its folder is not one (ENOTDIR): there is no file to remove
      }
    }
  }

  #load(): Map<string, CachedLookup> {
    if (this.#entries) return this.#entries;
    this.#entries = new Map();
    if (this.#file === null) return this.#entries;
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(this.#file, 'utf8'));
    } catch {
      return this.#entries;
    }
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) {
      for (const [model, v] of Object.entries(parsed)) if (v === null || isFlatPrice(v)) this.#entries.set(model, v);
    }
    return this.#entries;
  }
}

/** Relative places are ignored (the XDG Base Directory spec): they would put a cache in whatever folder a command runs in. */
function cacheDir(env: NodeJS.ProcessEnv): string | null {
  const xdg = env.XDG_CACHE_HOME?.trim();
  if (xdg && isAbsolute(xdg)) return join(xdg, 'llmq');
  let home: string;
  try {
    home = homedir();
  } catch {
    return null; // no HOME and no entry in the password file
  }
  return isAbsolute(home) ? join(home, '.cache', 'llmq') : null;
}

function isFlatPrice(v: unknown): v is FlatCatalogPrice {
  if (!v || typeof v !== 'object') return false;
  const p = v as Record<string, unknown>;
  const money = (x: unknown) => typeof x === 'number' && Number.isFinite(x) && x >= 0;
  const window = p.contextWindow === null || (Number.isSafeInteger(p.contextWindow) && (p.contextWindow as number) > 0);
  return typeof p.providerId === 'string' && money(p.input) && money(p.cachedInput) && money(p.output) && money(p.perRequest) && window;
}
