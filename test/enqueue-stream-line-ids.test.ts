import { execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { describe, expect, it, onTestFinished } from 'vitest';
import { enqueue } from '../src/ingest/enqueue.js';
import type { Store } from '../src/store/types.js';
import { docRow } from './helpers/populate.js';
import { STORE_KINDS, skipUnavailable } from './helpers/stores.js';
import { tempDir } from './helpers/tmp.js';
import { items, request, tempStore } from './ingest/helpers.js';

// A line of stdin or of a pipe without an id gets `-:N` (`/dev/fd/63:N`): its number in a stream with
// no name. The same id from an earlier enqueue says nothing about which document it was, so another
// stream piped in later must not take the earlier documents' items (their unsent jobs were dropped).

const lines = (...texts: string[]) => Readable.from([texts.map((text) => JSON.stringify({ text })).join('\n')]);

describe('ids of stream lines are positions, not names', () => {
  it('keeps the documents of an earlier stdin enqueue and rejects the lines that would take their ids', async () => {
    const store = tempStore();
    const first = await enqueue(store, { sources: ['-'], stdin: lines('alpha', 'beta', 'gamma'), request: request() });
    expect(first).toMatchObject({ newItems: 3, rejected: 0 });
    const before = items(store);

    const second = await enqueue(store, { sources: ['-'], stdin: lines('delta', 'beta', 'epsilon', 'zeta'), request: request() });
    expect(second).toMatchObject({ newItems: 1, unchanged: 1, updated: 0, dropped: 0, rejected: 2 });
    expect(second.rejections.map((r) => [r.path, r.line])).toEqual([
      ['-', 1],
      ['-', 3],
    ]);
    expect(second.rejections[0]!.reason).toMatch(
      /^id "-:1" \(its line number in stdin\) already names an item with another request, .*"id" field/,
    );
    expect(items(store).slice(0, 3)).toEqual(before); // alpha, beta and gamma as they were
    expect(items(store).map((i) => i.id)).toEqual(['-:1', '-:2', '-:3', '-:4']);

    // the same stream again changes nothing; lines with ids are names and move their items as from any file
    expect(await enqueue(store, { sources: ['-'], stdin: lines('alpha', 'beta', 'gamma'), request: request() })).toMatchObject({
      unchanged: 3,
      rejected: 0,
    });
    const named = Readable.from([JSON.stringify({ id: '-:1', text: 'alpha, edited' })]);
    expect(await enqueue(store, { sources: ['-'], stdin: named, request: request() })).toMatchObject({ updated: 1, rejected: 0 });
  });

  it('keeps the earlier request when the same stream comes with another prompt: a line number cannot tell', async () => {
    const store = tempStore();
    await enqueue(store, { sources: ['-'], stdin: lines('alpha'), request: request() });
    const before = items(store);
    const s = await enqueue(store, { sources: ['-'], stdin: lines('alpha'), request: request('Translate: {{text}}'), idField: 'uid' });
    expect(s).toMatchObject({ updated: 0, rejected: 1 });
    expect(s.rejections[0]!.reason).toMatch(/or this one with another prompt, model or option\. Give each line an "uid" field/);
    expect(items(store)).toEqual(before);
  });

  it('does the same for a pipe named as a source (<(zcat docs.jsonl.gz) is /dev/fd/63)', { timeout: 10_000 }, async () => {
    const dir = tempDir();
    const store = tempStore(dir);
    const fifo = join(dir, 'pipe');
    const feed = (text: string) => {
      execFileSync('mkfifo', [fifo]);
      const writer = spawn('sh', ['-c', `printf '%s\\n' "$1" > "$0"`, fifo, JSON.stringify({ text })], { stdio: 'ignore' });
      onTestFinished(() => void writer.kill('SIGKILL'));
      return writer;
    };
    feed('from the first pipe');
    expect(await enqueue(store, { sources: [fifo], request: request() })).toMatchObject({ newItems: 1 });
    execFileSync('rm', [fifo]);
    feed('from the second pipe');
    const second = await enqueue(store, { sources: [fifo], request: request() });
    expect(second).toMatchObject({ newItems: 0, updated: 0, rejected: 1 });
    expect(second.rejections[0]!.reason).toContain('(its line number in this pipe)');
  });
});

describe.each(STORE_KINDS)('store: a positional row never takes an item holding another document [$name]', (kind) => {
  it('keeps the item and reports the row, while a named row with that id moves it', async (ctx) => {
    skipUnavailable(kind, ctx);
    const { store } = await kind.fresh();
    const itemJob = async (s: Store, id: string) => (await s.item(id))?.job.key;
    const earlier = { ...docRow('-:1', 'earlier stream'), source: '-:1', positional: true };
    await store.enqueue([earlier], 1);
    const later = { ...docRow('-:1', 'later stream'), source: '-:1', positional: true };
    const same = { ...docRow('-:2', 'new line'), source: '-:2', positional: true };
    const r = await store.enqueue([later, same], 2);
    expect(r).toMatchObject({ newItems: 1, movedItems: 0, droppedJobs: 0, keptItems: ['-:1'] });
    expect(await itemJob(store, '-:1')).toBe(earlier.key);
    expect((await store.status()).counts.pending).toBe(2); // the earlier job was not dropped; the later one never went in

    const named = { ...docRow('-:1', 'named'), source: 'named.jsonl:1' };
    expect(await store.enqueue([named], 3)).toMatchObject({ movedItems: 1 });
    expect(await itemJob(store, '-:1')).toBe(named.key);
  });
});

describe('plain text piped to enqueue -', () => {
  it('is rejected line by line, the first time saying what a stream is read as and how to enqueue a text file', async () => {
    const store = tempStore();
    const text = Readable.from(['Meeting notes\n{"text": "a real line"}\n{broken\nmore notes\n']);
    const s = await enqueue(store, { sources: ['-'], stdin: text, request: request() });
    expect(s).toMatchObject({ newItems: 1, rejected: 3 });
    const [first, broken, more] = s.rejections.map((r) => r.reason);
    expect(first).toMatch(/^malformed JSON \(.*\); a stream is read as JSON Lines, .*name it \(llmq enqueue notes\.txt\)$/);
    expect(broken).not.toContain('read as'); // a broken object is a broken line, not text
    expect(more).not.toContain('read as'); // said once
  });

  it('a JSON Lines stream with one broken line later: the line is named, without the hint about text', async () => {
    const store = tempStore();
    const lines = Readable.from(['{"text": "one"}\n{"text": "two"}\nnot a record\n{"text": "three"}\n']);
    const s = await enqueue(store, { sources: ['-'], stdin: lines, request: request() });
    expect(s).toMatchObject({ newItems: 3, rejected: 1 });
    expect(s.rejections).toEqual([{ path: '-', line: 3, id: '-:3', reason: expect.stringMatching(/^malformed JSON \([^;]*\)$/) }]);
  });

  it('a line without the text field says which fields it has, so the --text-field to give is in the message', async () => {
    const store = tempStore();
    const lines = Readable.from(['{"content": "a review", "id": "r1"}\n{}\n{"a":1,"b":2,"c":3,"d":4,"e":5,"f":6}\n']);
    const s = await enqueue(store, { sources: ['-'], stdin: lines, request: request() });
    expect(s.rejections.map((r) => r.reason)).toEqual([
      'no "text" field (it has "content", "id": name the text field with --text-field)',
      'no "text" field (it has no fields: name the text field with --text-field)',
      'no "text" field (it has "a", "b", "c", "d", "e", ...: name the text field with --text-field)',
    ]);
  });
});
