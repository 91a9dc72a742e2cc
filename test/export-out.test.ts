import Database from 'better-sqlite3';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { runCli, runCliInShell } from './helpers/cli.js';
import { docRow, populate } from './helpers/populate.js';
import { tempDir } from './helpers/tmp.js';

/** A queue whose items (with these ids) are all answered "answer to <id>". */
async function answered(dir: string, ids: readonly string[]): Promise<string> {
  const db = join(dir, 'q.db');
  const store = new SqliteStore(db);
  const rows = ids.map((id) => docRow(id, `text of ${id}`));
  await store.enqueue(rows, 1);
  await store.claim({ owner: 'r', limit: 100, now: 2, leaseUntil: Date.now() + 60_000, maxAttempts: 3 });
  for (const r of rows) {
    const usage = { promptTokens: 1, completionTokens: 1 };
    await store.complete(r.key, {
      owner: 'r',
      output: `answer to ${r.itemId}`,
      response: '{}',
      usage,
      attempt: { key: r.key, runId: 'r', attempt: 1, startedAt: 3, endedAt: 4, status: 200, outcome: 'done', error: null, usage },
    });
  }
  await store.close();
  return db;
}

function itemCount(db: string): number {
  const d = new Database(db, { readonly: true });
  try {
    return d.prepare('SELECT count(*) FROM items').pluck().get() as number;
  } finally {
    d.close();
  }
}

/** Exactly one line on stderr, no stack trace. */
function oneLine(stderr: string): string {
  expect(stderr).not.toMatch(/unexpected error|\n\s+at /);
  expect(stderr.trimEnd().split('\n')).toHaveLength(1);
  return stderr;
}

describe('export never writes over a database', () => {
  it('refuses its own database, its -wal/-shm/-journal, a symlink to it, and any other SQLite file', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    symlinkSync('q.db', join(dir, 'link.db'));
    const other = join(dir, 'other.sqlite');
    new Database(other).exec('CREATE TABLE t (x)');
    const before = readFileSync(other);
    for (const out of [db, `${db}-wal`, `${db}-shm`, `${db}-journal`, join(dir, '.', 'q.db'), join(dir, 'link.db')]) {
      const r = await runCli(['export', '--db', db, '--out', out]);
      expect(r.code, out).toBe(1);
      expect(oneLine(r.stderr)).toMatch(/--out .* is the queue's own database file .*never writes over it/);
    }
    const r = await runCli(['export', '--db', db, '--out', other]);
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toMatch(/--out .*other\.sqlite is an SQLite database; export never writes over one/);
    expect(readFileSync(other).equals(before)).toBe(true);
    expect(itemCount(db)).toBe(10);
    expect(lstatSync(join(dir, 'link.db')).isSymbolicLink()).toBe(true);
  });
});

describe('--out writes into what it names and never replaces it', () => {
  it('writes over an earlier export of any format, never over another file (the JSONL the queue was enqueued from)', async () => {
    const dir = tempDir();
    const input = join(dir, 'r.jsonl');
    writeFileSync(input, '{"id":"r1","text":"one"}\n{"id":"r2","text":"two"}\n');
    const db = join(dir, 'q.db');
    expect((await runCli(['enqueue', input, '--db', db])).code).toBe(0);
    const r = await runCli(['export', '--db', db, '--out', input]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `--out ${input} is there already and is not an llmq export (it begins "{\\"id\\":\\"r1\\",\\"text\\":\\"one\\"}"): it may be an input`,
    );
    expect(readFileSync(input, 'utf8')).toBe('{"id":"r1","text":"one"}\n{"id":"r2","text":"two"}\n');
    for (const format of ['jsonl', 'csv', 'openai-batch']) {
      const out = join(dir, `results.${format}`);
      for (let n = 0; n < 2; n++) expect((await runCli(['export', '--db', db, '--out', out, '--format', format])).code, format).toBe(0);
    }
    // a CSV export saved again by a spreadsheet (Excel's "CSV UTF-8" puts a BOM first) is still one
    const csv = join(dir, 'results.csv');
    writeFileSync(csv, `\uFEFF${readFileSync(csv, 'utf8')}`);
    const again = await runCli(['export', '--db', db, '--out', csv, '--format', 'csv']);
    expect(again.code, again.stderr).toBe(0);
    expect(readFileSync(csv, 'utf8').startsWith('\uFEFF')).toBe(false);
  });

  it('follows a symlink to its file (also one not there yet) and leaves the link in place', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    mkdirSync(join(dir, 'real'));
    // an earlier export, written over (a file that is not one is refused, below)
    expect((await runCli(['export', '--db', db, '--out', join(dir, 'real', 'results.jsonl'), '--state', 'done'])).code).toBe(0);
    symlinkSync(join(dir, 'real', 'results.jsonl'), join(dir, 'link'));
    symlinkSync(join('real', 'new.jsonl'), join(dir, 'dangling'));
    for (const [out, target] of [
      ['link', 'results.jsonl'],
      ['dangling', 'new.jsonl'],
    ] as const) {
      const r = await runCli(['export', '--db', db, '--out', join(dir, out)]);
      expect(r.code).toBe(0);
      expect(lstatSync(join(dir, out)).isSymbolicLink()).toBe(true);
      expect(
        readFileSync(join(dir, 'real', target), 'utf8')
          .trimEnd()
          .split('\n'),
      ).toHaveLength(10);
    }
    // the temp file went beside the target, and was renamed away
    expect(readdirSync(join(dir, 'real')).sort()).toEqual(['new.jsonl', 'results.jsonl']);
  });

  it('writes a FIFO and a process substitution through, without replacing them', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const fifo = join(dir, 'fifo');
    execFileSync('mkfifo', [fifo]);
    const r = await runCliInShell(`cat "${fifo}" > "${dir}/from-fifo" & llmq export --db "${db}" --out "${fifo}"; wait
      llmq export --db "${db}" --out >(cat > "${dir}/from-pipe"); sleep 0.3`);
    expect(r.stderr).not.toMatch(/unexpected error/);
    expect(r.code).toBe(0);
    expect(statSync(fifo).isFIFO()).toBe(true);
    expect(readFileSync(join(dir, 'from-fifo'), 'utf8').trimEnd().split('\n')).toHaveLength(10);
    expect(readFileSync(join(dir, 'from-pipe'), 'utf8').trimEnd().split('\n')).toHaveLength(10);
  });

  it('writes a device through: a full device stays a device and its ENOSPC is one line, exit 1', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    // As root a regression would replace the device node, so root gets its own /dev/full in the temp
    // folder; anyone else cannot replace /dev/full itself.
    const full = process.getuid?.() === 0 ? join(dir, 'full') : '/dev/full';
    if (full !== '/dev/full') execFileSync('mknod', ['-m', '666', full, 'c', '1', '7']);
    const r = await runCli(['export', '--db', db, '--out', full]);
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toMatch(/^error: No space left for --out .*full \(ENOSPC\)\. Free some space/);
    expect(statSync(full).isCharacterDevice()).toBe(true);
  });

  it('refuses a directory, naming --out-dir', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const r = await runCli(['export', '--db', db, '--out', dir]);
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toMatch(/--out .* is a directory; give a file path, or use --out-dir/);
    expect(readdirSync(dir)).toEqual(['q.db']);
  });
});

describe('export --out-dir', () => {
  it('marks a folder of its own answers once, and leaves a mark that is there as it is (another user may own it)', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const out = join(dir, 'answers');
    expect((await runCli(['export', '--db', db, '--out-dir', out])).code).toBe(0);
    expect(readFileSync(join(out, '.llmq-answers'), 'utf8')).toContain('llmq export --out-dir');
    writeFileSync(join(out, '.llmq-answers'), 'kept as it is\n');
    const again = await runCli(['export', '--db', db, '--out-dir', out]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).not.toContain('warning');
    expect(readFileSync(join(out, '.llmq-answers'), 'utf8')).toBe('kept as it is\n');
  });

  it('gives colliding ids distinct names and writes every item, the same way again on a second export', async () => {
    const dir = tempDir();
    // a.out is a's file, then a folder for a.out/b; x.out is x.out/y's folder, then x's file; the last id
    // spells the very path a.out/b is moved to
    const ids = ['a', 'a.out/b', 'x.out/y', 'x', 'plain/c', `a.out~${createHash('sha256').update('a.out/b').digest('hex').slice(0, 8)}/b`];
    const db = await answered(dir, ids);
    const out = join(dir, 'answers');
    for (let round = 0; round < 2; round++) {
      const r = await runCli(['export', '--db', db, '--out-dir', out]);
      expect(r.stderr).not.toMatch(/unexpected error|EEXIST|EISDIR/);
      expect(r.code).toBe(0);
      expect(r.stderr).toMatch(/wrote 6 answer files/);
      expect(r.stderr).toMatch(/item "a\.out\/b" went to .*a\.out~[0-9a-f]{8}\/b\.out/);
      expect(r.stderr).toMatch(/item "x" went to .*x~[0-9a-f]{8}\.out/);
    }
    const files = (readdirSync(out, { recursive: true }) as string[]).filter(
      (f) => statSync(join(out, f)).isFile() && f !== '.llmq-answers',
    );
    const texts = files.map((f) => readFileSync(join(out, f), 'utf8')).sort();
    expect(texts).toEqual(ids.map((id) => `answer to ${id}`).sort());
    expect(readFileSync(join(out, 'a.out'), 'utf8')).toBe('answer to a');
    expect(readFileSync(join(out, 'x.out', 'y.out'), 'utf8')).toBe('answer to x.out/y');
    expect(readFileSync(join(out, 'plain', 'c.out'), 'utf8')).toBe('answer to plain/c');
  });

  it('refuses an --ext that holds a path separator or .., naming the flag and the value, and writes nothing', async () => {
    const dir = tempDir();
    const db = await answered(dir, ['a']);
    for (const ext of ['/../../x', 'a/b', '..', 'x\\y']) {
      const r = await runCli(['export', '--db', db, '--out-dir', join(dir, 'answers'), '--ext', ext]);
      expect(r.code, ext).toBe(1);
      expect(oneLine(r.stderr)).toContain(`--ext '${ext}'`);
    }
    expect(existsSync(join(dir, 'answers'))).toBe(false);
    expect(readdirSync(dir)).toEqual(['q.db']);
  });
});
