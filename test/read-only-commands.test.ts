import Database from 'better-sqlite3';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { populate, RUN } from './helpers/populate.js';
import { NO_STATS } from './helpers/stores.js';
import { tempDir } from './helpers/tmp.js';
import { freshSchema, PG_URL, STORE_KINDS, skipUnavailable } from './helpers/stores.js';
import pg from 'pg';

/** The commands that only read a queue, each with the flag that names it. */
const READERS = (db: string) => [
  ['status', '--db', db],
  ['show', 'x', '--db', db],
  ['export', '--db', db],
  ['copy', '--from', db, '--to', `${db}.copy`],
];

describe('read-only commands never create or write a database', () => {
  it('copy --from a mistyped path creates neither database', async () => {
    const dir = tempDir();
    const r = await runCli(['copy', '--from', join(dir, 'typo.db'), '--to', join(dir, 'backup.db')]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/There is no queue at .*typo\.db/);
    expect(readdirSync(dir)).toEqual([]);
  });

  it('a PostgreSQL URL naming a schema with no queue is refused, and no schema or table is created there', async (ctx) => {
    const pgStore = STORE_KINDS.find((k) => k.name === 'postgres')!;
    skipUnavailable(pgStore, ctx);
    const schema = freshSchema();
    const url = `${PG_URL}?schema=${schema}`;
    for (const args of [
      ...READERS(url).filter((a) => a[0] !== 'copy'),
      ['run', '--provider', 'mock', '--db', url],
      ['retry-failed', '--db', url],
    ]) {
      const r = await runCli(args);
      expect(r.code, `${args[0]}: ${r.stderr}`).toBe(1);
      expect(r.stderr).toContain(`There is no llmq queue in schema "${schema}"`);
      // the URL quoted, so the command can be pasted into a shell (`?` is a glob)
      expect(r.stderr).toContain(`Create one with: llmq enqueue <folder|file.jsonl> --db '${url}'`);
    }
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    const made = await client.query('SELECT 1 FROM pg_namespace WHERE nspname = $1', [schema]);
    await client.end();
    expect(made.rows).toEqual([]);
  });

  it('a 0-byte file is refused, not turned into an empty queue', async () => {
    const dir = tempDir();
    const db = join(dir, 'empty.db');
    writeFileSync(db, '');
    for (const args of READERS(db)) {
      const r = await runCli(args);
      expect(r.code, args[0]).toBe(1);
      expect(r.stderr).toMatch(/empty\.db is an empty file, not an llmq queue\. Create one with: llmq enqueue/);
      expect(r.stderr).not.toMatch(/queue is empty/i);
    }
    expect(statSync(db).size).toBe(0);
    expect(readdirSync(dir)).toEqual(['empty.db']);
  });

  it('an SQLite file that is not an llmq queue is refused byte for byte untouched (not even switched to WAL)', async () => {
    const dir = tempDir();
    const other = join(dir, 'other.db');
    const raw = new Database(other);
    raw.exec('CREATE TABLE customers (id INTEGER)');
    raw.close();
    const blank = join(dir, 'blank.db');
    const b = new Database(blank);
    b.pragma('user_version = 7'); // an SQLite header, but no tables
    b.close();
    const before = { other: readFileSync(other), blank: readFileSync(blank) };
    for (const args of [...READERS(other), ['enqueue', other, '--db', other], ['run', '--provider', 'mock', '--db', other]]) {
      const r = await runCli(args);
      expect(r.code, args[0]).toBe(1);
      expect(r.stderr).toMatch(/other\.db is an SQLite database but not an llmq one \(it has a table "customers"\)/);
    }
    for (const args of [
      ['status', '--db', blank],
      ['export', '--db', blank],
    ]) {
      const r = await runCli(args);
      expect(r.code, args[0]).toBe(1);
      expect(r.stderr).toMatch(/blank\.db is an empty SQLite database, not an llmq queue/);
    }
    expect(readFileSync(other).equals(before.other)).toBe(true);
    expect(readFileSync(blank).equals(before.blank)).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['blank.db', 'other.db']);
  });

  it('a URL of another kind (mysql://) is refused, listing what is accepted, and no file is made of it', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a.txt'), 'a document');
    for (const args of [
      ['enqueue', 'a.txt', '--db', 'mysql://x'],
      ['status', '--db', 'mysql://u:secret@h/x'],
      ['copy', '--to', 'sqlite://y.db'],
    ]) {
      const r = await runCli(args, { cwd: dir, env: { LLMQ_DB: 'a.db' } });
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toMatch(
        /--(db|to) (mysql|sqlite):\/\/.*: llmq does not speak (mysql|sqlite):\/\/\. Expected the path of an SQLite file .* or a postgres:\/\/ or postgresql:\/\/ URL/,
      );
      expect(r.stderr).not.toContain('secret');
    }
    expect(readdirSync(dir)).toEqual(['a.txt']);
  });

  it('a real queue still opens for every reader', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    // its run ended: copy refuses a queue a run is working (store-copy.test.ts)
    const store = new SqliteStore(db);
    await store.finishRun(RUN, Date.now(), 'drained', NO_STATS);
    await store.close();
    for (const args of READERS(db).filter((a) => a[0] !== 'show')) {
      const r = await runCli(args);
      expect(r.code, `${args[0]}: ${r.stderr}`).toBe(0);
    }
    expect(existsSync(`${db}.copy`)).toBe(true);
  });
});
