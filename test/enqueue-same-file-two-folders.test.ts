import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

/** docs/top.md and docs/2024/notes/n1..n3.md, in a fresh folder. */
function docsTree(): string {
  const dir = tempDir();
  mkdirSync(join(dir, 'docs/2024/notes'), { recursive: true });
  writeFileSync(join(dir, 'docs/top.md'), 'top');
  for (const n of [1, 2, 3]) writeFileSync(join(dir, `docs/2024/notes/n${n}.md`), `note ${n}`);
  return dir;
}

describe('enqueue: the same file from two folders', () => {
  it('a folder and one inside it named in one enqueue: its files read once, with their ids in the outer folder', async () => {
    for (const order of [
      ['docs', 'docs/2024'],
      ['docs/2024', 'docs'],
    ]) {
      const cwd = docsTree();
      const r = await runCli(['enqueue', ...order, '--json'], { cwd });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).not.toContain('warning');
      const summary = JSON.parse(r.stdout);
      expect([summary.newItems, summary.sameFilesOtherIds]).toEqual([4, []]);
      const ids = (await runCli(['export', '--format', 'jsonl'], { cwd })).stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).id)
        .sort();
      expect(ids, order.join(' ')).toEqual(['2024/notes/n1.md', '2024/notes/n2.md', '2024/notes/n3.md', 'top.md']);
    }
  });

  it('the folder inside is still read where the outer walk left its files out (a --glob of paths inside it); what it rejected before is cleared', async () => {
    const cwd = docsTree();
    const globbed = await runCli(['enqueue', 'docs', 'docs/2024', '--glob', 'notes/*.md', '--json'], { cwd });
    expect(globbed.code, globbed.stderr).toBe(0);
    expect(JSON.parse(globbed.stdout).newItems).toBe(3);
    // an empty file rejected by the inner folder's own enqueue, mended, then both named: the rejection goes
    const dir = docsTree();
    writeFileSync(join(dir, 'docs/2024/empty.md'), '');
    expect((await runCli(['enqueue', 'docs/2024'], { cwd: dir })).code).toBe(2);
    writeFileSync(join(dir, 'docs/2024/empty.md'), 'not empty now');
    expect((await runCli(['enqueue', 'docs', 'docs/2024'], { cwd: dir })).code).toBe(0);
    expect((await runCli(['status'], { cwd: dir })).stdout).not.toContain('rejected at enqueue');
  });

  it('a folder inside one enqueued before: warned, naming the folder the earlier items came from', async () => {
    const cwd = docsTree();
    expect((await runCli(['enqueue', 'docs'], { cwd })).code).toBe(0);
    writeFileSync(join(cwd, 'docs/2024/notes/n1.md'), 'note 1, changed');
    const sub = await runCli(['enqueue', 'docs/2024/notes'], { cwd });
    expect(sub.code).toBe(0);
    expect(sub.stderr).toContain(
      'warning: docs/2024/notes holds files this queue had already as items of docs: docs/2024/notes/n1.md was item "2024/notes/n1.md", and is now item "n1.md" too. ' +
        "An item's id is its path inside the folder enqueued, so each such file is now two items, exported twice (and sent again where it changed).",
    );
    expect(sub.stderr).toContain('To update the earlier items instead, enqueue docs (its unchanged files stay as they are)');
    const json = JSON.parse((await runCli(['enqueue', 'docs/2024/notes', '--json'], { cwd })).stdout);
    expect(json.sameFilesOtherIds).toEqual([
      { path: 'docs/2024/notes/n1.md', id: 'n1.md', root: 'docs/2024/notes', otherId: '2024/notes/n1.md', otherRoot: 'docs' },
    ]);
  });

  it('a folder around one enqueued before, the other way round, whichever of its files comes first', async () => {
    const cwd = docsTree();
    // walked first, before the folder enqueued earlier
    writeFileSync(join(cwd, 'docs/a.md'), 'a');
    expect((await runCli(['enqueue', 'docs/2024/notes'], { cwd })).code).toBe(0);
    const all = await runCli(['enqueue', 'docs'], { cwd });
    expect(all.stderr).toContain('docs/2024/notes/n1.md was item "n1.md", and is now item "2024/notes/n1.md" too.');
    expect(all.stderr).toContain('enqueue docs/2024/notes');
  });

  it('a file named alone that is an item of a folder enqueued before', async () => {
    const cwd = docsTree();
    expect((await runCli(['enqueue', 'docs'], { cwd })).code).toBe(0);
    const one = await runCli(['enqueue', 'docs/2024/notes/n2.md'], { cwd });
    expect(one.stderr).toContain(
      'warning: docs/2024/notes/n2.md was in this queue already, as item "2024/notes/n2.md" of docs, and is now item "n2.md" too.',
    );
  });

  it('says nothing for the same folder again, for folders side by side, or for a file that is only named alike', async () => {
    const cwd = docsTree();
    mkdirSync(join(cwd, 'other'));
    // an item "n1.md" from another folder: the same id, not the same file
    writeFileSync(join(cwd, 'other/n1.md'), 'another n1');
    for (const args of [['docs'], ['docs'], ['other']]) {
      const r = await runCli(['enqueue', ...args], { cwd });
      expect(r.stderr).not.toContain('holds files this queue had already');
    }
    const json = JSON.parse((await runCli(['enqueue', 'other', '--json'], { cwd })).stdout);
    expect(json.sameFilesOtherIds).toEqual([]);
  });
});
