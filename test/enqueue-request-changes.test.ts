import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_PROMPT,
  lostToDefaults,
  movedByDefaultsText,
  reasoningRoomWarning,
  requestChanges,
} from '../src/cli/commands/enqueue-requests.js';
import { parseTemplate } from '../src/ingest/template.js';
import { MOCK_NOW, runCli } from './helpers/cli.js';
import { readDb } from './helpers/e2e.js';
import { tempDir } from './helpers/tmp.js';

/** A folder of three notes and a queue beside it. */
function notes(): { dir: string; docs: string; db: string } {
  const dir = tempDir();
  const docs = join(dir, 'notes');
  mkdirSync(docs);
  for (const n of [1, 2, 3]) writeFileSync(join(docs, `n${n}.txt`), `note ${n}`);
  return { dir, docs, db: join(dir, 'q.db') };
}

/** stderr with each warning on one line, as wrapped text is read. */
const oneLine = (stderr: string) => stderr.replace(/\n(?!warning|next|read)/g, ' ');

describe('enqueue again without the flags of the first', () => {
  it('says what the defaults took from items not sent yet, and how to give it back', async () => {
    const { docs, db } = notes();
    const own = ['--prompt', 'Classify: {{text}}', '--system', 'Be brief.', '--max-tokens', '100'];
    expect((await runCli(['enqueue', docs, '--db', db, ...own])).code).toBe(0);
    // later, the same folder and no flags: every item now asks the default prompt, no system message, 512 tokens
    const again = await runCli(['enqueue', docs, '--db', db]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain('3 updated (3 unanswered old jobs dropped)');
    expect(oneLine(again.stderr)).toContain(
      "warning: 3 items moved to new jobs, and this enqueue's defaults made the change: it gave no --prompt, --system or --max-tokens, " +
        'and the first, "n1.txt", had a prompt of its own (its message began "Classify: note 1"), a system message (it began "Be brief.") ' +
        'and max_tokens 100. llmq run sends the new requests unless they are answered already. ' +
        `If that was not meant, enqueue again with what they had: llmq enqueue ${docs} --db ${db} --prompt '...' --system '...' --max-tokens 100 ` +
        '(the items then go back to their earlier jobs, and the new ones, unsent, are dropped).',
    );
    // as it says: with the first flags, nothing is said
    const back = await runCli(['enqueue', docs, '--db', db, ...own]);
    expect(back.code).toBe(0);
    expect(back.stderr).toContain('3 updated (3 unanswered old jobs dropped)');
    expect(back.stderr).not.toContain('warning');
  });

  it('says nothing of defaults when the documents changed and the flags did not', async () => {
    const { docs, db } = notes();
    expect((await runCli(['enqueue', docs, '--db', db])).code).toBe(0);
    expect((await runCli(['run', '--db', db, ...MOCK_NOW])).code).toBe(0);
    writeFileSync(join(docs, 'n2.txt'), 'note 2, edited');
    const again = await runCli(['enqueue', docs, '--db', db]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).not.toContain("this enqueue's defaults");
    // the answered job left behind is said as what it is: a changed document, nothing to undo
    expect(oneLine(again.stderr)).toContain(
      'warning: 1 job answered or in flight no longer belongs to any item: the document of its item changed ' +
        '(the first item moved: "n2.txt"), and llmq run sends the new one. The earlier answer is kept in the queue, which status counts apart.',
    );
    // back to its first text, answered before: nothing to send, and not said to be
    expect((await runCli(['run', '--db', db, ...MOCK_NOW])).code).toBe(0);
    writeFileSync(join(docs, 'n2.txt'), 'note 2');
    const back = await runCli(['enqueue', docs, '--db', db]);
    expect(oneLine(back.stderr)).toContain(
      'warning: 1 job answered or in flight no longer belongs to any item: the document of its item changed ' +
        '(the first item moved: "n2.txt"), and its item points at an answer the queue had for the new text: nothing to send.',
    );
    expect((await runCli(['run', '--db', db, ...MOCK_NOW])).stderr).toMatch(/^nothing was pending/);
  });

  it('names what another prompt or option given on purpose changed, and how to go back', async () => {
    const { docs, db } = notes();
    expect((await runCli(['enqueue', docs, '--db', db, '--prompt', 'Sum up: {{text}}', '--model', 'gpt-4o'])).code).toBe(0);
    expect((await runCli(['run', '--db', db, ...MOCK_NOW])).code).toBe(0);
    const again = await runCli([
      'enqueue',
      docs,
      '--db',
      db,
      '--prompt',
      'In short: {{text}}',
      '--model',
      'gpt-4.1',
      '--max-tokens',
      '100',
    ]);
    expect(again.code, again.stderr).toBe(0);
    const warning = oneLine(again.stderr);
    expect(warning).toContain(
      'warning: 3 jobs answered or in flight no longer belong to any item: their items now have another request ' +
        '(the first item moved, "n1.txt": the prompt, the model gpt-4o -> gpt-4.1, max_tokens 512 -> 100), which llmq run sends unless it is answered already.',
    );
    expect(warning).toContain('If the change was not meant, enqueue again with the earlier prompt, model and options');
    expect(warning).not.toContain("this enqueue's defaults");
  });

  it('counts only settings the enqueue was not given, and only where its request is the default one', () => {
    const body = (o: object) => JSON.stringify({ model: 'gpt-4o-mini', max_tokens: 512, ...o });
    const user = (content: string) => ({ messages: [{ role: 'user', content }] });
    const defaultMessage = DEFAULT_PROMPT.replace('{{text}}', 'doc');
    const none = { prompt: false, system: false, model: false, maxTokens: false, temperature: false, schema: false };
    const moved = { id: 'x', was: body({ ...user('Classify: doc'), model: 'gpt-4o' }), now: body(user(defaultMessage)) };
    expect(lostToDefaults(moved, none).map((l) => l.flag)).toEqual(['--prompt', '--model gpt-4o']);
    // given, even with the default's value: the user asked for it
    expect(lostToDefaults(moved, { ...none, prompt: true, model: true })).toEqual([]);
    // a batch line's own body is not the default prompt: its change is the line's
    expect(lostToDefaults({ ...moved, now: body({ ...user('Classify: other doc'), model: 'gpt-4o' }) }, none)).toEqual([]);
    // nothing readable, nothing said
    expect(lostToDefaults({ ...moved, was: 'not json' }, none)).toEqual([]);
    // a reasoning model's limit is max_completion_tokens: lost to the default 512 all the same
    const reasoning = (limit: number) => JSON.stringify({ model: 'gpt-5-mini', max_completion_tokens: limit, ...user(defaultMessage) });
    expect(lostToDefaults({ id: 'x', was: reasoning(100), now: reasoning(512) }, none)).toEqual([
      { what: 'max_completion_tokens 100', flag: '--max-tokens 100' },
    ]);
    // a schema for the answers, left out: said, and the command asks for its file (a bare --schema is refused)
    const schemaWas = body({
      ...user('x'),
      response_format: { type: 'json_schema', json_schema: { name: 'ticket', schema: {}, strict: true } },
    });
    const lost = lostToDefaults({ id: 'x', was: schemaWas, now: body(user('x')) }, none);
    expect(lost).toEqual([{ what: 'a schema for its answers (ticket)', flag: '--schema' }]);
    const text = movedByDefaultsText(
      { updated: 2, orphanedAnswers: 0, firstMoved: { id: 'x', was: schemaWas, now: body(user('x')) } },
      lost,
      'llmq enqueue t/',
    );
    expect(text).toContain('enqueue again with what they had: llmq enqueue t/ --schema FILE (the items');
  });

  it("says a reasoning model's jobs of before moved for the limit's new name, max_completion_tokens", () => {
    const old = JSON.stringify({ model: 'gpt-5-mini', max_tokens: 512, messages: [{ role: 'user', content: 'x' }] });
    const now = JSON.stringify({ model: 'gpt-5-mini', max_completion_tokens: 512, messages: [{ role: 'user', content: 'x' }] });
    const templates = { prompt: parseTemplate('{{text}}'), system: null };
    expect(requestChanges({ id: 'x', was: old, now }, templates)).toEqual(['max_tokens -> max_completion_tokens']);
    // a changed schema is said as such, not taken for changed documents
    const withSchema = (name: string, required: string[]) =>
      JSON.stringify({
        model: 'gpt-5-mini',
        max_completion_tokens: 512,
        messages: [{ role: 'user', content: 'x' }],
        response_format: { type: 'json_schema', json_schema: { name, strict: true, schema: { type: 'object', required } } },
      });
    expect(requestChanges({ id: 'x', was: withSchema('t', ['a']), now: withSchema('t', ['a', 'b']) }, templates)).toEqual([
      'the schema (--schema)',
    ]);
    expect(requestChanges({ id: 'x', was: withSchema('t', ['a']), now: withSchema('u', ['a']) }, templates)).toEqual(['the schema t -> u']);
    expect(requestChanges({ id: 'x', was: now, now: withSchema('t', ['a']) }, templates)).toEqual(['the schema none -> t']);
  });
});

describe('enqueue for a model that reasons before it answers', () => {
  it('sends max_completion_tokens, and warns when --max-tokens leaves its reasoning little room', async () => {
    const { docs, db } = notes();
    const r = await runCli(['enqueue', docs, '--db', db, '--model', 'gpt-5-mini']);
    expect(r.code, r.stderr).toBe(0);
    expect(oneLine(r.stderr)).toContain(
      'warning: gpt-5-mini reasons before it answers, and its reasoning counts against --max-tokens 512 (sent as max_completion_tokens): ' +
        'answers may come back cut off or empty, and are billed all the same. Give it room, e.g. --max-tokens 4000',
    );
    const roomy = await runCli(['enqueue', docs, '--db', db, '--model', 'gpt-5-mini', '--max-tokens', '4000']);
    expect(roomy.stderr).not.toContain('reasons before it answers');
    expect(roomy.stderr).toContain('3 updated');
    const plain = await runCli(['enqueue', docs, '--db', join(docs, '..', 'other.db'), '--model', 'gpt-4.1-mini']);
    expect(plain.stderr).not.toContain('reasons before it answers');
    expect(reasoningRoomWarning('gpt-5-chat-latest', 512)).toBeNull();
    expect(reasoningRoomWarning('ft:o4-mini-2025-04-16:org::abc', 512)).toContain('reasons before it answers');
    const sent = readDb(db)
      .jobs.filter((j) => j.state === 'pending')
      .map((j) => JSON.parse(j.request));
    expect(sent.map((r) => [r.max_completion_tokens, r.max_tokens])).toEqual(Array(3).fill([4000, undefined]));
  });
});

describe('a document that joins a request that failed', () => {
  it('says it stays failed with it, why is in status, and retry-failed sends it; the run after sends nothing', async () => {
    const { docs, db } = notes();
    writeFileSync(join(docs, 'n2.txt'), 'note 1');
    expect((await runCli(['enqueue', docs, '--db', db])).code).toBe(0);
    // every try fails: the job of "note 1" (n1 and n2) and that of "note 3"
    expect((await runCli(['run', '--db', db, ...MOCK_NOW, '--mock-failure-rate', '1', '--max-attempts', '1'])).code).toBe(2);
    writeFileSync(join(docs, 'n1.txt'), 'note 1, edited');
    expect(oneLine((await runCli(['enqueue', docs, '--db', db])).stderr)).not.toContain('joined');
    // changed back, and a new file of the same text
    writeFileSync(join(docs, 'n1.txt'), 'note 1');
    writeFileSync(join(docs, 'n4.txt'), 'note 3');
    const back = await runCli(['enqueue', docs, '--db', db]);
    expect(back.code, back.stderr).toBe(0);
    expect(oneLine(back.stderr)).toContain(
      `warning: 2 documents joined requests that had failed, and stay failed with them: a run sends no failed job. llmq status --db ${db} says why they failed; llmq retry-failed --db ${db} sends failed jobs again.`,
    );
    expect(JSON.parse((await runCli(['enqueue', docs, '--db', db, '--json'])).stdout)).toMatchObject({ joinedFailed: 0, unchanged: 4 });
    const run = await runCli(['run', '--db', db, ...MOCK_NOW]);
    expect(run.stderr).toContain('nothing was pending');
  });
});
