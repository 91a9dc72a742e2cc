// The real CLI as child processes, for benches that judge llmq as a user runs it: documents written as
// JSONL, `llmq enqueue`, `llmq run` with a time cap, and throwaway PostgreSQL schemas.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';

// LLMQ_BENCH_BIN runs another build (e.g. a copy of bin/ and dist/ from before a change) for before/after figures.
export const BIN = process.env.LLMQ_BENCH_BIN || fileURLToPath(new URL('../bin/llmq.js', import.meta.url));
export const PG_URL = process.env.LLMQ_TEST_PG_URL || 'postgres://postgres@127.0.0.1:5432/test';
export const REDIS_URL = process.env.LLMQ_TEST_REDIS_URL || 'redis://127.0.0.1:6379';
/** The prompt every bench document is rendered with. */
export const PROMPT = 'Summarize: {{text}}';

export interface RunResult {
  /** Exit code, or null when the cap killed it. */
  readonly code: number | null;
  /** Seconds from spawning the process to its exit (or to the cap). */
  readonly wallS: number;
  readonly finished: boolean;
  /** The end of its stderr, for saying why a run failed. */
  readonly stderr: string;
}

/** The text of document `n`: distinct, short, and the same number of tokens for every n below 10,000. */
export function docText(n: number): string {
  return `Document ${String(n).padStart(4, '0')}: a short note about the quick brown fox.`;
}

/** Write `count` documents as JSONL into `dir`; returns the file. */
export function writeDocs(dir: string, count: number): string {
  const file = join(dir, `docs-${count}.jsonl`);
  const lines = Array.from({ length: count }, (_, n) => JSON.stringify({ id: `doc-${n}`, text: docText(n) }));
  writeFileSync(file, lines.join('\n') + '\n');
  return file;
}

/** `llmq enqueue` the file into `db` for gpt-4o-mini, each answer capped at `maxTokens`. */
export async function enqueue(db: string, file: string, maxTokens: number): Promise<void> {
  const r = await runChild(
    ['enqueue', file, '--db', db, '--model', 'gpt-4o-mini', '--max-tokens', String(maxTokens), '--prompt', PROMPT, '--json'],
    60,
  );
  if (r.code !== 0) throw new Error(`llmq enqueue exited ${r.code}: ${r.stderr}`);
}

/** `llmq run --progress none` with these arguments, killed if it is still running after `capS` seconds. */
export function run(args: readonly string[], capS: number): Promise<RunResult> {
  return runChild(['run', ...args, '--progress', 'none'], capS);
}

function runChild(args: readonly string[], capS: number): Promise<RunResult> {
  const t0 = performance.now();
  const child = spawn(process.execPath, [BIN, ...args], {
    stdio: ['ignore', 'ignore', 'pipe'],
    env: { ...process.env, LLMQ_API_KEY: 'sk-test', NO_COLOR: '1' },
  });
  let stderr = '';
  child.stderr!.on('data', (d) => {
    stderr = (stderr + d).slice(-2000);
  });
  let capped = false;
  const cap = setTimeout(() => {
    capped = true;
    child.kill('SIGKILL');
  }, capS * 1000);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(cap);
      const wallS = (performance.now() - t0) / 1000;
      resolve({ code: capped ? null : (code ?? 1), wallS, finished: !capped, stderr: stderr.trim() });
    }),
  );
}

/** A URL to a fresh schema of the test database, dropped once `fn` is done with it. */
export async function withPgSchema<T>(fn: (url: string) => Promise<T>): Promise<T> {
  const schema = `llmq_bench_${randomBytes(5).toString('hex')}`;
  try {
    return await fn(`${PG_URL}${PG_URL.includes('?') ? '&' : '?'}schema=${schema}`);
  } finally {
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}
