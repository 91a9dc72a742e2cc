/**
 * A process start is most of what a quick command costs (`llmq status --json` on a 1M-job queue
 * is ~2 ms of SQL in ~200 ms), so each command loads only its own code: the other commands' files,
 * colors, the scheduler, the HTTP client and the price data stay on disk unless the command uses
 * them. Runs the built CLI, so `npm run build` first (`npm test` does).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

const HOOK = fileURLToPath(new URL('./helpers/loaded-modules.mjs', import.meta.url));
const ROOT = new URL('..', import.meta.url).href;

/** The files the command loaded, relative to the repository: `dist/cli/main.js`, `node_modules/chalk/...`. */
async function loadedBy(args: string[], dir: string, env: Record<string, string> = {}): Promise<string[]> {
  const list = join(dir, `loaded-${args[0]}.txt`);
  writeFileSync(list, '');
  const r = await runCli(args, { nodeArgs: ['--import', HOOK], env: { ...env, LLMQ_TEST_LOADED: list } });
  expect(r.code, r.stderr).toBe(0);
  const files = readFileSync(list, 'utf8')
    .split('\n')
    .filter((u) => u.startsWith(ROOT))
    .map((u) => u.slice(ROOT.length));
  return [...new Set(files)];
}

const commandFiles = (files: string[]) => files.filter((f) => f.startsWith('dist/cli/commands/'));
const packages = (files: string[]) => [...new Set(files.flatMap((f) => /^node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(f)?.[1] ?? []))];

describe('a command loads only its own code', () => {
  it('llmq --version loads no command, and nothing but commander', async () => {
    const files = await loadedBy(['--version'], tempDir());
    expect(commandFiles(files)).toEqual([]);
    expect(packages(files)).toEqual(['commander']);
  });

  it('llmq status --json loads the status command, the store and the prices, not the other commands or colors', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const cache = { XDG_CACHE_HOME: join(dir, 'cache') };
    writeFileSync(join(dir, 'docs.jsonl'), '{"id":"a","text":"one"}\n{"id":"b","text":"two"}\n');
    expect((await runCli(['enqueue', join(dir, 'docs.jsonl'), '--db', db, '--model', 'gpt-4o-mini'])).code).toBe(0);

    const files = await loadedBy(['status', '--json', '--db', db], dir, cache);
    expect(commandFiles(files).sort()).toEqual(['dist/cli/commands/price-options.js', 'dist/cli/commands/status.js']);
    // gpt-4o-mini's price comes from genai-prices: status shows it
    expect(packages(files).sort()).toEqual(['@pydantic/genai-prices', 'better-sqlite3', 'bindings', 'commander', 'file-uri-to-path']);
    expect(files.filter((f) => /^dist\/(scheduler|provider|ingest|batch|serve|hooks|alerts)\//.test(f))).toEqual([]);
    // a run's WAL checkpointer thread (and node:worker_threads) only for a run
    expect(files).not.toContain('dist/store/sqlite/checkpointer.js');
    expect(files).not.toContain('dist/store/sqlite/load-writer.js');

    // the next status finds that price in the user's cache: the price data stays on disk
    const again = await loadedBy(['status', '--json', '--db', db], dir, cache);
    expect(packages(again).sort()).toEqual(['better-sqlite3', 'bindings', 'commander', 'file-uri-to-path']);
  });

  it('llmq show loads neither the price data nor another command', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    writeFileSync(join(dir, 'docs.jsonl'), '{"id":"a","text":"one"}\n');
    expect((await runCli(['enqueue', join(dir, 'docs.jsonl'), '--db', db])).code).toBe(0);

    const files = await loadedBy(['show', 'a', '--db', db], dir);
    expect(commandFiles(files)).toEqual(['dist/cli/commands/show.js']);
    expect(packages(files)).not.toContain('@pydantic/genai-prices');
    expect(files.filter((f) => f.startsWith('dist/pricing/'))).toEqual([]);
  });

  it('llmq estimate counts tokens but loads no HTTP client: it sends nothing', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    writeFileSync(join(dir, 'docs.jsonl'), '{"id":"a","text":"one"}\n');
    expect((await runCli(['enqueue', join(dir, 'docs.jsonl'), '--db', db])).code).toBe(0);

    const files = await loadedBy(['estimate', '--db', db], dir);
    expect(commandFiles(files).sort()).toEqual(['dist/cli/commands/estimate.js', 'dist/cli/commands/price-options.js']);
    expect(packages(files)).toContain('gpt-tokenizer');
    expect(packages(files)).not.toContain('undici');
  });

  it('the JSON Schema checker (ajv) is loaded only where a request asks for JSON: not by an enqueue or run without --schema', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    writeFileSync(join(dir, 'docs.jsonl'), '{"id":"a","text":"one"}\n');
    const plain = await loadedBy(['enqueue', join(dir, 'docs.jsonl'), '--db', db], dir);
    expect(packages(plain)).not.toContain('ajv');
    expect(
      packages(await loadedBy(['run', '--db', db, '--provider', 'mock', '--mock-latency', '0', '--progress', 'none'], dir)),
    ).not.toContain('ajv');
    writeFileSync(join(dir, 's.json'), '{"type":"object","properties":{"a":{"type":"string"}}}');
    const schema = await loadedBy(['enqueue', join(dir, 'docs.jsonl'), '--db', db, '--schema', join(dir, 's.json')], dir);
    expect(packages(schema)).toContain('ajv');
  });
});
