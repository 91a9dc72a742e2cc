import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

// What an enqueue rejected is printed among its lines once; status names it later, by file and line,
// until an enqueue reads that input again.

describe('rejected documents kept for status', () => {
  it('status names what the last enqueue of each input rejected; enqueueing the input fixed clears it', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'notes'));
    writeFileSync(join(dir, 'notes', 'a.txt'), 'hello');
    writeFileSync(join(dir, 'notes', 'x.bin'), Buffer.from([0, 1, 2, 3]));
    writeFileSync(join(dir, 'in.jsonl'), '{"id":"r1","text":"one"}\n{"id":"r2","text":"tw\n{"id":"r3"}\n');
    const cli = (args: string[], input?: string) => runCli(args, { cwd: dir, input });
    expect((await cli(['enqueue', 'notes', 'in.jsonl'])).code).toBe(2);

    const status = await cli(['status']);
    expect(status.stdout).toContain(
      [
        '',
        'rejected at enqueue (3 documents of 2 inputs, the input enqueued last first)',
        '  in.jsonl:2   malformed JSON (Unterminated string in JSON at position 21)',
        '  in.jsonl:3   no "text" field (it has "id"), where most lines before it have',
        '               one: mend this line',
        '  notes/x.bin  binary file (contains NUL bytes)',
        '  fix them, then enqueue the same input again: what is fixed goes in',
        '',
      ].join('\n'),
    );
    const json = JSON.parse((await cli(['status', '--json'])).stdout);
    expect(json.rejected.map((r: { source: string; rejected: number }) => [r.source, r.rejected])).toEqual([
      ['in.jsonl', 2],
      ['notes', 1],
    ]);
    expect(json.rejected[0].first[1]).toEqual({
      path: 'in.jsonl',
      line: 3,
      reason: 'no "text" field (it has "id"), where most lines before it have one: mend this line',
    });

    // in.jsonl fixed and enqueued again: its entry goes; notes' stays (not read again)
    writeFileSync(join(dir, 'in.jsonl'), '{"id":"r1","text":"one"}\n{"id":"r2","text":"two"}\n{"id":"r3","text":"three"}\n');
    expect((await cli(['enqueue', 'in.jsonl'])).code).toBe(0);
    expect((await cli(['status'])).stdout).toContain(
      'rejected at enqueue (1 document of notes)\n  notes/x.bin  binary file (contains NUL bytes)\n  fix it, then',
    );
    // the folder read again (spelled otherwise) without the file: nothing rejected is left
    rmSync(join(dir, 'notes', 'x.bin'));
    expect((await cli(['enqueue', './notes/'])).code).toBe(0);
    expect((await cli(['status'])).stdout).not.toContain('rejected');
    expect(JSON.parse((await cli(['status', '--json'])).stdout).rejected).toEqual([]);
  });

  it('a folder or file named twice in one enqueue is read once: no document rejected as a duplicate of itself', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'notes'));
    writeFileSync(join(dir, 'notes', 'a.txt'), 'hello');
    writeFileSync(join(dir, 'in.jsonl'), '{"id":"r1","text":"one"}\n');
    const r = await runCli(['enqueue', 'notes', './notes/', 'in.jsonl', `${dir}/in.jsonl`], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('read 2 documents');
    expect((await runCli(['status'], { cwd: dir })).stdout).not.toContain('rejected');
  });

  it('a queue where every document was rejected: status says so under "the queue is empty"', async () => {
    const dir = tempDir();
    const cli = (args: string[], input?: string) => runCli(args, { cwd: dir, input });
    const lines = Array.from({ length: 8 }, (_, i) => `{"id":"s${i}","body":"x"}`).join('\n');
    expect((await cli(['enqueue', '-'], lines)).code).toBe(2);
    const out = (await cli(['status'])).stdout;
    expect(out).toMatch(
      /The queue is empty\. Add documents with: llmq enqueue <folder\|file\.jsonl>\n\nrejected at enqueue \(8 documents of stdin\)\n {2}-:1 {2}no "text" field/,
    );
    expect(out).toContain('  and 3 more (llmq status --json lists the first 20 of each input)\n');
  });
});
