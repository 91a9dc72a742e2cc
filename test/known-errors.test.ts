import { chmodSync, closeSync, copyFileSync, mkdirSync, openSync, statSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { LlmqError } from '../src/errors.js';
import { knownError } from '../src/errors-known.js';
import { withKnownErrors } from '../src/store/known-errors.js';
import type { Store } from '../src/store/types.js';
import { runCli, runCliInShell, type CliOptions } from './helpers/cli.js';
import { populate } from './helpers/populate.js';
import { PG_URL } from './helpers/stores.js';
import { tempDir } from './helpers/tmp.js';
import { waitForLine } from './helpers/wait.js';

const errno = (code: string, extra: object = {}) => Object.assign(new Error(`${code}: some text`), { code, ...extra });
const sqlite = (code: string, message: string) => Object.assign(new Error(message), { code });
const DB = { what: 'the database', path: 'q.db' };

/** Exactly one line on stderr, no stack trace. */
/** A queue of one document, and another document beside it (`b.txt`) for an enqueue to write. */
async function queueAndOneMoreDocument(): Promise<{ dir: string; db: string }> {
  const dir = tempDir();
  writeFileSync(join(dir, 'a.txt'), 'a document');
  const db = join(dir, 'q.db');
  expect((await runCli(['enqueue', join(dir, 'a.txt'), '--db', db])).code).toBe(0);
  writeFileSync(join(dir, 'b.txt'), 'another document');
  return { dir, db };
}

function oneLine(stderr: string): string {
  expect(stderr).not.toMatch(/unexpected error|\n\s+at /);
  expect(stderr.trimEnd().split('\n')).toHaveLength(1);
  return stderr;
}

describe('known failures become one line that says what, where and what to do', () => {
  const cases: Array<[Error & { code: string }, { what: string; path: string }, RegExp]> = [
    [errno('EACCES'), DB, /^Permission denied for the database q\.db \(EACCES\)\. Check the permissions/],
    [errno('EPERM'), DB, /^Permission denied for the database q\.db \(EPERM\)/],
    [
      errno('EROFS'),
      { what: '--out', path: '/mnt/r.jsonl' },
      /^--out \/mnt\/r\.jsonl is on a read-only file system \(EROFS\)\. Use a path on a writable disk/,
    ],
    [errno('ENOTDIR'), DB, /^Cannot use the database q\.db: a part of that path is a file, not a folder/],
    [errno('EEXIST', { syscall: 'mkdir' }), DB, /a part of that path is a file, not a folder/],
    [errno('EISDIR'), { what: '--out', path: 'docs' }, /^--out docs is a folder\. Give the path of a file/],
    [errno('ENOSPC'), { what: 'standard output', path: '' }, /^No space left for standard output \(ENOSPC\)\. Free some space/],
    [errno('EDQUOT'), DB, /^No space left for the database q\.db \(EDQUOT: over the disk quota\)/],
    [
      sqlite('SQLITE_READONLY', 'attempt to write a readonly database'),
      DB,
      /^The database q\.db is read-only \(attempt to write a readonly database\)\. Make the file and its folder writable, or work on a copy of the file: cp q\.db \/tmp\/llmq-copy\.db \(and its -wal file, if it has one, to \/tmp\/llmq-copy\.db-wal\), then --db \/tmp\/llmq-copy\.db\.$/,
    ],
    [sqlite('SQLITE_READONLY_DBMOVED', 'attempt to write a readonly database'), DB, /is read-only/],
    [
      sqlite('SQLITE_CANTOPEN', 'unable to open database file'),
      DB,
      /^Cannot open the database q\.db \(unable to open database file\)\. Check that its folder exists/,
    ],
    [
      sqlite('SQLITE_CORRUPT', 'database disk image is malformed'),
      DB,
      /^The database q\.db is damaged \(database disk image is malformed\)\. Restore it from a backup, or save what is readable: sqlite3 q\.db \.recover/,
    ],
    [sqlite('SQLITE_CORRUPT_INDEX', 'database disk image is malformed'), DB, /is damaged/],
    [
      sqlite('SQLITE_NOTADB', 'file is not a database'),
      DB,
      /^The database q\.db is not an SQLite database \(file is not a database\)\. Point --db/,
    ],
    [
      sqlite('SQLITE_BUSY', 'database is locked'),
      DB,
      /^The database q\.db is locked by another program \(SQLITE_BUSY\) and stayed so past llmq's wait\. Nothing is lost: .*Run the command again once/,
    ],
    [
      sqlite('SQLITE_FULL', 'database or disk is full'),
      DB,
      /^No space left for the database q\.db \(SQLITE_FULL\)\. .*what was committed before is kept/,
    ],
    [sqlite('SQLITE_IOERR_WRITE', 'disk I/O error'), DB, /^A disk error on the database q\.db \(SQLITE_IOERR_WRITE: disk I\/O error\)/],
  ];
  it.each(cases.map(([error, place, expected]) => ({ code: error.code, error, place, expected })))(
    'maps $code to one line with the path and the fix',
    ({ error, place, expected }) => {
      const mapped = knownError(error, place);
      expect(mapped).toBeInstanceOf(LlmqError);
      expect(mapped!.exitCode).toBe(1);
      expect(mapped!.message).toMatch(expected);
      expect(mapped!.message).not.toContain('\n');
      expect(mapped!.cause).toBe(error);
    },
  );

  it('names the path an fs error carries when no place is given; leaves other errors alone', () => {
    expect(knownError(errno('EACCES', { path: '/x/y' }))!.message).toMatch(/^Permission denied for the file \/x\/y/);
    expect(knownError(sqlite('SQLITE_READONLY', 'readonly'))!.message).toMatch(/^The database is read-only/);
    expect(knownError(errno('EEXIST', { syscall: 'open' }))).toBeNull();
    expect(knownError(errno('ECONNRESET'))).toBeNull();
    // PostgreSQL ending the connection under a command (a restart, pg_terminate_backend) is no bug
    const ended = Object.assign(new Error('terminating connection due to administrator command'), { code: '57P01' });
    expect(knownError(ended)!.message).toMatch(/^Lost the connection to PostgreSQL \(terminating connection.*Run the command again/);
    // the run hands its jobs back when it still can: "as their leases run out (a minute)" was seldom so
    expect(knownError(ended)!.message).toContain('at once if it could still reach PostgreSQL to hand them back');
    expect(knownError(new Error('Connection terminated unexpectedly'))!.message).toMatch(/^Lost the connection to PostgreSQL/);
    expect(knownError(new TypeError('a bug'))).toBeNull();
    expect(knownError(new LlmqError('already worded'))).toBeNull();
    expect(knownError('a string')).toBeNull();
  });

  it('--db naming a folder suggests a file in it, with one slash however the folder was written', () => {
    const dir = tempDir();
    for (const path of [dir, `${dir}/`, `${dir}//`])
      expect(knownError(sqlite('SQLITE_CANTOPEN', 'unable to open database file'), { what: 'the database', path })!.message).toMatch(
        new RegExp(`is a folder\\. Give the path of a database file, e\\.g\\. ${dir}/llmq\\.db\\.$`),
      );
  });

  it('status --db naming a folder (as a shell completes it, with its slash) suggests a file in it with one slash', async () => {
    const dir = tempDir();
    const r = await runCli(['status', '--db', `${dir}/`]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`is a folder, not a queue. Point --db at the database file in it (e.g. ${dir}/llmq.db).`);
  });

  it('a store maps failures from a method, its promise and its row stream, naming the database', async () => {
    const readonly = () => sqlite('SQLITE_READONLY', 'attempt to write a readonly database');
    const fake = {
      location: 'q.db',
      retryFailed: async () => {
        throw readonly();
      },
      enqueueSync: () => {
        throw readonly();
      },
      async *exportPages() {
        yield [1];
        throw sqlite('SQLITE_CORRUPT', 'database disk image is malformed');
      },
      status: async () => {
        throw new TypeError('a bug stays a bug');
      },
    };
    const store = withKnownErrors(fake as unknown as Store, 'q.db') as unknown as typeof fake;
    expect(store.location).toBe('q.db');
    await expect(store.retryFailed()).rejects.toThrow(/^The database q\.db is read-only/);
    expect(() => store.enqueueSync()).toThrow(/^The database q\.db is read-only/);
    const seen: unknown[] = [];
    await expect(
      (async () => {
        for await (const page of store.exportPages()) seen.push(...page);
      })(),
    ).rejects.toThrow(/^The database q\.db is damaged/);
    expect(seen).toEqual([1]);
    await expect(store.status()).rejects.toThrow(TypeError);
  });
});

/** As root, permissions stop nobody: run the CLI as `nobody` then, so a read-only file really is one. */
function unprivileged(dir: string): CliOptions {
  chmodSync(dir, 0o755);
  return process.getuid?.() === 0 ? { user: { uid: 65534, gid: 65534 } } : {};
}

describe('ordinary mistakes are one line and exit 1, not a stack trace', () => {
  it('a read-only database file, or one in a read-only folder: enqueue, run and retry-failed say so', async () => {
    const dir = tempDir();
    const { db } = await populate(dir, { finished: true });
    const docs = join(dir, 'docs');
    mkdirSync(docs);
    writeFileSync(join(docs, 'a.txt'), 'a document');
    const roFolder = join(dir, 'ro');
    mkdirSync(roFolder);
    copyFileSync(db, join(roFolder, 'q.db'));
    const as = unprivileged(dir);
    chmodSync(dir, 0o777); // the file's folder is writable: only the file is read-only
    chmodSync(db, 0o444);
    chmodSync(roFolder, 0o555);
    chmodSync(join(roFolder, 'q.db'), as.user ? 0o644 : 0o444);
    for (const target of [db, join(roFolder, 'q.db')]) {
      for (const args of [['enqueue', docs], ['run', '--provider', 'mock', '--progress', 'none'], ['retry-failed']]) {
        const r = await runCli([...args, '--db', target], as);
        expect(r.code, `${args[0]} ${target}`).toBe(1);
        expect(oneLine(r.stderr)).toMatch(
          target === db
            ? /^error: The database .*q\.db is read-only \(.*\)\. Make the file and its folder writable/
            : // the folder is what stops it: SQLite makes the -shm there
              /^error: The folder .*\/ro is not writable for you, and SQLite must create q\.db-shm there to open .*\/ro\/q\.db, even to read it\. Make the folder writable, or work on a copy: cp /,
        );
      }
    }
    chmodSync(roFolder, 0o755); // so the temp folder can be removed
  });

  it('a database another program holds locked past the wait: enqueue says so in one line (it was "unexpected error")', {
    timeout: 30_000,
  }, async () => {
    const { dir, db } = await queueAndOneMoreDocument();
    const { default: Database } = await import('better-sqlite3');
    const other = new Database(db);
    other.prepare('BEGIN IMMEDIATE').run();
    try {
      const r = await runCli(['enqueue', join(dir, 'b.txt'), '--db', db]);
      expect(r.code).toBe(1);
      expect(oneLine(r.stderr)).toMatch(
        /^error: The database .*q\.db is locked by another program \(SQLITE_BUSY\) and stayed so past llmq's wait\./,
      );
    } finally {
      other.prepare('COMMIT').run();
      other.close();
    }
  });

  it('a run of this machine stopped (SIGSTOP) inside a write: the error names its pid and how to let it go on, not "another program"', {
    timeout: 30_000,
  }, async () => {
    const { dir, db } = await queueAndOneMoreDocument();
    // a stand-in for `llmq run` stopped by Ctrl-Z mid-transaction: its row in runs, the write lock, then stopped
    const script = `
      const Database = require('better-sqlite3');
      const db = new Database(process.argv[1]);
      const now = Date.now();
      db.prepare("INSERT INTO runs (id, host, pid, started_at, heartbeat_at, options) VALUES ('stopped-run', ?, ?, ?, ?, '{}')")
        .run(require('node:os').hostname(), process.pid, now, now);
      db.prepare('BEGIN IMMEDIATE').run();
      process.stdout.write('held\\n');
      process.kill(process.pid, 'SIGSTOP');`;
    const holder = spawn(process.execPath, ['-e', script, db], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await waitForLine(holder, 'stdout', /^held$/);
      const r = await runCli(['enqueue', join(dir, 'b.txt'), '--db', db]);
      expect(r.code).toBe(1);
      expect(oneLine(r.stderr)).toContain(
        `is locked (SQLITE_BUSY) and stayed so past llmq's wait: llmq run pid ${holder.pid} on this machine is stopped (Ctrl-Z or SIGSTOP), ` +
          `most likely inside a write to it: fg in its terminal, or kill -CONT ${holder.pid}, lets it go on and let go of the queue.`,
      );
    } finally {
      holder.kill('SIGKILL');
    }
  });

  it('--db whose parent is a regular file', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'file'), 'x');
    writeFileSync(join(dir, 'a.txt'), 'a document');
    for (const db of [join(dir, 'file', 'q.db'), join(dir, 'file', 'deeper', 'q.db')]) {
      const r = await runCli(['enqueue', join(dir, 'a.txt'), '--db', db]);
      expect(r.code).toBe(1);
      expect(oneLine(r.stderr)).toMatch(/^error: Cannot use the database .*file\/.*q\.db: a part of that path is a file, not a folder/);
    }
  });

  // Node 20's recursive mkdir loops forever when a folder cannot be made although its parent
  // exists; under /proc every new folder is such a case. Each of these hung at 100% CPU.
  it.skipIf(process.platform !== 'linux')('a folder that cannot be made (under /proc) is an error, not a hang', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a.txt'), 'a document');
    const { db } = await populate(dir);
    const tries: Array<[string[], RegExp]> = [
      [
        ['enqueue', join(dir, 'a.txt'), '--db', '/proc/llmq-nope/q.db'],
        /^error: Cannot make the folder for the database \/proc\/llmq-nope\/q\.db \(ENOENT/,
      ],
      [
        ['export', '--db', db, '--out', '/proc/llmq-nope/x.jsonl'],
        /^error: Cannot make the folder for --out \/proc\/llmq-nope\/x\.jsonl \(ENOENT/,
      ],
      [
        ['export', '--db', db, '--out-dir', '/proc/llmq-nope/answers'],
        /^error: Cannot make the folder for --out-dir \/proc\/llmq-nope\/answers \(ENOENT/,
      ],
    ];
    for (const [args, message] of tries) {
      const r = await runCli(args, { timeoutMs: 15_000 });
      expect(r.code, args.join(' ')).toBe(1);
      expect(oneLine(r.stderr)).toMatch(message);
    }
    // the prices cache: nothing to report, the status is all there
    const r = await runCli(['status', '--json', '--db', db], { env: { XDG_CACHE_HOME: '/proc/llmq-nope' }, timeoutMs: 15_000 });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout).total).toBeGreaterThan(0);
  });

  it('--db through a dangling symlink is one line, not a bug report', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a.txt'), 'a document');
    symlinkSync(join(dir, 'nowhere'), join(dir, 'link'));
    const r = await runCli(['enqueue', join(dir, 'a.txt'), '--db', join(dir, 'link', 'q.db')]);
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toMatch(/^error: Cannot use the database .*link\/q\.db: a part of that path is a file, not a folder/);
  });

  it('a current folder that was removed is named as the cause, not reported as a bug', async () => {
    const gone = join(tempDir(), 'gone');
    mkdirSync(gone);
    const r = await runCliInShell(`cd "${gone}" && rmdir "${gone}" && echo '{"id":"a","text":"x"}' | llmq enqueue - --db sub/q.db`);
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toBe(
      'error: The current folder no longer exists (it was removed or moved). Change to a folder that exists and run the command again.\n',
    );
  });

  it('ENOSPC on standard output (export > /dev/full)', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const r = await runCliInShell(`llmq export --db "${db}" > /dev/full`);
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toBe('error: No space left for standard output (ENOSPC). Free some space and run the command again.\n');
  });

  it('a damaged database is reported, never written into: garbage pages in the middle, or after the header', async () => {
    const dir = tempDir();
    const { db } = await populate(dir, { finished: true });
    // Enough rows that the middle of the file is table pages no enqueue or status query touches.
    const { SqliteStore } = await import('../src/store/sqlite/store.js');
    const { docRow } = await import('./helpers/populate.js');
    const store = new SqliteStore(db);
    await store.enqueue(
      Array.from({ length: 2000 }, (_, i) => docRow(`bulk/${i}`, `bulk document ${i} `.repeat(20))),
      1,
    );
    await store.close();
    const size = statSync(db).size;
    const fd = openSync(db, 'r+');
    writeSync(fd, Buffer.alloc(3 * 4096, 0xa5), 0, 3 * 4096, Math.floor(size / 2 / 4096) * 4096);
    closeSync(fd);
    writeFileSync(join(dir, 'new.txt'), 'a new document');
    const before = statSync(db);
    const r = await runCli(['enqueue', join(dir, 'new.txt'), '--db', db]);
    expect(r.code).toBe(1);
    expect(oneLine(r.stderr)).toMatch(
      /^error: The database .*q\.db is damaged \(database disk image is malformed.*\)\. Restore it from a backup/,
    );
    expect(statSync(db).mtimeMs).toBe(before.mtimeMs);

    const headerOnly = join(dir, 'torn.db');
    writeFileSync(headerOnly, Buffer.concat([Buffer.from('SQLite format 3\0', 'latin1'), Buffer.alloc(84 + 4096, 0x5a)]));
    for (const args of [['status'], ['export'], ['enqueue', join(dir, 'new.txt')]]) {
      const t = await runCli([...args, '--db', headerOnly]);
      expect(t.code, args[0]).toBe(1);
      expect(oneLine(t.stderr)).toMatch(/torn\.db is (damaged|not an SQLite database)/);
    }
  });

  it('PostgreSQL with sslmode=require against a server without SSL', async (ctx) => {
    const probe = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
    const reachable = await probe.connect().then(
      () => true,
      () => false,
    );
    const ssl = reachable ? (await probe.query<{ ssl: string }>('SHOW ssl')).rows[0]!.ssl : 'unknown';
    await probe.end().catch(() => {});
    if (!reachable || ssl !== 'off') ctx.skip(`needs a PostgreSQL without SSL at ${PG_URL}`);
    const url = new URL(PG_URL);
    url.password = 'hunter2';
    url.searchParams.set('sslmode', 'require');
    const r = await runCli(['status', '--db', url.toString()]);
    expect(r.code).toBe(1);
    const lines = r.stderr
      .trimEnd()
      .split('\n')
      .filter((l) => l.startsWith('error:'));
    expect(lines).toHaveLength(1);
    expect(r.stderr).not.toMatch(/unexpected error|hunter2/);
    expect(lines[0]).toMatch(/^error: Cannot connect to PostgreSQL at .*:\*\*\*@.*: the server does not support SSL.*Remove sslmode/);
  });
});
