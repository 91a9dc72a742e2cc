import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

describe('llmq show of an item whose id holds control characters', () => {
  it('shows them as escapes: one line, nothing sent to the terminal', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const id = 'new\nline \u001b[31mred';
    writeFileSync(join(dir, 'in.jsonl'), `${JSON.stringify({ id, text: 'hello' })}\n`);
    expect((await runCli(['enqueue', join(dir, 'in.jsonl'), '--db', db])).code).toBe(0);
    const r = await runCli(['show', id, '--db', db]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe('item new\\u000aline \\u001b[31mred');
    expect(r.stdout).not.toContain('\u001b');
  });
});
