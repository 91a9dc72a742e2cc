import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import { runCli } from './cli.js';

/**
 * A queue at `dir`/q.db with a model whose jobs were all dropped: `aCount` gpt-4o documents (a0...)
 * cut off at 3 tokens, not the JSON asked for (failed, their tries billed at --price 1,2), then
 * forgotten, beside `bCount` gpt-4o-mini ones answered (b0...). Made through the CLI, on the mock.
 */
export async function queueWithDroppedModel(dir: string, aCount: number, bCount: number): Promise<string> {
  const db = join(dir, 'q.db');
  const lines = (n: number, prefix: string) =>
    Array.from({ length: n }, (_, i) =>
      JSON.stringify({ id: `${prefix}${i}`, text: `${prefix} document ${i} with a few words in it` }),
    ).join('\n');
  writeFileSync(join(dir, 'a.jsonl'), lines(aCount, 'a'));
  writeFileSync(join(dir, 'b.jsonl'), lines(bCount, 'b'));
  const schema = { type: 'object', properties: { s: { type: 'string' } }, required: ['s'], additionalProperties: false };
  writeFileSync(join(dir, 's.json'), JSON.stringify(schema));
  const cutOff = ['enqueue', 'a.jsonl', '--model', 'gpt-4o', '--schema', 's.json', '--max-tokens', '3', '--db', db];
  expect((await runCli(cutOff, { cwd: dir })).code).toBe(0);
  expect((await runCli(['enqueue', 'b.jsonl', '--model', 'gpt-4o-mini', '--db', db], { cwd: dir })).code).toBe(0);
  const run = [
    'run',
    '--db',
    db,
    '--provider',
    'mock',
    '--mock-latency',
    '0',
    '--max-attempts',
    '1',
    '--price',
    '1,2',
    '--progress',
    'none',
  ];
  expect((await runCli(run)).code).toBe(2);
  const ids = Array.from({ length: aCount }, (_, i) => `a${i}`);
  expect((await runCli(['forget', '--db', db, ...ids])).code).toBe(0);
  return db;
}
