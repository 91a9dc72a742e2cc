import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

// A JSONL line without an id is named by its line number (file:N). A line added above moves the
// lines after it: each document is read again under its new number, and the old item keeps it too
// (export gave it twice) without a word. Enqueue adds and changes items, never removes them: it says so.
describe('items named by their line in a JSONL file whose lines moved', () => {
  const lines = (...texts: Array<string | { id: string; text: string }>) =>
    texts.map((t) => JSON.stringify(typeof t === 'string' ? { text: t } : t)).join('\n') + '\n';

  it('are named when the file is enqueued again, with the forget that takes them out; not again once taken out', async () => {
    const dir = tempDir();
    const file = join(dir, 'm.jsonl');
    const db = join(dir, 'q.db');
    writeFileSync(file, lines('alpha', { id: 'b', text: 'beta' }, 'gamma', { id: 'd', text: 'delta' }));
    expect((await runCli(['enqueue', file, '--db', db])).code).toBe(0);
    expect((await runCli(['run', '--db', db, '--provider', 'mock', '--mock-latency', '0'])).code).toBe(0);
    // the same file again: nothing moved, nothing said
    const same = await runCli(['enqueue', file, '--db', db]);
    expect(same.stderr).not.toContain('not read again');

    // a line added on top: alpha is line 2 now, gamma line 4 (lines 1 and 3 hold lines with ids)
    writeFileSync(file, lines({ id: 'z', text: 'zeta' }, 'alpha', { id: 'b', text: 'beta' }, 'gamma', { id: 'd', text: 'delta' }));
    const moved = await runCli(['enqueue', file, '--db', db, '--json']);
    const shown = `${file}:1`;
    expect(JSON.parse(moved.stdout).movedLines).toEqual({
      count: 2,
      states: { done: 2 },
      files: 1,
      ids: [shown, `${file}:3`],
      partial: false,
    });
    expect(moved.stderr).toContain(
      `warning: 2 items of ${file} named by their line number (lines without an "id": ${shown}, ${file}:3) were not read again: ` +
        'lines were added or taken out above, or given an "id". Each keeps its earlier document,',
    );
    expect(moved.stderr).toContain(`Take them out: llmq forget --db ${db} ${shown} ${file}:3.`);
    // the documents under their new numbers share the old items' jobs: only zeta waits to be sent
    const exported = (await runCli(['export', '--db', db])).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(exported.filter((r) => r.state !== 'done').map((r) => r.id)).toEqual(['z']);
    expect(exported.map((r) => r.id).sort()).toEqual([`${file}:1`, `${file}:2`, `${file}:3`, `${file}:4`, 'b', 'd', 'z'].sort());

    // the file refused whole (gzip now): none of its lines was read, none moved
    const gz = join(dir, 'g.jsonl');
    writeFileSync(gz, lines('one', 'two'));
    expect((await runCli(['enqueue', gz, '--db', db])).code).toBe(0);
    writeFileSync(gz, gzipSync(lines('one', 'two')));
    const refused = await runCli(['enqueue', gz, '--db', db, '--json']);
    expect(JSON.parse(refused.stdout).movedLines).toBeNull();
    // a line rejected now (its text emptied) keeps its item, as the kept-earlier warning says: not a line moved
    writeFileSync(gz, lines('one', ''));
    const emptied = await runCli(['enqueue', gz, '--db', db, '--json']);
    expect(JSON.parse(emptied.stdout).keptEarlier).toMatchObject({ count: 1 });
    expect(JSON.parse(emptied.stdout).movedLines).toBeNull();

    expect((await runCli(['forget', shown, `${file}:3`, '--db', db])).code).toBe(0);
    const after = await runCli(['enqueue', file, '--db', db, '--json']);
    expect(JSON.parse(after.stdout).movedLines).toBeNull();
    expect(after.stderr).not.toContain('not read again');
  });
});
