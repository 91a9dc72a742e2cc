import { gzipSync } from 'node:zlib';
import { copyFileSync, cpSync, mkdirSync, symlinkSync, writeFileSync, chmodSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/errors.js';
import { parseTemplate } from '../../src/ingest/template.js';
import { tempDir } from '../helpers/tmp.js';
import { sourcePath } from '../../src/ingest/folder.js';
import { count, fixture, items, request, run, shownFixture, tempStore } from './helpers.js';
import { runCli } from '../helpers/cli.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { all } from '../helpers/store-reads.js';
import { REASON_GZIP, REASON_IMAGE, REASON_PDF, REASON_UTF16, REASON_ZIP } from '../../src/ingest/decode.js';
import { CSV_COLUMNS } from '../../src/report/csv-columns.js';

const DOCS = fixture('docs');

describe('enqueue a folder', () => {
  it('makes one item per file, id = path relative to the folder, hidden files and folders skipped', async () => {
    const store = tempStore();
    const s = await run(store, [DOCS]);
    expect(s).toMatchObject({ documents: 23, newJobs: 23, newItems: 23, unchanged: 0, updated: 0, rejected: 0, rejections: [] });
    const ids = items(store).map((i) => i.id);
    expect(ids).toContain('support/tickets/ticket-1042.txt');
    expect(ids).toContain('onboarding.md');
    expect(ids.some((id) => id.includes('.notes') || id.includes('.drafts'))).toBe(false);
    // Depth first in name order, the same on every machine.
    expect(ids.slice(0, 5)).toEqual([
      'changelog-2024-03.md',
      'faq-billing.md',
      'incidents/2024-02-27-database-failover.md',
      'incidents/2024-03-14-cdn-certificate.md',
      'incidents/2024-03-29-queue-backlog.md',
    ]);
    expect(items(store)[0]!.source).toBe(shownFixture('docs/changelog-2024-03.md'));
  });

  it('a link to a folder of the tree leaves its documents their own ids; a link to a folder outside it is walked', async () => {
    const dir = tempDir();
    const src = join(dir, 'docs');
    mkdirSync(join(src, 'reports'), { recursive: true });
    mkdirSync(join(dir, 'elsewhere'));
    writeFileSync(join(src, 'reports', 'q1.md'), 'first quarter');
    writeFileSync(join(dir, 'elsewhere', 'notes.md'), 'notes from outside');
    // `a-latest` sorts before `reports`, which it points at: walked first, it took the documents'
    // ids (`a-latest/q1.md`), and the real folder was skipped as seen
    symlinkSync('reports', join(src, 'a-latest'));
    symlinkSync(join(dir, 'elsewhere'), join(src, 'b-linked'));
    const store = tempStore();
    expect(await run(store, [src])).toMatchObject({ newItems: 2, rejected: 0 });
    // folders reached through links come after the real ones
    expect(items(store).map((i) => i.id)).toEqual(['reports/q1.md', 'b-linked/notes.md']);
  });

  it('a link to a folder around the one named (a loop up: `loop -> ..`) is not followed, and said; nothing beside the folder is read', async () => {
    const dir = tempDir();
    const src = join(dir, 'odd');
    mkdirSync(join(src, 'deep'), { recursive: true });
    writeFileSync(join(src, 'kept.txt'), 'inside');
    writeFileSync(join(dir, 'outside-private.txt'), 'never named');
    symlinkSync('..', join(src, 'loop'));
    symlinkSync('../../..', join(src, 'deep', 'up-two')); // the folder around that one
    const db = join(dir, 'elsewhere.db');
    const r = await runCli(['enqueue', src, '--db', db, '--json']);
    expect(r.code, r.stderr).toBe(0);
    const skipped = 'a link to a folder around the one named, not followed: only what is inside it is read';
    expect(r.stderr).toContain(`skipped ${src}/loop: ${skipped}\n`);
    expect(r.stderr).toContain(`skipped ${src}/deep/up-two: ${skipped}\n`);
    const store = new SqliteStore(db);
    try {
      expect(items(store).map((i) => i.id)).toEqual(['kept.txt']);
    } finally {
      await store.close();
    }
  });

  it('includes hidden files and folders with hidden: true', async () => {
    const store = tempStore();
    expect(await run(store, [DOCS], { hidden: true })).toMatchObject({ newItems: 25, rejected: 0 });
    expect(items(store).map((i) => i.id)).toEqual(expect.arrayContaining(['.notes.txt', '.drafts/unfinished-roadmap.md']));
  });

  it('takes only files matching --glob patterns', async () => {
    const store = tempStore();
    await run(store, [DOCS], { globs: ['*.txt'] });
    expect(
      items(store)
        .map((i) => i.id)
        .every((id) => id.endsWith('.txt')),
    ).toBe(true);
    expect(count(store, 'items')).toBe(10);
    const other = tempStore();
    await run(other, [DOCS], { globs: ['meetings/*.md', 'support/**/ticket-10[45]*'] });
    expect(items(other).map((i) => i.id)).toEqual([
      'meetings/2024-03-04-planning.md',
      'meetings/2024-03-11-retro.md',
      'meetings/2024-03-18-design-review.md',
      'meetings/2024-04-02-all-hands.md',
      'support/tickets/ticket-1042.txt',
      'support/tickets/ticket-1057.txt',
    ]);
  });

  it('rejects binary, invalid UTF-8, empty and whitespace-only files, naming each, and stores none of them', async () => {
    const store = tempStore();
    const seen: string[] = [];
    const s = await run(store, [fixture('bad')], { onReject: (r) => seen.push(`${r.path}: ${r.reason}`) });
    const bad = shownFixture('bad');
    expect(seen).toEqual([
      `${bad}/binary.bin: an image, not text`,
      `${bad}/empty.txt: empty document`,
      `${bad}/latin1.txt: invalid UTF-8 (save the file as UTF-8; Latin-1 or Windows-1252 text is converted by iconv -f WINDOWS-1252 -t UTF-8)`,
      `${bad}/whitespace.txt: empty document (nothing but whitespace)`,
    ]);
    expect(s).toMatchObject({ documents: 4, rejected: 4, newItems: 0 });
    expect(s.rejections.map((r) => r.line)).toEqual([undefined, undefined, undefined, undefined]);
    expect(count(store, 'items')).toBe(0);
  });

  it('names a gzip file as such, with the way to read it, rather than as binary', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'reviews.jsonl.gz'), gzipSync('{"id":"a","text":"one"}\n'));
    const seen: string[] = [];
    const s = await run(tempStore(), [join(dir, 'reviews.jsonl.gz')], { onReject: (r) => seen.push(r.reason) });
    expect(s).toMatchObject({ documents: 1, rejected: 1, newItems: 0 });
    expect(seen).toEqual([REASON_GZIP]);
    expect(REASON_GZIP).toContain('zcat FILE | llmq enqueue -');
  });

  it('names a PDF, an office document (a zip) and an image as such, rather than as invalid UTF-8 or binary; text that begins like one is text', async () => {
    const dir = tempDir();
    // what such files begin with; a PDF's first bytes are ASCII, and its body breaks UTF-8 further on
    writeFileSync(join(dir, 'report.pdf'), Buffer.concat([Buffer.from('%PDF-1.7\n%'), Buffer.from([0xe2, 0xe3, 0xcf, 0xd3])]));
    writeFileSync(join(dir, 'memo.docx'), Buffer.from([0x50, 0x4b, 0x03, 0x04, 0x14, 0x00, 0x06, 0x00]));
    writeFileSync(join(dir, 'scan.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]));
    writeFileSync(join(dir, 'photo.jpg'), Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10]));
    // text that begins as such files do is text
    writeFileSync(join(dir, 'gif-history.txt'), 'GIF89a added transparency and animation.');
    writeFileSync(join(dir, 'pdf-notes.txt'), '%PDF-1.7 is the version we target.');
    const seen: string[] = [];
    const s = await run(tempStore(), [dir], { onReject: (r) => seen.push(`${basename(r.path)}: ${r.reason}`) });
    expect(seen.sort()).toEqual([
      `memo.docx: ${REASON_ZIP}`,
      `photo.jpg: ${REASON_IMAGE}`,
      `report.pdf: ${REASON_PDF}`,
      `scan.png: ${REASON_IMAGE}`,
    ]);
    expect(s.newItems).toBe(2);
    expect(REASON_PDF).toContain('pdftotext');
  });

  it('names a UTF-16 file as such, with the conversion to make, rather than as binary', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'notes-le.txt'), Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('Meeting notes', 'utf16le')]));
    writeFileSync(join(dir, 'notes-be.txt'), Buffer.from([0xfe, 0xff, 0x00, 0x48, 0x00, 0x69]));
    // UTF-32 (little-endian) begins like UTF-16 and is not it: converting it as UTF-16 would garble it
    writeFileSync(join(dir, 'notes-utf32.txt'), Buffer.from([0xff, 0xfe, 0x00, 0x00, 0x48, 0x00, 0x00, 0x00]));
    const seen: string[] = [];
    await run(tempStore(), [dir], { onReject: (r) => seen.push(r.reason) });
    expect(seen).toEqual([REASON_UTF16, REASON_UTF16, 'binary file (contains NUL bytes)']);
    expect(REASON_UTF16).toBe('UTF-16 text (save the file as UTF-8, e.g. with iconv -f UTF-16 -t UTF-8)');
  });

  it('rejects files over maxDocBytes without reading them, and unreadable files, and keeps the rest', async () => {
    const dir = tempDir();
    const src = join(dir, 'src');
    mkdirSync(src);
    writeFileSync(join(src, 'big.txt'), 'x'.repeat(5000));
    writeFileSync(join(src, 'ok.txt'), 'fine');
    symlinkSync(join(dir, 'nowhere.txt'), join(src, 'broken-link.txt'));
    const store = tempStore(dir);
    const s = await run(store, [src], { maxDocBytes: 4096 });
    expect(s.rejections).toEqual([
      { path: `${src}/big.txt`, id: 'big.txt', reason: 'document is 5,000 bytes, over --max-doc-bytes 4KiB', bytes: 5000 },
      { path: `${src}/broken-link.txt`, reason: 'cannot read (ENOENT: no such file (a broken link?))' },
    ]);
    expect(items(store).map((i) => i.id)).toEqual(['ok.txt']);
  });

  it("skips the queue's own database files and any SQLite database in the folder, without rejecting them", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'note.txt'), 'a real document');
    const store = tempStore(dir); // q.db, with q.db-wal and q.db-shm while it is open, inside the folder
    writeFileSync(join(dir, 'q.db-journal'), 'left over');
    mkdirSync(join(dir, 'sub'));
    symlinkSync(join(dir, 'q.db'), join(dir, 'sub', 'link-to-queue'));
    const other = tempStore(join(dir, 'sub'));
    await other.close(); // another SQLite database, bigger than --max-doc-bytes: skipped, not "too big"
    writeFileSync(join(dir, 'sub', 'q.db-wal'), Buffer.from([0x37, 0x7f, 0x06, 0x82, 0]));
    const skipped: string[] = [];
    const s = await run(store, [dir], { maxDocBytes: 1024, onSkip: (x) => skipped.push(`${x.path.slice(dir.length + 1)}: ${x.skipped}`) });
    expect(s).toMatchObject({ documents: 1, newItems: 1, rejected: 0, skipped: 7 });
    expect(items(store).map((i) => i.id)).toEqual(['note.txt']);
    expect(skipped).toEqual([
      "q.db: part of the queue's own database (--db)",
      "q.db-journal: part of the queue's own database (--db)",
      "q.db-shm: part of the queue's own database (--db)",
      "q.db-wal: part of the queue's own database (--db)",
      "sub/link-to-queue: part of the queue's own database (--db)",
      'sub/q.db: an SQLite database',
      'sub/q.db-wal: part of the SQLite database q.db',
    ]);
  });

  it.skipIf(process.getuid?.() === 0)('rejects a file it has no permission to read (EACCES)', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'secret.txt'), 'no');
    chmodSync(join(dir, 'secret.txt'), 0o000);
    const store = tempStore(tempDir());
    const s = await run(store, [dir]);
    expect(s.rejections).toEqual([{ path: `${dir}/secret.txt`, reason: 'cannot read (EACCES: permission denied)' }]);
  });

  // docs/architecture.md, invariant 4
  it('is idempotent: the same folder again adds no job and no item (invariant 4)', async () => {
    const store = tempStore();
    await run(store, [DOCS]);
    const jobs = async () => (await all(store.copier.dumpJobs())).map(({ key, request, createdAt }) => ({ key, request, createdAt }));
    const before = await jobs();
    const again = await run(store, [DOCS], { now: () => Date.now() + 60_000 });
    expect(again).toMatchObject({ documents: 23, newJobs: 0, newItems: 0, unchanged: 23, updated: 0, rejected: 0 });
    expect(await jobs()).toEqual(before);
  });

  it('moves the item of a changed file to a new job and leaves the others alone', async () => {
    const dir = tempDir();
    cpSync(DOCS, join(dir, 'docs'), { recursive: true });
    const store = tempStore(dir);
    await run(store, [join(dir, 'docs')]);
    const oldKey = items(store).find((i) => i.id === 'faq-billing.md')!.job_key;
    writeFileSync(join(dir, 'docs', 'faq-billing.md'), '# Billing FAQ\n\nRefunds are now possible within 30 days.\n');
    const s = await run(store, [join(dir, 'docs')]);
    expect(s).toMatchObject({ newJobs: 1, newItems: 0, updated: 1, unchanged: 22, rejected: 0 });
    const newKey = items(store).find((i) => i.id === 'faq-billing.md')!.job_key;
    expect(newKey).not.toBe(oldKey);
    expect(JSON.parse((await store.item('faq-billing.md'))!.job.request).messages[0].content).toContain('within 30 days');
  });

  it('gives two documents whose requests are identical one job, and two jobs once the prompt tells them apart', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'd'));
    writeFileSync(join(dir, 'd', 'a.txt'), 'Same words.');
    copyFileSync(join(dir, 'd', 'a.txt'), join(dir, 'd', 'b.txt'));
    const shared = tempStore(dir);
    expect(await run(shared, [join(dir, 'd')])).toMatchObject({ newItems: 2, newJobs: 1 });
    expect(new Set(items(shared).map((i) => i.job_key)).size).toBe(1);
    const apart = tempStore(tempDir());
    expect(await run(apart, [join(dir, 'd')], { request: request('{{id}}: {{text}}') })).toMatchObject({ newItems: 2, newJobs: 2 });
  });

  it('takes a single text file as one document named by its file name', async () => {
    const store = tempStore();
    await run(store, [fixture('docs/support/tickets/ticket-1063.txt')]);
    expect(items(store)).toMatchObject([{ id: 'ticket-1063.txt', source: shownFixture('docs/support/tickets/ticket-1063.txt') }]);
  });

  it('reads a file named beside the folder that holds it once, with its id in the folder; one the walk leaves out as named', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'notes', 'sub'), { recursive: true });
    writeFileSync(join(dir, 'notes', 'n1.txt'), 'one');
    writeFileSync(join(dir, 'notes', 'b.txt'), 'top b');
    writeFileSync(join(dir, 'notes', 'sub', 'b.txt'), 'sub b');
    writeFileSync(join(dir, 'notes', '.hidden.txt'), 'hidden');
    const store = tempStore(dir);
    const notes = join(dir, 'notes');
    // named before and after the folder: read twice, n1.txt was rejected as a duplicate of itself, and
    // sub/b.txt alone (id b.txt) was rejected as a duplicate of notes/b.txt
    const s = await run(store, [join(notes, 'sub', 'b.txt'), notes, join(notes, 'n1.txt'), join(notes, '.hidden.txt')]);
    expect(s).toMatchObject({ documents: 4, newJobs: 4, rejected: 0, rejections: [] });
    expect(items(store).map((i) => i.id)).toEqual(['b.txt', 'n1.txt', 'sub/b.txt', '.hidden.txt']);
    // left out of the walk by --glob, the file named is read by its own name
    const globbed = tempStore(tempDir());
    await run(globbed, [notes, join(notes, 'n1.txt')], { globs: ['sub/*'] });
    expect(items(globbed).map((i) => i.id)).toEqual(['sub/b.txt', 'n1.txt']);
    // skipped by the walk (an llmq export, which it says to name to enqueue), named: read as named, last
    writeFileSync(join(notes, 'results.csv'), `${CSV_COLUMNS.join(',')}\nx,1\n`);
    const exported = tempStore(tempDir());
    const e = await run(exported, [join(notes, 'results.csv'), notes]);
    expect(items(exported).map((i) => i.id)).toEqual(['b.txt', 'n1.txt', 'sub/b.txt', 'results.csv']);
    expect(e).toMatchObject({ documents: 4, newJobs: 4, rejected: 0 });
  });

  it('rejects the second document with an id already seen, naming where the first one was', async () => {
    const dir = tempDir();
    for (const d of ['one', 'two']) {
      mkdirSync(join(dir, d));
      writeFileSync(join(dir, d, 'index.md'), `index of ${d}`);
    }
    const store = tempStore(dir);
    const s = await run(store, [join(dir, 'one'), join(dir, 'two')]);
    expect(s.rejections).toEqual([
      {
        path: `${dir}/two/index.md`,
        line: undefined,
        reason:
          `duplicate id "index.md" (first at ${dir}/one/index.md, which is kept): ` +
          "a file's id is its path inside the folder given, so enqueue the folder that holds both to give each its own",
      },
    ]);
    expect(items(store)).toMatchObject([{ id: 'index.md', source: `${dir}/one/index.md` }]);
  });

  it('renders the system message, model, priority and temperature into the stored job', async () => {
    const store = tempStore();
    await run(store, [fixture('docs/onboarding.md')], {
      request: {
        prompt: parseTemplate('Doc {{id}} at {{path}}: {{text}}'),
        system: parseTemplate('Be brief.'),
        model: 'llama3',
        maxTokens: 99,
        temperature: 0.2,
        priority: -5,
      },
    });
    const [job] = await all(store.copier.dumpJobs());
    expect(job).toMatchObject({ model: 'llama3', priority: -5 });
    const req = JSON.parse(job!.request);
    expect(req).toMatchObject({ model: 'llama3', max_tokens: 99, temperature: 0.2 });
    expect(req.messages[0]).toEqual({ role: 'system', content: 'Be brief.' });
    expect(req.messages[1].content).toMatch(new RegExp(`^Doc onboarding\\.md at ${shownFixture('docs/onboarding.md')}: # Welcome`));
  });

  it('checks every source before writing anything: a missing one is a usage error and nothing is enqueued', async () => {
    const store = tempStore();
    await expect(run(store, [DOCS, '/no/such/folder'])).rejects.toThrow(UsageError);
    await expect(run(store, [DOCS, '/no/such/folder'])).rejects.toThrow(
      'Source not found: /no/such/folder (no such file or folder). Name a folder, a text file, a .jsonl file, or - for stdin.',
    );
    expect(count(store, 'items')).toBe(0);
  });
});

describe('sourcePath', () => {
  it('spells a source inside the current folder relative to it however it was named, any other as named', () => {
    expect(sourcePath('/home/ann/work/notes/', '/home/ann/work')).toBe('notes');
    expect(sourcePath('/home/ann/work/notes/a.md', '/home/ann/work')).toBe('notes/a.md');
    expect(sourcePath('/home/ann/work', '/home/ann/work')).toBe('.');
    expect(sourcePath('./notes//a.md', '/home/ann/work')).toBe('notes/a.md');
    expect(sourcePath('/data/corpus', '/home/ann/work')).toBe('/data/corpus');
    expect(sourcePath('/home/ann/work2/x', '/home/ann/work')).toBe('/home/ann/work2/x');
    expect(sourcePath('../shared/x.jsonl', '/home/ann/work')).toBe('../shared/x.jsonl');
    expect(sourcePath('../work/notes', '/home/ann/work')).toBe('notes'); // out and back in
  });

  it("takes the shell's $PWD for the current folder too when it reaches it through a link", () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'real', 'notes'), { recursive: true });
    symlinkSync(join(dir, 'real'), join(dir, 'link'));
    // process.cwd() is the real path; $PWD/notes, as a shell expands it, goes through the link
    expect(sourcePath(join(dir, 'link', 'notes'), join(dir, 'real'), join(dir, 'link'))).toBe('notes');
    expect(sourcePath(join(dir, 'real', 'notes'), join(dir, 'real'), join(dir, 'link'))).toBe('notes');
    // a $PWD that is another folder is not the current one
    expect(sourcePath(join(dir, 'link', 'notes'), join(dir, 'real'), dir)).toBe(join(dir, 'link', 'notes'));
  });
});
