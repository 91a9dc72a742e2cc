import Database from 'better-sqlite3';
import { cpSync, existsSync, mkdirSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync, spawn } from 'node:child_process';
import { describe, expect, it, onTestFinished } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { runCli } from '../helpers/cli.js';
import { tempDir } from '../helpers/tmp.js';
import { FIXTURES } from './helpers.js';

/** The real CLI, run from the repository root so fixture paths print as users would type them. */
const ROOT = join(FIXTURES, '..');
const llmq = (args: string[], input?: string) => runCli(args, { cwd: ROOT, input });

/** A JSONL file of three documents (a, b, c) and where its queue goes, in a fresh folder. */
function threeDocs(): { docs: string; db: string } {
  const dir = tempDir();
  const docs = join(dir, 'docs.jsonl');
  writeFileSync(docs, '{"id":"a","text":"one"}\n{"id":"b","text":"two"}\n{"id":"c","text":"three"}\n');
  return { docs, db: join(dir, 'q.db') };
}

function query<T>(db: string, sql: string): T[] {
  const d = new Database(db, { readonly: true });
  try {
    return d.prepare(sql).all() as T[];
  } finally {
    d.close();
  }
}

describe('llmq enqueue (CLI)', () => {
  it('enqueues a clean folder: exit 0, a summary on stderr, nothing on stdout', async () => {
    const db = join(tempDir(), 'q.db');
    const r = await llmq(['enqueue', 'fixtures/docs', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('');
    // the summary, then the next step (with the --db this queue needs)
    expect(r.stderr).toMatch(
      /^read 23 documents into .*q\.db in [\d.]+s: 23 new jobs, 23 new items, 0 already queued, 0 updated, 0 rejected\n/,
    );
    // no API key here: the run it proposes says what it needs, and how to try the queue offline
    expect(r.stderr.split('\n').slice(1)).toEqual([
      `next: llmq estimate --db ${db} (what it would cost and take), then llmq run --db ${db} once LLMQ_API_KEY is set, or with --base-url URL for a server of your own ` +
        `(llmq run --provider mock --db ${db} tries it offline)`,
      '',
    ]);
    const keyed = await runCli(['enqueue', 'fixtures/docs', '--db', join(tempDir(), 'k.db')], {
      cwd: ROOT,
      env: { OPENAI_API_KEY: 'sk-test' },
    });
    expect(keyed.stderr).toMatch(/\nnext: llmq estimate --db \S+ \(what it would cost and take\), then llmq run --db \S+k\.db\n$/);
    const again = await llmq(['enqueue', 'fixtures/docs', '--db', db]);
    expect(again.code).toBe(0);
    expect(again.stderr).toMatch(/0 new jobs, 0 new items, 23 already queued, 0 updated, 0 rejected/);
    // nothing new: no next step to suggest
    expect(again.stderr).not.toContain('next:');
    expect(query(db, 'SELECT count(*) AS n FROM jobs')).toEqual([{ n: 23 }]);
  });

  it('says nothing was enqueued when every document was rejected (exit 2 reads as "the rest is in")', async () => {
    const db = join(tempDir(), 'q.db');
    const r = await llmq(['enqueue', '-', '--db', db, '--text-field', 'txt'], '{"id":"a","text":"one"}\n{"id":"b","text":"two"}\n');
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(
      /0 new jobs, 0 new items, 0 already queued, 0 updated, 2 rejected\. Nothing was enqueued: every document was rejected \(above\)\n/,
    );
    // some rejected, the rest in: not said
    const some = await llmq(['enqueue', '-', '--db', db], '{"id":"a","text":"one"}\n{"id":"b"}\n');
    expect(some.code).toBe(2);
    expect(some.stderr).not.toContain('Nothing was enqueued');
  });

  it('skips its own database inside the folder being enqueued: exit 0, named, counted in the summary line', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'note.txt'), 'a real document');
    const r = await llmq(['enqueue', dir, '--db', join(dir, 'q.db')]);
    expect(r.code).toBe(0);
    const lines = r.stderr
      .trim()
      .split('\n')
      .filter((l) => !l.startsWith('next: '));
    expect(lines.slice(0, -1)).toEqual(
      ['q.db', 'q.db-shm', 'q.db-wal'].map((f) => `skipped ${dir}/${f}: part of the queue's own database (--db)`),
    );
    expect(lines.at(-1)).toMatch(/read 1 document into .*: 1 new job, 1 new item, 0 already queued, 0 updated, 0 rejected, 3 skipped$/);
    expect(query<{ id: string }>(join(dir, 'q.db'), 'SELECT id FROM items')).toEqual([{ id: 'note.txt' }]);
  });

  it('leaves JSON Lines files in a folder out, saying how to read their records, which naming the file does', async () => {
    const dir = tempDir();
    const docs = join(dir, 'docs');
    mkdirSync(join(docs, 'more'), { recursive: true });
    writeFileSync(join(docs, 'note.txt'), 'a real document');
    writeFileSync(join(docs, 'part-1.jsonl'), '{"id":"a","text":"one"}\n{"id":"b","text":"two"}\n');
    writeFileSync(join(docs, 'more', 'part-2.NDJSON'), '{"id":"c","text":"three"}\n');
    const db = join(dir, 'q.db');
    const r = await runCli(['enqueue', 'docs', '--db', db], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain(
      "skipped docs/part-1.jsonl: JSON Lines inside a folder, left out (a folder's files are one document each). To read its records, name it: llmq enqueue docs/part-1.jsonl\n",
    );
    expect(r.stderr).toContain('skipped docs/more/part-2.NDJSON: JSON Lines inside a folder');
    expect(r.stderr).toMatch(/read 1 document into .*, 2 skipped$/m);
    expect(query<{ id: string }>(db, 'SELECT id FROM items')).toEqual([{ id: 'note.txt' }]);
    const named = await runCli(['enqueue', 'docs/part-1.jsonl', '--db', db], { cwd: dir });
    expect(named.code, named.stderr).toBe(0);
    expect(query<{ id: string }>(db, 'SELECT id FROM items ORDER BY id')).toEqual([{ id: 'a' }, { id: 'b' }, { id: 'note.txt' }]);
  });

  it('leaves its own CSV export in the folder out (its answers are not a document), which naming the file enqueues', async () => {
    const dir = tempDir();
    const docs = join(dir, 'docs');
    mkdirSync(docs);
    writeFileSync(join(docs, 'note.txt'), 'a real document');
    writeFileSync(join(docs, 'data.csv'), 'name,city\nAda,London\n'); // a CSV of the user's: a document
    const db = join(dir, 'q.db');
    expect((await runCli(['enqueue', 'docs', '--db', db], { cwd: dir })).code).toBe(0);
    expect((await runCli(['run', '--db', db, '--provider', 'mock', '--mock-latency', '0', '--progress', 'none'], { cwd: dir })).code).toBe(
      0,
    );
    expect((await runCli(['export', '--db', db, '--out', 'docs/results.csv'], { cwd: dir })).code).toBe(0);
    const again = await runCli(['enqueue', 'docs', '--db', db], { cwd: dir });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain(
      'skipped docs/results.csv: an llmq export (CSV), left out: its answers are not a document. To enqueue it anyway, name it: llmq enqueue docs/results.csv\n',
    );
    expect(again.stderr).toMatch(/0 new jobs, 0 new items, 2 already queued, .*1 skipped$/m);
    const named = await runCli(['enqueue', 'docs/results.csv', '--db', db], { cwd: dir });
    expect(named.code, named.stderr).toBe(0);
    expect(query<{ id: string }>(db, 'SELECT id FROM items ORDER BY id').map((r) => r.id)).toEqual(['data.csv', 'note.txt', 'results.csv']);
  });

  it('leaves a subfolder its --out-dir export wrote out (answers are not documents), which naming the folder enqueues', async () => {
    const dir = tempDir();
    const docs = join(dir, 'docs');
    mkdirSync(join(docs, 'sub'), { recursive: true });
    writeFileSync(join(docs, 'note.txt'), 'a real document');
    writeFileSync(join(docs, 'sub', 'other.md'), 'another document');
    const db = join(dir, 'q.db');
    expect((await runCli(['enqueue', 'docs', '--db', db], { cwd: dir })).code).toBe(0);
    expect((await runCli(['run', '--db', db, '--provider', 'mock', '--mock-latency', '0', '--progress', 'none'], { cwd: dir })).code).toBe(
      0,
    );
    const exported = await runCli(['export', '--db', db, '--out-dir', 'docs/answers'], { cwd: dir });
    expect(exported.code, exported.stderr).toBe(0);
    // a folder of answers only: no word that an enqueue would read them; the one warning is of the mock's stand-ins
    const warnings = exported.stderr.split('\n').filter((l) => l.startsWith('warning: '));
    expect(warnings).toEqual([expect.stringMatching(/^warning: answers of the offline mock are among these/)]);
    expect(existsSync(join(docs, 'answers', 'sub', 'other.md.out'))).toBe(true);
    const again = await runCli(['enqueue', 'docs', '--db', db], { cwd: dir });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toContain(
      'skipped docs/answers: 2 answer files that llmq export --out-dir wrote, left out: answers are not documents. To enqueue them anyway, name the folder: llmq enqueue docs/answers\n',
    );
    expect(again.stderr).toMatch(/0 new jobs, 0 new items, 2 already queued, .*1 skipped$/m);
    // what --glob leaves out is not said
    const globbed = await runCli(['enqueue', 'docs', '--db', db, '--glob', '*.txt'], { cwd: dir });
    expect(globbed.code, globbed.stderr).toBe(0);
    expect(globbed.stderr).not.toContain('skipped');
    // named, the folder is read, its mark left out
    const named = await runCli(['enqueue', 'docs/answers', '--db', db, '--hidden'], { cwd: dir });
    expect(named.code, named.stderr).toBe(0);
    expect(query<{ id: string }>(db, 'SELECT id FROM items ORDER BY id').map((r) => r.id)).toEqual([
      'note.txt',
      'note.txt.out',
      'sub/other.md',
      'sub/other.md.out',
    ]);
  });

  it('does not mark a folder holding other files as answers: the export warns, and a folder enqueue around it reads its documents', async () => {
    const dir = tempDir();
    const docs = join(dir, 'docs');
    mkdirSync(docs);
    writeFileSync(join(docs, 'note.txt'), 'a real document');
    const db = join(dir, 'q.db');
    expect((await runCli(['enqueue', 'docs', '--db', db], { cwd: dir })).code).toBe(0);
    expect((await runCli(['run', '--db', db, '--provider', 'mock', '--mock-latency', '0', '--progress', 'none'], { cwd: dir })).code).toBe(
      0,
    );
    const exported = await runCli(['export', '--db', db, '--out-dir', 'docs'], { cwd: dir });
    expect(exported.code, exported.stderr).toBe(0);
    expect(exported.stderr).toContain('warning: docs held other files before: its answers are among them');
    expect(existsSync(join(docs, '.llmq-answers'))).toBe(false);
    // the document is not lost to an enqueue of the folder around it
    const around = await runCli(['enqueue', '.', '--db', db, '--glob', 'docs/**'], { cwd: dir });
    expect(around.code, around.stderr).toBe(0);
    expect(around.stderr).not.toContain('answer files');
    expect(query<{ id: string }>(db, 'SELECT id FROM items ORDER BY id').map((r) => r.id)).toEqual([
      'docs/note.txt',
      'docs/note.txt.out',
      'note.txt',
    ]);
  });

  it('says the request flags given did not apply to OpenAI Batch API lines, whose bodies are sent as they are', async () => {
    const dir = tempDir();
    const line = (id: string) =>
      JSON.stringify({ custom_id: id, body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: id }] } });
    writeFileSync(join(dir, 'batch.jsonl'), `${line('r1')}\n${line('r2')}\n`);
    writeFileSync(join(dir, 'note.txt'), 'a text document');
    const db = join(dir, 'q.db');
    const r = await runCli(['enqueue', 'batch.jsonl', 'note.txt', '--db', db, '--model', 'gpt-4o', '--max-tokens', '64', '--json'], {
      cwd: dir,
    });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ newItems: 3, batchLines: 2 });
    expect(r.stderr.replace(/\n(?!warning|next)/g, ' ')).toContain(
      'warning: 2 lines were OpenAI Batch API lines (custom_id and body): each body is sent as it is, so --model and --max-tokens did not apply to them (only to the other documents).',
    );
    // the bodies are what is stored: their model, not the flag's
    expect(query<{ model: string }>(db, 'SELECT model FROM jobs ORDER BY seq').map((j) => j.model)).toEqual([
      'gpt-4o-mini',
      'gpt-4o-mini',
      'gpt-4o',
    ]);
    // no request flag given: nothing to say
    const plain = await runCli(['enqueue', 'batch.jsonl', '--db', join(dir, 'p.db')], { cwd: dir });
    expect(plain.stderr).not.toContain('warning');
  });

  it('refuses a flag taken as the value of the one before it, and writes nothing', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'note.txt'), 'a real document');
    const r = await runCli(['enqueue', 'note.txt', '--glob', '--db', 'f.db'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('--glob needs a value, and took --db for it: give --glob a value, or leave it out.');
    expect(existsSync(join(dir, 'llmq.db'))).toBe(false);
    expect(existsSync(join(dir, 'f.db'))).toBe(false);
    const eq = await runCli(['enqueue', 'note.txt', '--model', '--db=f.db'], { cwd: dir });
    expect(eq.stderr).toContain('--model needs a value, and took --db for it');
    // options whose value is parsed, and commands without arguments, which said "too many arguments"
    const hook = await runCli(['run', '--provider', 'mock', '--on-done', '--json'], { cwd: dir });
    expect(hook.stderr).toContain('--on-done needs a value, and took --json for it');
    const sub = await runCli(['batches', 'cancel', '--db', '--json'], { cwd: dir });
    expect(sub.stderr).toContain('--db needs a value, and took --json for it');
    // a value that only starts like a flag is a value, and so is one given with =
    const ok = await runCli(['enqueue', 'note.txt', '--system', '--be brief--', '--db', 'f.db'], { cwd: dir });
    expect(ok.code, ok.stderr).toBe(0);
    const outright = await runCli(['enqueue', 'note.txt', '--system=--db', '--db', 'f.db'], { cwd: dir });
    expect(outright.code, outright.stderr).toBe(0);
  });

  it('refuses {{meta.ID}} of the id or text field before reading anything: they are not meta', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'in.jsonl'), '{"id":"a","text":"one","lang":"en"}\n');
    const id = await runCli(['enqueue', 'in.jsonl', '--prompt', '{{meta.id}}: {{text}}'], { cwd: dir });
    expect(id.code).toBe(1);
    expect(id.stderr).toContain(
      '{{meta.id}} is never filled: "id" is each line\'s item id (--id-field), not one of its meta fields. Use {{id}}.',
    );
    const text = await runCli(['enqueue', 'in.jsonl', '--text-field', 'body', '--prompt', '{{meta.body}}'], { cwd: dir });
    expect(text.stderr).toContain(
      '{{meta.body}} is never filled: "body" is each line\'s text (--text-field), not one of its meta fields. Use {{text}}.',
    );
    expect(existsSync(join(dir, 'llmq.db'))).toBe(false);
    const ok = await runCli(['enqueue', 'in.jsonl', '--prompt', '{{meta.lang}} {{id}}: {{text}}'], { cwd: dir });
    expect(ok.code, ok.stderr).toBe(0);
  });

  it('exits 2 when input was rejected, one stderr line per rejection with file and line, the rest enqueued', async () => {
    const db = join(tempDir(), 'q.db');
    const r = await llmq([
      'enqueue',
      'fixtures/bad',
      'fixtures/jsonl/bad-lines.jsonl',
      'fixtures/jsonl/reviews.jsonl',
      '--db',
      db,
      '--max-doc-bytes',
      '2KiB',
    ]);
    expect(r.code).toBe(2);
    const lines = r.stderr
      .trim()
      .split('\n')
      .filter((l) => !l.startsWith('next: '));
    expect(lines.filter((l) => l.startsWith('rejected '))).toHaveLength(16);
    expect(lines).toContain('rejected fixtures/bad/binary.bin: an image, not text');
    expect(lines).toContain(
      'rejected fixtures/bad/latin1.txt: invalid UTF-8 (save the file as UTF-8; Latin-1 or Windows-1252 text is converted by iconv -f WINDOWS-1252 -t UTF-8)',
    );
    expect(lines).toContain('rejected fixtures/bad/empty.txt: empty document');
    expect(lines).toContain(
      "rejected fixtures/jsonl/bad-lines.jsonl:2: malformed JSON (Expected ',' or '}' after property value in JSON at position 32)",
    );
    expect(lines).toContain('rejected fixtures/jsonl/bad-lines.jsonl:15: line is 3,023 bytes, over --max-doc-bytes 2KiB');
    expect(lines.at(-3)).toMatch(/read 25 documents .*: 9 new jobs, 9 new items, 0 already queued, 0 updated, 16 rejected$/);
    // the one rejection a flag undoes is said once, with the flag
    expect(lines.at(-2)).toMatch(
      /^warning: 1 document was over --max-doc-bytes \(2,048 bytes\): to take it, enqueue again with a larger --max-doc-bytes \(3KiB takes it\); documents already queued are not added again/,
    );
    // the size named takes the largest refused, a line or a file: not a guess that may still be short
    const folder = join(tempDir(), 'docs');
    mkdirSync(folder);
    writeFileSync(join(folder, 'long.txt'), 'y'.repeat(9000));
    writeFileSync(join(folder, 'longer.txt'), 'z'.repeat(20_000));
    const files = await runCli(['enqueue', folder, '--db', join(tempDir(), 'q.db'), '--max-doc-bytes', '2KiB']);
    expect(files.stderr).toContain(
      '2 documents were over --max-doc-bytes (2,048 bytes): to take them, enqueue again with a larger --max-doc-bytes (20KiB takes them all)',
    );
    // a stray archive: no limit is proposed that no model could take in one request
    writeFileSync(join(folder, 'archive.txt'), '');
    truncateSync(join(folder, 'archive.txt'), 100 * 2 ** 20); // sparse: nothing is written
    const huge = await runCli(['enqueue', folder, '--db', join(tempDir(), 'q.db'), '--max-doc-bytes', '2KiB']);
    expect(huge.stderr).toContain(
      '(up to 64MiB; the largest is 104,857,600 bytes, more than a model takes in one request: split it or leave it out)',
    );
    // stdin is read once: the warning says to pipe the input in again
    const piped = await runCli(['enqueue', '-', '--db', join(tempDir(), 'q.db'), '--max-doc-bytes', '2KiB'], {
      input: `${JSON.stringify({ id: 'big', text: 'x'.repeat(3000) })}\n`,
    });
    expect(piped.stderr).toMatch(
      /^warning: 1 document was over --max-doc-bytes \(2,048 bytes\): to take it, enqueue again, piping the same input in, with a larger --max-doc-bytes \(3KiB takes it\)/m,
    );
    // reviews.jsonl:6 has no "id" where the other lines have one: its id is file:line, likely not what was meant
    expect(lines.at(-1)).toMatch(
      /^warning: 1 line had no "id" field though 9 other lines have one \(the first: fixtures\/jsonl\/reviews.jsonl:6, /,
    );
    expect(query<{ id: string }>(db, 'SELECT id FROM items ORDER BY seq').map((i) => i.id)).toEqual([
      'a',
      'h',
      'j',
      'r-001',
      'r-002',
      'r-003',
      '1004',
      'fixtures/jsonl/reviews.jsonl:6',
      'r-006',
    ]);
  });

  it('spells a source one way, so file:line ids match however the path was typed', async () => {
    const db = join(tempDir(), 'q.db');
    expect((await llmq(['enqueue', './fixtures/jsonl/reviews.jsonl', '--db', db])).code).toBe(0);
    const again = await llmq(['enqueue', 'fixtures//jsonl/reviews.jsonl', '--db', db, '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ newItems: 0, unchanged: 6 });
    expect(query(db, "SELECT id FROM items WHERE id LIKE '%:6'")).toEqual([{ id: 'fixtures/jsonl/reviews.jsonl:6' }]);
  });

  it('prints the summary as one JSON object on stdout with --json', async () => {
    const db = join(tempDir(), 'q.db');
    const r = await llmq(['enqueue', 'fixtures/jsonl/openai-batch.jsonl', 'fixtures/bad/empty.txt', '--db', db, '--json']);
    expect(r.code).toBe(2);
    const summary = JSON.parse(r.stdout);
    expect(summary).toMatchObject({
      db,
      documents: 5,
      newJobs: 3,
      newItems: 4,
      unchanged: 0,
      updated: 0,
      rejected: 1,
      rejections: [{ path: 'fixtures/bad/empty.txt', reason: 'empty document' }],
    });
    expect(r.stdout.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toBe('rejected fixtures/bad/empty.txt: empty document\n');
  });

  it('reads JSONL from stdin with -, and takes the flags into the request', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    writeFileSync(join(dir, 'sys.txt'), 'You answer in one word.');
    const r = await llmq(
      [
        'enqueue',
        '-',
        '--db',
        db,
        '--json',
        '--model',
        'llama3.1',
        '--max-tokens',
        '7',
        '--temperature',
        '0.5',
        '--priority',
        '-2',
        '--system',
        `@${join(dir, 'sys.txt')}`,
        '--prompt',
        'Topic of {{id}}? {{text}}',
        '--id-field',
        'key',
        '--text-field',
        'body',
      ],
      '{"key":"k1","body":"Rain all week."}\n',
    );
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ documents: 1, newJobs: 1, newItems: 1 });
    const store = new SqliteStore(db, { existing: true });
    const job = (await store.item('k1'))!.job;
    await store.close();
    expect(job.priority).toBe(-2);
    expect(JSON.parse(job.request)).toEqual({
      model: 'llama3.1',
      max_tokens: 7,
      temperature: 0.5,
      messages: [
        { role: 'system', content: 'You answer in one word.' },
        { role: 'user', content: 'Topic of k1? Rain all week.' },
      ],
    });
    expect(query(db, 'SELECT id, source FROM items')).toEqual([{ id: 'k1', source: '-:1' }]);
  });

  it('warns when the prompt does not send the document text, since every document would share one job', async () => {
    const db = join(tempDir(), 'q.db');
    const r = await llmq(['enqueue', 'fixtures/docs/reviews', '--db', db, '--prompt', 'Say hello']);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('warning: the prompt has no {{text}}');
    expect(r.stderr).toMatch(/1 new job, 4 new items/);
  });

  it('applies --glob (repeatable) and --hidden', async () => {
    const db = join(tempDir(), 'q.db');
    const r = await llmq(['enqueue', 'fixtures/docs', '--db', db, '--json', '--glob', 'reviews/*', '--glob', '.*', '--hidden']);
    expect(r.code).toBe(0);
    expect(query<{ id: string }>(db, 'SELECT id FROM items ORDER BY seq').map((i) => i.id)).toEqual([
      '.notes.txt',
      'reviews/app-budgetbee.txt',
      'reviews/coffee-grinder-burrmaster.txt',
      'reviews/headphones-aurora-x2.txt',
      'reviews/hotel-harbour-view.txt',
    ]);
  });

  it('says when a copy of a folder enqueued as well gives its items a new place, the same items: forget --source then names the copy', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'in', 'sub'), { recursive: true });
    writeFileSync(join(dir, 'in', 'a.txt'), 'a');
    writeFileSync(join(dir, 'in', 'sub', 'b.md'), 'b');
    cpSync(join(dir, 'in'), join(dir, 'in2'), { recursive: true });
    const db = join(dir, 'q.db');
    expect((await llmq(['enqueue', join(dir, 'in'), '--db', db])).code).toBe(0);
    const copy = await llmq(['enqueue', join(dir, 'in2'), '--db', db]);
    expect(copy.code, copy.stderr).toBe(0);
    expect(copy.stderr).toMatch(/0 new items, 2 already queued/);
    expect(copy.stderr).toContain(
      `warning: item "a.txt" now comes from ${join(dir, 'in2', 'a.txt')}, not ${join(dir, 'in', 'a.txt')} (and 1 more): the same document, so the same item, not sent again; export and forget --source name its new place.`,
    );
    const forgets = await llmq(['forget', '--source', join(dir, 'in2'), '--dry-run', '--db', db]);
    expect(forgets.stdout + forgets.stderr).toMatch(/2 items/);
    // the same folder again: nothing new to say
    expect((await llmq(['enqueue', join(dir, 'in2'), '--db', db])).stderr).not.toContain('warning');
  });

  it('warns when a folder enqueued after another gives an item the same id from another file', async () => {
    const dir = tempDir();
    for (const lang of ['en', 'fr']) {
      mkdirSync(join(dir, lang));
      writeFileSync(join(dir, lang, 'readme.md'), `readme in ${lang}`);
    }
    const db = join(dir, 'q.db');
    expect((await llmq(['enqueue', join(dir, 'en'), '--db', db])).stderr).not.toContain('warning');
    const fr = await llmq(['enqueue', join(dir, 'fr'), '--db', db]);
    expect(fr.code).toBe(0);
    expect(fr.stderr).toMatch(/1 updated/);
    expect(fr.stderr).toContain(
      `warning: item "readme.md" now comes from ${join(dir, 'fr', 'readme.md')}, not ${join(dir, 'en', 'readme.md')}: one id for two documents?`,
    );
    expect(fr.stderr).toContain('enqueue the folder above both');
    // each folder apart, with a model of its own: the way out, named with its commands
    const en = join(dir, 'en');
    const fr2 = join(dir, 'fr');
    expect(fr.stderr).toContain(
      ` With a model or prompt for each: llmq forget --source ${en} --db ${db} and llmq forget --source ${fr2} --db ${db} (answers already paid for are kept and found again), ` +
        `then llmq enqueue ${dir} --glob 'en/**' --db ${db} and llmq enqueue ${dir} --glob 'fr/**' --db ${db}, each with its own flags.`,
    );
    const apart = join(dir, 'apart.db');
    writeFileSync(join(en, 'only-en.md'), 'only in en');
    expect((await llmq(['enqueue', en, '--db', apart, '--model', 'model-a'])).code).toBe(0);
    expect((await llmq(['enqueue', fr2, '--db', apart, '--model', 'model-b'])).code).toBe(0);
    for (const f of [en, fr2]) expect((await llmq(['forget', '--source', f, '--db', apart])).code).toBe(0);
    expect((await llmq(['enqueue', dir, '--glob', 'en/**', '--db', apart, '--model', 'model-a'])).stderr).not.toContain('warning');
    expect((await llmq(['enqueue', dir, '--glob', 'fr/**', '--db', apart, '--model', 'model-b'])).stderr).not.toContain('warning');
    const items = (await llmq(['export', '--db', apart])).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(items.map((i: { id: string; model: string }) => [i.id, i.model])).toEqual([
      ['en/only-en.md', 'model-a'],
      ['en/readme.md', 'model-a'],
      ['fr/readme.md', 'model-b'],
    ]);
    // the same folder again, changed: an update, said as one
    writeFileSync(join(dir, 'fr', 'readme.md'), 'readme in fr, v2');
    expect((await llmq(['enqueue', join(dir, 'fr'), '--db', db])).stderr).not.toContain('warning');
    // JSONL records with the same id in two files: their ids are the records', no folder comes into it
    writeFileSync(join(dir, 'a.jsonl'), '{"id":"r1","text":"one"}\n');
    writeFileSync(join(dir, 'b.jsonl'), '{"id":"r1","text":"two"}\n');
    expect((await llmq(['enqueue', join(dir, 'a.jsonl'), '--db', db])).code).toBe(0);
    const records = await llmq(['enqueue', join(dir, 'b.jsonl'), '--db', db]);
    expect(records.stderr).toContain('To keep both, give the records ids of their own (their id field, or another with --id-field).');
    expect(records.stderr).not.toContain('folder above both');
  });

  it('says a named .csv or .tsv file is one text document, with the conversion to records; a {text} with one brace is named', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'rows.csv'), 'id,body\n1,one\n');
    writeFileSync(join(dir, 'rows.tsv'), 'id\tbody\n1\tone\n');
    const r = await llmq(['enqueue', join(dir, 'rows.csv'), join(dir, 'rows.tsv'), '--db', join(dir, 'q.db')]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(
      `warning: ${join(dir, 'rows.csv')} is read as one text document: only .jsonl and .ndjson files are read a record per line.`,
    );
    expect(r.stderr).toContain(`mlr --icsv --ojsonl cat ${join(dir, 'rows.csv')} > rows.jsonl`);
    expect(r.stderr).toContain(`mlr --itsv --ojsonl cat ${join(dir, 'rows.tsv')} > rows.jsonl`);
    writeFileSync(join(dir, 'notes.txt'), 'a note');
    const note = await llmq(['enqueue', join(dir, 'notes.txt'), '--db', join(dir, 'q2.db')]);
    expect(note.stderr).not.toContain('is read as one text document');

    const braces = await llmq(['enqueue', join(dir, 'notes.txt'), '--db', join(dir, 'q3.db'), '--prompt', 'Sum: {text}']);
    expect(braces.stderr).toContain('the prompt has no {{text}}');
    expect(braces.stderr).toContain('It has {text}: fields take two braces, {{text}}.');
    const none = await llmq(['enqueue', join(dir, 'notes.txt'), '--db', join(dir, 'q4.db'), '--prompt', 'Say hi']);
    expect(none.stderr).toContain('Add {{text}} to --prompt or --system.');
  });

  it('says a named .json file holding an array is one text document, with the conversion to records', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    writeFileSync(join(dir, 'records.json'), ' [{"id":"a","text":"one"},{"id":"b","text":"two"}]\n');
    writeFileSync(join(dir, 'config.json'), '{"a": 1}\n');
    const r = await llmq(['enqueue', join(dir, 'records.json'), join(dir, 'config.json'), '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('records.json holds a JSON array, and is read as one text document');
    expect(r.stderr).toContain("jq -c '.[]'");
    // a JSON object is a document like any other: nothing said
    expect(r.stderr).not.toContain('config.json holds');
    expect(r.stderr).toMatch(/read 2 documents .*2 new items/);
  });

  it('leaves a named pipe called .json unread until the enqueue reads it: its bytes are the document', { timeout: 20_000 }, async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const pipe = join(dir, 'stream.json');
    execFileSync('mkfifo', [pipe]);
    const writer = spawn('sh', ['-c', `printf '[1, 2] and the rest' > "$0"`, pipe], { stdio: 'ignore' });
    onTestFinished(() => void writer.kill('SIGKILL'));
    const r = await llmq(['enqueue', pipe, '--db', db]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/read 1 document .*1 new item/);
    const [job] = query<{ request: string }>(db, 'SELECT r.request FROM jobs j JOIN job_requests r ON r.seq = j.seq');
    expect(job!.request).toContain('[1, 2] and the rest');
  });

  it('--priority on input queued already moves its waiting jobs to that priority; without it they keep theirs', async () => {
    const { docs, db } = threeDocs();
    expect((await llmq(['enqueue', docs, '--db', db, '--priority', '5'])).code).toBe(0);
    const urgent = await llmq(['enqueue', docs, '--db', db, '--priority', '-10']);
    expect(urgent.code).toBe(0);
    expect(urgent.stderr).toMatch(/0 new jobs, 0 new items, 3 already queued, 0 updated, 3 jobs now at priority -10, 0 rejected/);
    const plain = await llmq(['enqueue', docs, '--db', db, '--json']);
    expect(JSON.parse(plain.stdout)).toMatchObject({ unchanged: 3, reprioritized: 0 });
    expect(query(db, 'SELECT priority, count(*) AS n FROM jobs GROUP BY priority')).toEqual([{ priority: -10, n: 3 }]);
  });

  it('warns when answered jobs lose their items to another model, and the earlier model points them back', async () => {
    const { docs, db } = threeDocs();
    expect((await llmq(['enqueue', docs, '--db', db, '--model', 'mock-1'])).code).toBe(0);
    expect((await llmq(['run', '--db', db, '--provider', 'mock', '--mock-latency', '0', '--progress', 'none'])).code).toBe(0);
    // the same file, the model left out: every item now asks the default model
    const other = await llmq(['enqueue', docs, '--db', db, '--json']);
    expect(other.code).toBe(0);
    expect(JSON.parse(other.stdout)).toMatchObject({ newJobs: 3, updated: 3, orphanedAnswers: 3 });
    // the default model made the change: said, with the model they had and the flag that gives it back
    const warning = other.stderr.replace(/\n(?!warning|next)/g, ' ');
    expect(warning).toContain(
      "warning: 3 items moved to new jobs, and this enqueue's defaults made the change: it gave no --model, and the first, " +
        '"a", had the model mock-1.',
    );
    // not "will be sent again": the items' new request may be one answered already
    expect(warning).toContain('llmq run sends the new requests unless they are answered already');
    expect(warning).toContain('3 answers already paid for no longer belong to any item (kept in the queue)');
    expect(warning).toContain(`enqueue again with what they had: llmq enqueue ${docs} --db ${db} --model mock-1 (the items then go back`);
    // status counts the jobs the items need: none done, the three answers kept apart
    const moved = JSON.parse((await llmq(['status', '--db', db, '--json'])).stdout);
    expect({ counts: moved.counts, total: moved.total, orphanedAnswers: moved.orphanedAnswers, percentDone: moved.percentDone }).toEqual({
      counts: { pending: 3, running: 0, done: 0, failed: 0 },
      total: 3,
      orphanedAnswers: 3,
      percentDone: 0,
    });
    const text = (await llmq(['status', '--db', db])).stdout;
    expect(text).toMatch(/done +0 +0%/);
    expect(text).toMatch(/kept +3 +answers no item needs now/);
    // as it says: back to mock-1, the items find their answers, and the unsent jobs go
    const back = await llmq(['enqueue', docs, '--db', db, '--model', 'mock-1']);
    expect(back.code).toBe(0);
    expect(back.stderr).toMatch(/0 new jobs, 0 new items, 0 already queued, 3 updated \(3 unanswered old jobs dropped\)/);
    expect(back.stderr).not.toContain('warning');
    expect(query(db, 'SELECT state, count(*) AS n FROM jobs GROUP BY state')).toEqual([{ state: 'done', n: 3 }]);
    const after = JSON.parse((await llmq(['status', '--db', db, '--json'])).stdout);
    expect({ done: after.counts.done, total: after.total, orphanedAnswers: after.orphanedAnswers }).toEqual({
      done: 3,
      total: 3,
      orphanedAnswers: 0,
    });
    expect((await llmq(['status', '--db', db])).stdout).not.toContain('kept');
  });

  it('says why when nothing was read: a --glob written from outside the folder, or empty input', async () => {
    const dir = tempDir();
    const glob = await llmq(['enqueue', 'fixtures/docs', '--db', join(dir, 'q.db'), '--glob', 'fixtures/docs/reviews/*']);
    expect(glob.code).toBe(0);
    expect(glob.stderr).toMatch(/read 0 documents/);
    expect(glob.stderr).toContain(
      "warning: no file matched --glob 'fixtures/docs/reviews/*'. A pattern with a / matches the path inside each folder given",
    );
    const empty = join(dir, 'empty.jsonl');
    writeFileSync(empty, '\n\n');
    const none = await llmq(['enqueue', empty, '--db', join(dir, 'q.db')]);
    expect(none.stderr).toContain(`warning: nothing was read from ${empty}: no documents there`);
    // and a read that found documents says nothing of the kind
    const some = await llmq(['enqueue', 'fixtures/docs', '--db', join(dir, 'q.db'), '--glob', 'reviews/*']);
    expect(some.stderr).not.toContain('warning');
  });

  it.each([
    [['--max-tokens', '-1'], "error: option '--max-tokens <n>' argument '-1' is invalid. Expected an integer of 1 or more."],
    [['--max-tokens', '1.5'], "error: option '--max-tokens <n>' argument '1.5' is invalid. Expected an integer of 1 or more."],
    [['--temperature', 'abc'], "error: option '--temperature <t>' argument 'abc' is invalid. Expected a number from 0 to 2."],
    [['--temperature', '2.5'], "error: option '--temperature <t>' argument '2.5' is invalid. Expected a number from 0 to 2."],
    [['--priority', 'high'], "error: option '--priority <n>' argument 'high' is invalid. Expected an integer."],
    [['--model', ' '], "error: option '--model <name>' argument ' ' is invalid. Expected a model name, such as gpt-4o-mini."],
    [
      ['--max-doc-bytes', '0'],
      "error: option '--max-doc-bytes <size>' argument '0' is invalid. Expected a size of 1 byte or more, like 65536, 512KiB or 1MiB.",
    ],
    [
      ['--prompt', '@/no/such/prompt.txt'],
      "error: option '--prompt <text|@file>' argument '@/no/such/prompt.txt' is invalid. Cannot read /no/such/prompt.txt (ENOENT). Give text, or @ and the path of a UTF-8 file.",
    ],
    [['--prompt', 'Hi {{txt}}'], 'error: Unknown placeholder {{txt}} in --prompt. Use {{text}}, {{id}}, {{path}} or {{meta.FIELD}}.'],
  ])('rejects bad flags %j with exit 1 and a message naming flag, value and what was expected', async (flags, message) => {
    const dir = tempDir();
    const r = await llmq(['enqueue', 'fixtures/docs', '--db', join(dir, 'q.db'), ...flags]);
    expect(r.code).toBe(1);
    expect(r.stderr.split('\n')[0]).toBe(message);
  });

  it('stores --model without the spaces a quote carried', async () => {
    const { docs, db } = threeDocs();
    expect((await llmq(['enqueue', docs, '--db', db, '--model', ' gpt-4o '])).code).toBe(0);
    expect(query(db, 'SELECT DISTINCT model FROM jobs')).toEqual([{ model: 'gpt-4o' }]);
  });

  it('exits 1 naming a missing source, and enqueues nothing from the others: no queue is left behind', async () => {
    const db = join(tempDir(), 'q.db');
    const r = await llmq(['enqueue', 'fixtures/docs', 'fixtures/nope.jsonl', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'error: Source not found: fixtures/nope.jsonl (no such file or folder). Name a folder, a text file, a .jsonl file, or - for stdin.\n',
    );
    // an empty queue there would make the next status say "empty" instead of "there is no queue"
    expect(existsSync(db)).toBe(false);
  });

  it('exits 1 without a source, and --help shows examples', async () => {
    const none = await llmq(['enqueue', '--db', join(tempDir(), 'q.db')]);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain("error: missing required argument 'source'");
    const help = await llmq(['enqueue', '--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Examples:\n  $ llmq enqueue docs/');
    for (const flag of [
      '--prompt',
      '--system',
      '--model',
      '--max-tokens',
      '--temperature',
      '--priority',
      '--glob',
      '--hidden',
      '--id-field',
      '--text-field',
      '--max-doc-bytes',
      '--json',
      '--db',
    ])
      expect(help.stdout).toContain(flag);
  });

  it('{{path}} is the same however a folder inside the current one is named, so enqueueing it again adds nothing', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'notes'));
    writeFileSync(join(dir, 'notes', 'a.md'), 'hello');
    const db = join(dir, 'q.db');
    const at = (cwd: string, source: string) => runCli(['enqueue', source, '--db', db, '--prompt', 'File {{path}}: {{text}}'], { cwd });
    expect((await at(dir, 'notes')).code).toBe(0);
    for (const source of [join(dir, 'notes'), './notes/', join(dir, 'notes', 'a.md')])
      expect((await at(dir, source)).stderr, source).toMatch(/0 new jobs, 0 new items, 1 already queued, 0 updated/);
    const [request] = query<{ request: string }>(db, 'SELECT request FROM job_requests');
    expect(JSON.parse(request!.request).messages[0].content).toBe('File notes/a.md: hello');
    // named from inside the folder, the path is another: the warning says why the request changed
    const inside = await at(join(dir, 'notes'), join(dir, 'notes'));
    expect(inside.stderr).toMatch(/1 new job, 0 new items, 0 already queued, 1 updated/);
    expect(inside.stderr.replace(/\n/g, ' ')).toContain('{{path}} in the template is the path as named from the current folder');
  });

  it('{{meta.FIELD}} with only folders and text files is one usage error, before a queue is made', async () => {
    const db = join(tempDir(), 'q.db');
    const r = await llmq(['enqueue', 'fixtures/docs', '--db', db, '--prompt', 'By {{meta.author}} ({{ meta.year }}): {{text}}']);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'error: {{meta.author}}, {{ meta.year }} are filled from the fields of a JSONL line, and these sources are folders or text files, ' +
        'whose documents have no fields. Use {{text}}, {{id}} or {{path}} for files, or enqueue a .jsonl file.\n',
    );
    expect(existsSync(db)).toBe(false);
    // with a JSONL source as well, its lines have fields: each document is judged on its own
    const mixed = await llmq([
      'enqueue',
      'fixtures/docs',
      'fixtures/jsonl/reviews.jsonl',
      '--db',
      db,
      '--prompt',
      '{{meta.product}}: {{text}}',
    ]);
    expect(mixed.code).toBe(2);
    expect(mixed.stderr).toMatch(/rejected fixtures\/docs\/onboarding\.md: the template needs \{\{meta\.product\}\}/);
  });
});
