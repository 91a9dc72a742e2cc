import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { gonePid } from './helpers/pids.js';
import { hostname } from 'node:os';

describe('llmq forget', () => {
  it('a source of many items: the first 20 ids named, then how many more', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'notes'), { recursive: true });
    const names = Array.from({ length: 23 }, (_, i) => `n${String(i).padStart(2, '0')}.txt`);
    for (const name of names) writeFileSync(join(dir, 'notes', name), `note ${name}`);
    const cli = (args: string[]) => runCli(args, { cwd: dir });
    expect((await cli(['enqueue', 'notes'])).code).toBe(0);
    const listed = (n: number) =>
      names
        .slice(0, n)
        .map((id) => `  ${id}\n`)
        .join('');
    expect((await cli(['forget', '--source', 'notes', '--dry-run'])).stderr).toBe(
      `would forget 23 items of ./llmq.db: 23 unanswered jobs dropped. Nothing was changed.\n${listed(20)}  ... and 3 more (--json lists them all)\n`,
    );
    expect((await cli(['forget', '--source', 'notes'])).stderr).toBe(
      `forgot 23 items of ./llmq.db: 23 unanswered jobs dropped.\n${listed(20)}  ... and 3 more\n`,
    );
  });

  it("a file's name in several subfolders: forget names one of them and gives no command (it would forget whichever came first)", async () => {
    const dir = tempDir();
    for (const sub of ['x', 'y']) {
      mkdirSync(join(dir, 'notes', sub), { recursive: true });
      writeFileSync(join(dir, 'notes', sub, 'n.txt'), `note ${sub}`);
    }
    const cli = (args: string[]) => runCli(args, { cwd: dir });
    expect((await cli(['enqueue', 'notes'])).code).toBe(0);
    const several = await cli(['forget', 'n.txt']);
    expect(several.code).toBe(1);
    expect(several.stderr).toBe(
      'error: Nothing to forget in ./llmq.db: no item has the id "n.txt". Ids of files in subfolders name them: ' +
        'several end so, "x/n.txt" among them (from notes/x/n.txt); llmq export lists them all: name the one to forget.\n',
    );
    // show names the first, with the command (reading one is harmless)
    expect((await cli(['show', 'n.txt'])).stderr).toContain(
      "Ids of files in subfolders name them (several items end so; the first): did you mean 'x/n.txt' (from notes/x/n.txt)? llmq show x/n.txt",
    );
  });

  it('removes items deleted from the input, so a run never sends them; says what it did, or would, and what it could not find', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'notes', 'old'), { recursive: true });
    for (const name of ['a.txt', 'b.txt', 'old/c.txt', 'old/d.txt']) writeFileSync(join(dir, 'notes', name), `note ${name}`);
    writeFileSync(join(dir, 'data.jsonl'), '{"id":"r1","text":"one"}\n{"id":"r2","text":"two"}\n');
    const cli = (args: string[]) => runCli(args, { cwd: dir });
    expect((await cli(['enqueue', 'notes', 'data.jsonl'])).code).toBe(0);

    const usage = await cli(['forget']);
    expect(usage.code).toBe(1);
    expect(usage.stderr).toContain('Name the items to forget: their ids');
    expect((await cli(['forget', 'a.txt', '--source', 'notes'])).stderr).toContain('Name item ids or --source, not both.');
    expect((await cli(['forget', '--source', '.'])).stderr).toContain('--source . would be every item enqueued from it');

    const dry = await cli(['forget', '--source', `${dir}/notes/old/`, '--dry-run']);
    expect(dry.code, dry.stderr).toBe(0);
    // a source names items nobody typed: which ones
    expect(dry.stderr).toBe(
      'would forget 2 items of ./llmq.db: 2 unanswered jobs dropped. Nothing was changed.\n  old/c.txt\n  old/d.txt\n',
    );
    const gone = await cli(['forget', '--source', 'notes/old', '--json']);
    expect(JSON.parse(gone.stdout)).toEqual({
      items: 2,
      ids: ['old/c.txt', 'old/d.txt'],
      droppedJobs: 2,
      orphanedAnswers: 0,
      unknownIds: [],
    });
    expect(gone.stderr).toBe('forgot 2 items of ./llmq.db: 2 unanswered jobs dropped.\n');

    const some = await cli(['forget', 'r2', 'r9']);
    expect(some.code).toBe(2);
    expect(some.stderr).toBe('warning: no item with id "r9"\nforgot 1 item of ./llmq.db: 1 unanswered job dropped.\n');
    // one id naming nothing: said once, by the error
    const none = await cli(['forget', 'r9']);
    expect(none.code).toBe(1);
    expect(none.stderr).toBe(
      'error: Nothing to forget in ./llmq.db: no item has the id "r9". llmq export lists the items, with their ids and sources.\n',
    );
    // a file's id given as the path to it, or without its extension: the item it is a slip for
    const slip = await cli(['forget', 'notes/a.txt', '--dry-run']);
    expect(slip.code).toBe(1);
    expect(slip.stderr).toBe(
      'error: Nothing to forget in ./llmq.db: no item has the id "notes/a.txt". Ids of files are relative to the folder enqueued: ' +
        'did you mean "a.txt" (from notes/a.txt)? llmq forget a.txt --dry-run\n',
    );
    expect((await cli(['forget', 'b'])).stderr).toContain(
      'Ids of files keep their extension: did you mean "b.txt" (from notes/b.txt)? llmq forget b.txt\n',
    );
    // a source naming nothing: how sources are spelled, as a path from another folder would not match
    expect((await cli(['forget', '--source', 'elsewhere/notes'])).stderr).toBe(
      'error: Nothing to forget in ./llmq.db: no item comes from elsewhere/notes. A source is the folder or file as llmq enqueue ' +
        'was given it, relative to the folder it ran in (reviews/, data/in.jsonl); llmq export lists each item with its source.\n',
    );
    const neither = await cli(['forget', 'r8', 'r9']);
    expect(neither.code).toBe(1);
    expect(neither.stderr).toMatch(
      /^warning: no item with id "r8"\nwarning: no item with id "r9"\nerror: Nothing to forget in \.\/llmq\.db: none of these ids names an item\./,
    );

    const run = await cli(['run', '--provider', 'mock', '--json']);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout.trim().split('\n').at(-1)!)).toMatchObject({ event: 'run:end', done: 3, remaining: 0 });
    const ids = (await cli(['export'])).stdout
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { id: string }).id);
    expect(ids).toEqual(['a.txt', 'b.txt', 'r1']);
    // an answered item forgotten: its answer is kept, and said so
    const answered = await cli(['forget', 'a.txt']);
    expect(answered.stderr).toBe(
      'forgot 1 item of ./llmq.db: 0 unanswered jobs dropped, 1 answer kept that no item needs now (paid for, or being answered: ' +
        'enqueue the same document again and it is found, not sent; status counts it as kept, not done).\n',
    );
    // a run at work holds jobs it will send whatever is forgotten: said
    const store = new SqliteStore(join(dir, 'llmq.db'));
    await store.startRun({ id: 'working', host: 'h', pid: 1, startedAt: Date.now(), options: {} });
    await store.close();
    const during = await cli(['forget', 'b.txt']);
    expect(during.stderr).toContain(
      'warning: 1 run is working this queue: a job one holds sends no more once its next heartbeat (within 2 s) finds it forgotten',
    );
    // a run of this machine whose process is gone and quiet is not working it: not counted
    const runs = new SqliteStore(join(dir, 'llmq.db'));
    const quiet = Date.now() - 10_000;
    await runs.finishRun('working', Date.now(), 'drained', null as never);
    await runs.startRun({ id: 'killed', host: hostname(), pid: gonePid(), startedAt: quiet, options: {} });
    await runs.close();
    const after = await cli(['forget', 'r1']);
    expect(after.stderr).not.toContain('is working this queue');
  });
});
