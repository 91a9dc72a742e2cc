/**
 * genai-prices' answers are kept in the user's cache folder so that quick commands (`status --json`)
 * need not load its ~500 KB of data each time. What is cached must price exactly as the library
 * does, prices that depend on the moment must never be cached, and a cache that is damaged,
 * from another version or impossible to write must change nothing but the speed.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { installedGenaiPricesVersion } from '../src/pricing/catalog.js';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

interface ModelCostJson {
  model: string;
  price: [number, number] | null;
  priceSource: string | null;
  usd: number | null;
}

/** A queue with one job for each model. */
async function queueOf(dir: string, models: string[]): Promise<string> {
  const db = join(dir, 'q.db');
  for (const [i, model] of models.entries()) {
    const file = join(dir, `docs-${i}.jsonl`);
    writeFileSync(file, `{"id":"doc-${i}","text":"text for ${model}"}\n`);
    const r = await runCli(['enqueue', file, '--db', db, '--model', model]);
    expect(r.code, r.stderr).toBe(0);
  }
  return db;
}

async function pricesBy(db: string, cacheHome: string): Promise<Record<string, ModelCostJson>> {
  const r = await runCli(['status', '--json', '--db', db], { env: { XDG_CACHE_HOME: cacheHome } });
  expect(r.code, r.stderr).toBe(0);
  const byModel = (JSON.parse(r.stdout) as { cost: { byModel: ModelCostJson[] } }).cost.byModel;
  return Object.fromEntries(byModel.map((m) => [m.model, m]));
}

const cacheFile = (cacheHome: string, version = installedGenaiPricesVersion()) =>
  join(cacheHome, 'llmq', `genai-prices-${version}.v2.json`);

describe('the genai-prices cache', () => {
  it('prices a model the same from the cache as from the library, and remembers a model nobody prices', async () => {
    const dir = tempDir();
    const db = await queueOf(dir, ['gpt-4o-mini', 'claude-3-5-haiku-latest', 'llama-local-7b']);
    const cacheHome = join(dir, 'cache');

    const first = await pricesBy(db, cacheHome);
    expect(first['gpt-4o-mini']!.price).toEqual([0.15, 0.6]);
    expect(first['gpt-4o-mini']!.priceSource).toMatch(/^genai-prices \d{4}-\d{2}-\d{2}$/);
    expect(first['llama-local-7b']!.price).toBeNull();

    const cached = JSON.parse(readFileSync(cacheFile(cacheHome), 'utf8')) as Record<string, unknown>;
    expect(Object.keys(cached).sort()).toEqual(['claude-3-5-haiku-latest', 'gpt-4o-mini', 'llama-local-7b']);
    expect(cached['llama-local-7b']).toBeNull();
    // with its context window: estimate's jobs too long for the model, without loading genai-prices
    expect(cached['gpt-4o-mini']).toMatchObject({ contextWindow: 128_000 });

    expect(await pricesBy(db, cacheHome)).toEqual(first);
  });

  it('never caches a price that changes by time of day or on a date, or that has tiers by prompt size', async () => {
    const dir = tempDir();
    // deepseek-chat: cheaper off-peak; gemini-2.5-pro: dearer past 200k prompt tokens
    const db = await queueOf(dir, ['deepseek-chat', 'gemini-2.5-pro', 'gpt-4o-mini']);
    const cacheHome = join(dir, 'cache');

    const first = await pricesBy(db, cacheHome);
    expect(first['deepseek-chat']!.price).not.toBeNull();
    expect(first['gemini-2.5-pro']!.price).toEqual([1.25, 10]);
    const cached = JSON.parse(readFileSync(cacheFile(cacheHome), 'utf8')) as Record<string, unknown>;
    expect(Object.keys(cached)).toEqual(['gpt-4o-mini']);
  });

  it('uses what is cached for the installed genai-prices version only', async () => {
    const dir = tempDir();
    const db = await queueOf(dir, ['gpt-4o-mini']);
    const cacheHome = join(dir, 'cache');
    mkdirSync(join(cacheHome, 'llmq'), { recursive: true });
    const planted = JSON.stringify({
      'gpt-4o-mini': { providerId: 'openai', input: 7, cachedInput: 7, output: 9, perRequest: 0, contextWindow: 128_000 },
    });

    writeFileSync(cacheFile(cacheHome, '0.0.1'), planted);
    expect((await pricesBy(db, cacheHome))['gpt-4o-mini']!.price).toEqual([0.15, 0.6]);

    // the cache is what is read: a (planted) entry for this version is the price shown
    writeFileSync(cacheFile(cacheHome), planted);
    expect((await pricesBy(db, cacheHome))['gpt-4o-mini']!.price).toEqual([7, 9]);
  });

  it('a damaged cache file, or an entry of the wrong shape, is asked again and written anew', async () => {
    const dir = tempDir();
    const db = await queueOf(dir, ['gpt-4o-mini', 'gpt-4.1-nano']);
    const cacheHome = join(dir, 'cache');
    const expected = await pricesBy(db, join(dir, 'fresh-cache'));
    mkdirSync(join(cacheHome, 'llmq'), { recursive: true });

    writeFileSync(cacheFile(cacheHome), '{"gpt-4o-mini": {"providerId": "openai", "inp');
    expect(await pricesBy(db, cacheHome)).toEqual(expected);
    expect(Object.keys(JSON.parse(readFileSync(cacheFile(cacheHome), 'utf8'))).sort()).toEqual(['gpt-4.1-nano', 'gpt-4o-mini']);

    writeFileSync(
      cacheFile(cacheHome),
      JSON.stringify({ 'gpt-4o-mini': { providerId: 'openai', input: '0.15' }, 'gpt-4.1-nano': { providerId: 'openai', input: -1 } }),
    );
    expect(await pricesBy(db, cacheHome)).toEqual(expected);
  });

  it('a relative XDG_CACHE_HOME is ignored, as the XDG spec says: no cache folders wherever a command runs', async () => {
    const dir = tempDir();
    const db = await queueOf(dir, ['gpt-4o-mini']);
    const home = join(dir, 'home');
    mkdirSync(home);
    const r = await runCli(['status', '--json', '--db', db], { cwd: dir, env: { XDG_CACHE_HOME: 'relative/cache', HOME: home } });
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(join(dir, 'relative'))).toBe(false);
    expect(existsSync(join(home, '.cache', 'llmq'))).toBe(true);
  });

  it('without a home folder (HOME empty) nothing is cached, and nothing lands in the current folder', async () => {
    const dir = tempDir();
    const db = await queueOf(dir, ['gpt-4o-mini']);
    const r = await runCli(['status', '--json', '--db', db], { cwd: dir, env: { XDG_CACHE_HOME: undefined, HOME: '' } });
    expect(r.code, r.stderr).toBe(0);
    expect(existsSync(join(dir, '.cache'))).toBe(false);
    expect((JSON.parse(r.stdout) as { cost: { byModel: ModelCostJson[] } }).cost.byModel[0]!.price).toEqual([0.15, 0.6]);
  });

  it('estimate prices the same, batch price included, from a cache file read back as from the library', async () => {
    const dir = tempDir();
    const db = await queueOf(dir, ['gpt-4o-mini', 'claude-3-5-haiku-latest']);
    const cacheHome = join(dir, 'cache');
    const estimate = async () => {
      const r = await runCli(['estimate', '--db', db, '--json'], { env: { XDG_CACHE_HOME: cacheHome } });
      expect(r.code, r.stderr).toBe(0);
      return JSON.parse(r.stdout);
    };
    const fromLibrary = await estimate();
    expect(existsSync(cacheFile(cacheHome))).toBe(true);
    const fromCache = await estimate();
    expect(fromCache).toEqual(fromLibrary);
    expect(fromCache.models.find((m: { model: string }) => m.model === 'gpt-4o-mini').batchCost).not.toBeNull();
  });

  it('a cache folder that cannot be written changes nothing but the speed', async () => {
    const dir = tempDir();
    const db = await queueOf(dir, ['gpt-4o-mini']);
    const notAFolder = join(dir, 'a-file');
    writeFileSync(notAFolder, 'not a folder');
    const r = await runCli(['status', '--json', '--db', db], { env: { XDG_CACHE_HOME: notAFolder } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect((JSON.parse(r.stdout) as { cost: { byModel: ModelCostJson[] } }).cost.byModel[0]!.price).toEqual([0.15, 0.6]);
    expect(existsSync(join(notAFolder, 'llmq'))).toBe(false);
  });
});
