import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { enqueue } from '../src/ingest/enqueue.js';
import { sourcePath } from '../src/ingest/folder.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { runCli } from './helpers/cli.js';
import { answerOnly } from './helpers/stores.js';
import { goneFilesText } from '../src/cli/commands/enqueue.js';
import { tempDir } from './helpers/tmp.js';
import { request as withPrompt } from './ingest/helpers.js';

// Enqueue adds and changes items, never removes them: a file deleted from a folder keeps its item,
// so `llmq run` sends its document and export gives its answer. An enqueue of the folder says so.
describe('files gone from a folder enqueued before', () => {
  it("are counted by their jobs' states, in input order; a file still there but not read (hidden, --glob) is not gone", async () => {
    const dir = tempDir();
    const notes = join(dir, 'notes');
    mkdirSync(join(notes, 'sub'), { recursive: true });
    for (const name of ['a.txt', 'b.txt', 'c.txt', '.hidden.txt', 'sub/d.txt']) writeFileSync(join(notes, name), `text of ${name}`);
    const store = new SqliteStore(join(dir, 'q.db'));
    const request = withPrompt('{{text}}');
    try {
      await enqueue(store, { sources: [notes], request, hidden: true });
      await answerOnly(store, 'text of b.txt');

      rmSync(join(notes, 'b.txt'));
      rmSync(join(notes, 'sub'), { recursive: true });
      writeFileSync(join(notes, 'e.txt'), 'a new one');
      // .hidden.txt is not read without --hidden, c.txt not by this --glob: both still there
      const s = await enqueue(store, { sources: [notes], request, globs: ['a.txt', 'e.txt'] });
      expect(s.goneFiles).toEqual({
        count: 2,
        states: { done: 1, pending: 1 },
        first: { folder: sourcePath(notes), id: 'b.txt' },
        folders: 1,
        ids: ['b.txt', 'sub/d.txt'],
        partial: false,
      });
      // another folder's walk does not look at these
      const other = join(dir, 'other');
      mkdirSync(other);
      writeFileSync(join(other, 'x.txt'), 'x');
      expect((await enqueue(store, { sources: [other], request })).goneFiles).toBeNull();
    } finally {
      await store.close();
    }
  });

  it("are warned of by the CLI with the forget that takes them out; the current folder's JSONL lines are not files", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'x.txt'), 'x');
    writeFileSync(join(dir, 'y.txt'), 'y');
    // lines without ids: their id is their source, data.jsonl:1, which is no file
    writeFileSync(join(dir, 'data.jsonl'), '{"text":"one"}\n{"text":"two"}\n');
    const cli = (args: string[]) => runCli([...args, '--db', 'q.db'], { cwd: dir });
    expect((await cli(['enqueue', '.', 'data.jsonl'])).code).toBe(0);
    rmSync(join(dir, 'x.txt'));
    const r = await cli(['enqueue', '.']);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(
      'warning: a file enqueued before from the current folder is not there now (x.txt, id "x.txt"), and its item stays in the queue: ' +
        '1 not answered yet (llmq run still sends its document). If it was deleted or renamed, take the item out of the queue: llmq forget --db q.db x.txt. ' +
        '(If another machine or folder enqueued it into this queue under the same folder name, it is not gone: leave it.)',
    );
    const json = JSON.parse((await cli(['enqueue', '.', '--json'])).stdout);
    expect(json.goneFiles).toEqual({
      count: 1,
      states: { pending: 1 },
      first: { folder: '.', id: 'x.txt' },
      folders: 1,
      ids: ['x.txt'],
      partial: false,
    });
    expect((await cli(['forget', 'x.txt'])).code).toBe(0);
    const again = await cli(['enqueue', '.']);
    expect(again.stderr).not.toContain('not there now');
    expect(JSON.parse((await cli(['enqueue', '.', '--json'])).stdout).goneFiles).toBeNull();
  });
  it('past five, names the first five in the forget and says where the rest are listed; several folders are said', () => {
    const ids = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
    const text = goneFilesText(
      { count: 7, states: { done: 7 }, first: { folder: 'notes', id: 'a' }, folders: 2, ids, partial: false },
      ' --db q.db',
    );
    expect(text).toContain('7 files enqueued before from notes/ and 1 other folder are not there now (the first: notes/a, id "a")');
    expect(text).toContain('7 answered (export still gives their answers)');
    expect(text).toContain('llmq forget --db q.db a b c d e ... (the first 5 of 7; enqueue --json lists them all in goneFiles.ids)');
  });
  it('a look that fails leaves the warning out and the enqueue whole: what was read is stored', async () => {
    const dir = tempDir();
    const notes = join(dir, 'notes');
    mkdirSync(notes);
    writeFileSync(join(notes, 'a.txt'), 'a');
    const store = new SqliteStore(join(dir, 'q.db'));
    try {
      await enqueue(store, { sources: [notes], request: withPrompt('{{text}}') });
      writeFileSync(join(notes, 'b.txt'), 'b');
      store.folderItems = () => Promise.reject(new Error('the scan failed'));
      const s = await enqueue(store, { sources: [notes], request: withPrompt('{{text}}') });
      expect(s).toMatchObject({ newItems: 1, unchanged: 1, goneFiles: null });
      expect((await store.status()).items).toBe(2);
    } finally {
      await store.close();
    }
  });
});
