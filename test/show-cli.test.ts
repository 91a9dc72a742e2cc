import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { ANSWERS, populate, RUN } from './helpers/populate.js';
import { tempDir } from './helpers/tmp.js';

describe('llmq show', () => {
  it('prints the item, its job, the request, every attempt and the answer', async () => {
    const dir = tempDir();
    const { db, keys } = await populate(dir);
    const r = await runCli(['show', 'sub/b.txt', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(/\x1B/);
    expect(r.stdout).toMatch(/^item sub\/b\.txt$/m);
    expect(r.stdout).toMatch(/^ {2}source {4}docs\/sub\/b\.txt$/m);
    expect(r.stdout).toContain(`  key       ${keys['sub/b.txt']}`);
    expect(r.stdout).toMatch(/^ {2}state {5}done$/m);
    expect(r.stdout).toMatch(/^ {2}model {5}gpt-4o-mini$/m);
    expect(r.stdout).toMatch(/^ {2}tokens {4}100 in, 20 out$/m);
    expect(r.stdout).toMatch(/^ {2}max_tokens=200$/m);
    expect(r.stdout).toMatch(/^ {2}\[user\]\n {4}Summarize in one sentence:\n {4}\n {4}B doc$/m);
    expect(r.stdout).toMatch(/^attempts \(1\)\n {2}#1 {2}\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ {2}HTTP 200 {5}1,234ms {2}done {2}run run-0001$/m);
    expect(r.stdout).toContain('answer\n  B says "hello", then, a comma\n  and a second line.\n');
    expect(ANSWERS['sub/b.txt']).toBeDefined();
  });

  it('shows each failed try with its status and error', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const r = await runCli(['show', 'd.txt', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ {2}state {5}failed$/m);
    expect(r.stdout).toMatch(/^ {2}attempts {2}2$/m);
    expect(r.stdout).toMatch(/#1 .* HTTP 503 +30s {2}retry/);
    expect(r.stdout).toMatch(/^ {6}503 Service Unavailable$/m);
    expect(r.stdout).toMatch(/#2 .* HTTP 400 +210ms {2}failed/);
    expect(r.stdout).toMatch(/none: the job failed/);
  });

  it('--json prints the ItemDetail', async () => {
    const dir = tempDir();
    const { db, keys } = await populate(dir);
    const r = await runCli(['show', 'c.txt', '--json', '--db', db]);
    const d = JSON.parse(r.stdout);
    expect(d.id).toBe('c.txt');
    expect(d.job.key).toBe(keys['a.txt']);
    expect(d.job.output).toBe(ANSWERS['a.txt']);
    expect(d.attempts).toHaveLength(1);
    expect(d.attempts[0]).toMatchObject({ runId: RUN, attempt: 1, status: 200, outcome: 'done', latencyMs: 1234 });
    expect(JSON.parse(d.job.request).messages[0].role).toBe('user');
  });

  it('an unknown id is a clear error, exit 1', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const r = await runCli(['show', 'nope.txt', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^error: No item with id 'nope\.txt' in .*q\.db\./);
  });
});
