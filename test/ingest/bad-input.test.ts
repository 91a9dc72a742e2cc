import Database from 'better-sqlite3';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, cliEnv, collect } from '../helpers/cli.js';
import { tempDir } from '../helpers/tmp.js';
import { generate } from './bad-input-gen.js';

const TIME = '/usr/bin/time';
const MAX_DOC_BYTES = 64 * 1024;
/** Loose on purpose: memory and speed are the bench's business; this catches buffering a whole input. */
const MAX_RSS_KB = 300 * 1024;

/** How the CLI prints a path: control characters escaped, so each rejection stays one line. */
const printable = (s: string) =>
  s.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);

/** `rejected f:3-5,9 (4 more lines): why` as the lines it names (`rejected f:3: why` ...); others as they are. */
function namedLines(line: string): string[] {
  const m = /^rejected (.*):([\d,-]+) \(([\d,]+) more lines?\): (.*)$/.exec(line);
  if (!m) return [line];
  const [, path, ranges, more, reason] = m as unknown as [string, string, string, string, string];
  const lines = ranges.split(',').flatMap((r) => {
    const [a, b = a] = r.split('-').map(Number) as [number, number?];
    return Array.from({ length: b - a + 1 }, (_, i) => a + i);
  });
  expect(lines).toHaveLength(Number(more.replaceAll(',', '')));
  return lines.map((n) => `rejected ${path}:${n}: ${reason}`);
}

describe('generated bad input', () => {
  const seed = Number(process.env.LLMQ_TEST_SEED ?? Math.floor(Math.random() * 2 ** 31));

  it(`enqueues every good document and names every bad one, in bounded memory (seed ${seed}; rerun with LLMQ_TEST_SEED=${seed})`, {
    timeout: 15_000,
  }, async () => {
    process.stderr.write(`bad-input seed: ${seed} (rerun with LLMQ_TEST_SEED=${seed})\n`);
    const dir = tempDir();
    const input = generate(dir, seed, MAX_DOC_BYTES);
    const db = join(dir, 'q.db');
    const mem = join(dir, 'maxrss');
    const llmq = [BIN, 'enqueue', ...input.sources, '--db', db, '--max-doc-bytes', String(MAX_DOC_BYTES)];
    const measured = existsSync(TIME);
    const child = measured
      ? spawn(TIME, ['-f', '%M', '-o', mem, process.execPath, ...llmq], { cwd: dir, env: cliEnv() })
      : spawn(process.execPath, llmq, { cwd: dir, env: cliEnv() });
    child.stdin.end(input.stdin);
    const r = await collect(child, 14_000);
    const why = `seed ${seed}\n${r.stderr.slice(-3000)}`;

    expect(r.code, why).toBe(2);
    expect(r.stderr, why).not.toMatch(/unexpected error|RangeError|TypeError/);

    // Every bad document named once with its file (and line), nothing else rejected: one by one, or
    // (past the first ten lines of a file with one reason) in a line of ranges at the end.
    const rejected = r.stderr
      .split('\n')
      .filter((l) => l.startsWith('rejected '))
      .flatMap(namedLines);
    const unmatched = [...rejected];
    for (const where of input.bad) {
      const prefix = `rejected ${printable(where)}: `;
      const i = unmatched.findIndex((l) => l.startsWith(prefix));
      expect(i, `${why}\nnot reported: ${prefix}`).toBeGreaterThanOrEqual(0);
      unmatched.splice(i, 1);
    }
    expect(unmatched, why).toEqual([]);
    expect(r.stderr, why).toMatch(
      new RegExp(
        `read ${input.good.length + input.bad.length} documents .* ${input.bad.length} rejected\\n` +
          '(warning: \\d+ documents? (was|were) over --max-doc-bytes .*\\n)?(warning: \\d+ lines? had no "id" field .*\\n)?(next: llmq estimate .*\\n)?$',
      ),
    );

    // Every good document stored, under its id, and nothing else.
    const d = new Database(db, { readonly: true });
    try {
      const ids = d.prepare('SELECT id FROM items').pluck().all() as string[];
      expect(ids.sort(), why).toEqual([...input.good].sort());
    } finally {
      d.close();
    }

    if (measured) {
      const rssKb = Number(readFileSync(mem, 'utf8').trim().split('\n').at(-1));
      expect(rssKb, why).toBeGreaterThan(0);
      expect(rssKb, why).toBeLessThan(MAX_RSS_KB);
    } else {
      process.stderr.write(`bad-input: ${TIME} not found, peak memory not checked\n`);
    }
  });
});
