import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { enqueue } from '../src/ingest/enqueue.js';
import { parseJsonLine } from '../src/ingest/jsonl.js';
import { sourcePath } from '../src/ingest/folder.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { runCli } from './helpers/cli.js';
import { answerOnly } from './helpers/stores.js';
import { tempDir } from './helpers/tmp.js';
import { request as withPrompt } from './ingest/helpers.js';

// A document rejected on a second enqueue does not replace its item: the item keeps the document
// enqueued before, and `llmq run` sends that (or export gives its old answer). The rejection alone
// does not say so; the summary and a warning do.
describe('rejected documents whose items were enqueued before', () => {
  const lines = (...docs: object[]) => `${docs.map((d) => JSON.stringify(d)).join('\n')}\n`;

  it("are counted by their jobs' states, first in input order; a new id or one this input enqueued is not", async () => {
    const dir = tempDir();
    const file = join(dir, 'in.jsonl');
    const store = new SqliteStore(join(dir, 'q.db'));
    try {
      writeFileSync(file, lines({ id: 'a', text: 'A' }, { id: 'b', text: 'B' }, { id: 'c', text: 'C' }, { id: 'e', text: 'E' }));
      await enqueue(store, { sources: [file], request: withPrompt('{{text}}') });
      await answerOnly(store, 'E');

      writeFileSync(
        file,
        lines(
          { id: 'new', txt: 'no text field' }, // no item of this id: a plain rejection
          { id: 'b', txt: 'B2' }, // b keeps "B", pending
          { id: 'a', text: 'A2' }, // a is updated by this line...
          { id: 'a', text: '' }, // ...so its rejected duplicate below is this input's, not an earlier one
          { id: 'c', text: '' }, // c rejected here, enqueued by a later line: this input's
          { id: 'c', text: 'C2' },
          { id: 'e', text: 42 }, // e keeps its answer to "E"
        ),
      );
      const s = await enqueue(store, { sources: [file], request: withPrompt('{{text}}') });
      expect(s.rejected).toBe(5);
      expect(s.keptEarlier).toEqual({
        count: 2,
        states: { pending: 1, done: 1 },
        first: { path: file, line: 2, id: 'b' },
        ids: ['b', 'e'],
        partial: false,
      });
      expect(s.rejections.map((r) => r.id)).toEqual(['new', 'b', 'a', 'c', 'e']);

      // nothing rejected names an earlier item: null
      writeFileSync(file, lines({ id: 'zzz', text: '' }));
      expect((await enqueue(store, { sources: [file], request: withPrompt('{{text}}') })).keptEarlier).toBeNull();
    } finally {
      await store.close();
    }
  });

  it("include a folder's file that became unreadable as text, and a line whose template field went missing", async () => {
    const dir = tempDir();
    const docs = join(dir, 'docs');
    mkdirSync(docs);
    writeFileSync(join(docs, 'one.txt'), 'one');
    writeFileSync(join(docs, 'two.txt'), 'two');
    const file = join(dir, 'in.jsonl');
    writeFileSync(file, lines({ id: 'x', text: 'X', lang: 'en' }));
    const store = new SqliteStore(join(dir, 'q.db'));
    try {
      await enqueue(store, { sources: [docs], request: withPrompt('{{text}}') });
      await enqueue(store, { sources: [file], request: withPrompt('{{meta.lang}}: {{text}}') });
      writeFileSync(join(docs, 'two.txt'), Buffer.from([0x68, 0x00, 0x69])); // binary now
      writeFileSync(file, lines({ id: 'x', text: 'X' })); // no lang any more
      const folder = await enqueue(store, { sources: [docs], request: withPrompt('{{text}}') });
      expect(folder.keptEarlier).toMatchObject({ count: 1, first: { path: sourcePath(join(docs, 'two.txt')), id: 'two.txt' } });
      const jsonl = await enqueue(store, { sources: [file], request: withPrompt('{{meta.lang}}: {{text}}') });
      expect(jsonl.keptEarlier).toMatchObject({ count: 1, first: { path: file, line: 1, id: 'x' } });
    } finally {
      await store.close();
    }
  });

  it('are warned of by the CLI, with what each state means and the forget command that takes them out', async () => {
    const dir = tempDir();
    const file = join(dir, 'in.jsonl');
    const db = join(dir, 'q.db');
    writeFileSync(file, lines({ id: 'a', text: 'A' }, { id: 'b', text: 'B' }));
    expect((await runCli(['enqueue', file, '--db', db])).code).toBe(0);
    writeFileSync(file, lines({ id: 'a', body: 'A2' }, { id: 'b', text: 'B' }));
    const r = await runCli(['enqueue', file, '--db', db]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      `warning: the document of an item enqueued before was rejected this time (${file}:1, id "a"), so it keeps its earlier document: ` +
        `1 not answered yet (llmq run sends the earlier document). Mend it and enqueue again, or take the item out of the queue: llmq forget --db ${db} a.`,
    );
    const json = JSON.parse((await runCli(['enqueue', file, '--db', db, '--json'])).stdout);
    expect(json.keptEarlier).toEqual({
      count: 1,
      states: { pending: 1 },
      first: { path: file, line: 1, id: 'a' },
      ids: ['a'],
      partial: false,
    });
  });

  it('include the item a line was before it broke as JSON: its id read up to the break, else its file:line', async () => {
    const dir = tempDir();
    const withIds = join(dir, 'ids.jsonl');
    const byLine = join(dir, 'lines.jsonl');
    const store = new SqliteStore(join(dir, 'q.db'));
    try {
      writeFileSync(withIds, lines({ id: 'a', text: 'A' }, { id: 7, text: 'B' }, { id: 'c', text: 'C' }, { id: 'd', text: 'D' }));
      writeFileSync(byLine, lines({ text: 'one' }, { text: 'two' }, { text: 'three' }));
      await enqueue(store, { sources: [withIds, byLine], request: withPrompt('{{text}}') });
      await answerOnly(store, 'B');
      await answerOnly(store, 'two');

      writeFileSync(
        withIds,
        [
          '{"id":"a","text":"A"}',
          '{"meta":{"x":[1,"}"]}, "id":7,"text":"B2"', // no closing brace: 7 keeps its answer to "B"
          '{"text":"C2" "id":"c"}', // broken before its id: not known, as before (no item of ids.jsonl:3)
          '["d"]', // not an object: no item of ids.jsonl:4 either
        ].join('\n'),
      );
      writeFileSync(byLine, '{"text":"one"}\n{"text":"two\n{"text":"three"}\n');
      const s = await enqueue(store, { sources: [withIds, byLine], request: withPrompt('{{text}}') });
      expect(s.rejected).toBe(4);
      expect(s.rejections.map((r) => r.id)).toEqual(['7', `${withIds}:3`, `${withIds}:4`, `${byLine}:2`]);
      expect(s.keptEarlier).toEqual({
        count: 2,
        states: { done: 2 },
        first: { path: withIds, line: 2, id: '7' },
        ids: ['7', `${byLine}:2`],
        partial: false,
      });
      // the broken line's item is said as kept, not as a line that moved
      expect(s.movedLines).toBeNull();
    } finally {
      await store.close();
    }
  });

  it('include the item a line too long to read was, when its id comes before the long part', async () => {
    const dir = tempDir();
    const file = join(dir, 'in.jsonl');
    const store = new SqliteStore(join(dir, 'q.db'));
    const limits = { request: withPrompt('{{text}}'), maxDocBytes: 1000 };
    try {
      writeFileSync(file, lines({ id: 'a', text: 'A' }, { id: 'b', text: 'B' }, { id: 'c', text: 'C' }, { id: 'd', text: 'D' }));
      await enqueue(store, { sources: [file], ...limits });
      await answerOnly(store, 'B');
      await answerOnly(store, 'C');
      // b's line read whole and refused (2 KB); c's streams past in pieces (300 KB: several reads of the file)
      writeFileSync(
        file,
        lines(
          { id: 'a', text: 'A' },
          { id: 'b', text: 'B'.repeat(2000) },
          { id: 'c', text: 'C'.repeat(300_000) },
          { text: 'D'.repeat(100_000), id: 'd' },
        ),
      );
      const s = await enqueue(store, { sources: [file], ...limits });
      expect(s.rejections.map((r) => [r.line, r.id])).toEqual([
        [2, 'b'],
        [3, 'c'],
        [4, `${file}:4`], // its id after 64 KiB of text: not read
      ]);
      expect(s.keptEarlier).toMatchObject({ count: 2, states: { done: 2 }, ids: ['b', 'c'] });
    } finally {
      await store.close();
    }
  });

  it('are warned of when their line is no JSON now, with the answer export keeps giving', async () => {
    const dir = tempDir();
    const file = join(dir, 'in.jsonl');
    const db = join(dir, 'q.db');
    writeFileSync(file, lines({ id: 'a', text: 'A' }, { id: 'b', text: 'B' }));
    expect((await runCli(['enqueue', file, '--db', db])).code).toBe(0);
    expect((await runCli(['run', '--provider', 'mock', '--mock-latency', '0', '--db', db])).code).toBe(0);
    writeFileSync(file, '{"id":"a","text":"A"}\n{"id":"b","text":"B2"\n');
    const r = await runCli(['enqueue', file, '--db', db]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`rejected ${file}:2: malformed JSON`);
    expect(r.stderr).toContain(
      `warning: the document of an item enqueued before was rejected this time (${file}:2, id "b"), so it keeps its earlier document: ` +
        `1 answered (export gives the answer to the earlier document). Mend it and enqueue again, or take the item out of the queue: llmq forget --db ${db} b.`,
    );
    // status names it again beside the rejection, until the input is enqueued again
    const status = await runCli(['status', '--db', db]);
    expect(status.stdout.replace(/\s+/g, ' ')).toMatch(
      /in\.jsonl:2 malformed JSON \(.*\); the item "b" keeps its earlier document \(and answer, if any\)/,
    );
    const json = JSON.parse((await runCli(['status', '--json', '--db', db])).stdout);
    expect(json.rejected[0].first).toEqual([{ path: file, line: 2, reason: expect.stringMatching(/^malformed JSON/), keptItem: 'b' }]);
  });

  it('count an item rejected on two lines once, and never fail on an id the store gives back otherwise (a lone surrogate)', async () => {
    const dir = tempDir();
    const file = join(dir, 'in.jsonl');
    const store = new SqliteStore(join(dir, 'q.db'));
    try {
      writeFileSync(file, `${lines({ id: 'a', text: 'A' })}{"id":"b\\ud800","text":"B"}\n`);
      await enqueue(store, { sources: [file], request: withPrompt('{{text}}') });
      writeFileSync(file, `${lines({ id: 'a', txt: 'A2' }, { id: 'a', txt: 'A3' })}{"id":"b\\ud800","txt":"B2"}\n`);
      const s = await enqueue(store, { sources: [file], request: withPrompt('{{text}}') });
      expect(s.rejected).toBe(3);
      expect(s.keptEarlier).toEqual({
        count: 2,
        states: { pending: 2 },
        first: { path: file, line: 1, id: 'a' },
        ids: ['a', 'b\ud800'],
        partial: false,
      });
    } finally {
      await store.close();
    }
  });

  it('name ids that read as options after "--" in the forget command (stdin\'s line ids, -:N)', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    expect((await runCli(['enqueue', '-', '--db', db], { input: lines({ text: 'one' }, { text: 'two' }) })).code).toBe(0);
    const r = await runCli(['enqueue', '-', '--db', db], { input: lines({ text: 'one' }, { txt: 'two' }) });
    expect(r.stderr).toContain(`llmq forget --db ${db} -- -:2.`);
    const forget = await runCli(['forget', '--db', db, '--', '-:2']);
    expect(forget.code).toBe(0);
  });
});

describe('a JSONL line with a bad id and a bad text', () => {
  it('is rejected for its text first, as before ids were read ahead of it; a good id rides on a text rejection', () => {
    const o = { maxDocBytes: 1_000_000, idField: 'id', textField: 'text' };
    expect(parseJsonLine('{"id":{"x":1},"body":"t"}', 3, 'in.jsonl', o)).toEqual({
      path: 'in.jsonl',
      line: 3,
      reason: 'no "text" field (it has "id", "body": name the text field with --text-field)',
    });
    expect(parseJsonLine('{"id":{"x":1},"text":"t"}', 3, 'in.jsonl', o)).toMatchObject({
      reason: expect.stringMatching(/^"id" is an object/),
    });
    expect(parseJsonLine('{"id":"a","text":""}', 3, 'in.jsonl', o)).toMatchObject({ id: 'a', reason: 'empty document' });
  });
});
