import Database from 'better-sqlite3';
import { statSync } from 'node:fs';
import { makeDirs } from '../../make-dirs.js';
import { dirname } from 'node:path';
import { StoreError } from '../../errors.js';
import { LATEST_VERSION, MIGRATIONS } from './migrations.js';

export type Db = Database.Database;

export interface OpenSqliteOptions {
  /** The file must already be an llmq database: never create one, never write into another file. */
  readonly existing?: boolean;
}

/**
 * A database up to this size has its structure checked on every open (`PRAGMA quick_check` reads
 * every page: about 3 ms per MiB), so damage is reported before anything is written into it. A
 * bigger one is not read whole on each command; damage there is reported when a query meets it.
 */
export const QUICK_CHECK_MAX_BYTES = 32 * 1024 * 1024;

/**
 * Open (creating if needed) an llmq SQLite database: WAL mode so readers (`status`) never block
 * the writer, a busy timeout so several runs can share the file, and the schema migrated forward.
 * Errors with a known cause (permissions, a full disk, damage) are left for `knownError` to word.
 */
export function openSqlite(path: string, options: OpenSqliteOptions = {}): Db {
  const memory = path === ':memory:';
  if (!memory && !options.existing) makeDirs(dirname(path));
  const db = new Database(path, { fileMustExist: options.existing ?? false });
  try {
    db.pragma('busy_timeout = 10000');
    // Before the first write (WAL mode is one): someone else's file must stay as it was.
    refuseForeign(db, path, options.existing ?? false);
    db.pragma('journal_mode = WAL');
    // NORMAL in WAL mode is durable across process crashes (only an OS crash can lose the last commits).
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
    if (!memory) checkStructure(db, path);
    migrate(db, path);
    // A bulk load in progress has dropped jobs_key, which items' foreign key needs: with the check
    // on, even preparing a statement that deletes jobs fails. Nothing here writes until the load is
    // finished (settleBulkLoad refuses or finishes it, and turns the check back on).
    if (db.prepare('SELECT 1 FROM bulk_load').get()) db.pragma('foreign_keys = OFF');
  } catch (error) {
    db.close();
    throw error;
  }
  return db;
}

/** Refuse a database that is not llmq's (or, for `existing`, one with no llmq tables yet) before writing to it. */
function refuseForeign(db: Db, path: string, existing: boolean): void {
  const hasLog = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'llmq_migrations'").get();
  if (hasLog) return;
  const foreign = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' LIMIT 1").get() as
    | { name: string }
    | undefined;
  if (foreign) {
    throw new StoreError(
      `${path} is an SQLite database but not an llmq one (it has a table "${foreign.name}"). Point --db at an llmq database or a new file.`,
    );
  }
  if (existing) {
    throw new StoreError(
      `${path} is an empty SQLite database, not an llmq queue. Create one with: llmq enqueue <folder|file.jsonl> --db ${path}`,
    );
  }
}

/** Damage found now is reported now, rather than after new work was added to a broken file. */
function checkStructure(db: Db, path: string): void {
  let bytes = 0;
  for (const file of [path, `${path}-wal`]) bytes += statSync(file, { throwIfNoEntry: false })?.size ?? 0;
  if (bytes > QUICK_CHECK_MAX_BYTES) return;
  const result = db.pragma('quick_check(1)', { simple: true }) as string;
  if (result === 'ok') return;
  // One line for the message: the first problem, without SQLite's "*** in database main ***" banner.
  const first = result.split('\n').find((line) => line.trim() && !line.startsWith('***')) ?? result;
  throw Object.assign(new Error(`database disk image is malformed: ${first.trim()}`), { code: 'SQLITE_CORRUPT' });
}

/** Apply every migration newer than the database, each in its own transaction. */
export function migrate(db: Db, path: string): void {
  db.exec(`CREATE TABLE IF NOT EXISTS llmq_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    applied_at INTEGER NOT NULL
  )`);
  const current = (db.prepare('SELECT max(version) AS v FROM llmq_migrations').get() as { v: number | null }).v ?? 0;
  if (current > LATEST_VERSION) {
    throw new StoreError(
      `${path} was written by a newer llmq (schema version ${current}; this llmq knows up to ${LATEST_VERSION}). Upgrade llmq to use it.`,
    );
  }
  for (const m of MIGRATIONS) {
    if (m.version <= current) continue;
    // The pragma is a no-op inside a transaction: set it around one.
    const keysWere = db.pragma('foreign_keys', { simple: true }) as number;
    if (m.rebuildsTables) db.pragma('foreign_keys = OFF');
    try {
      db.transaction(() => {
        // Another process may have migrated between our read and this write lock.
        const done = db.prepare('SELECT 1 FROM llmq_migrations WHERE version = ?').get(m.version);
        if (done) return;
        const blocked = m.blockedBy?.(db, Date.now());
        if (blocked) throw new StoreError(`${path}: ${blocked}`);
        db.exec(m.sql);
        m.apply?.(db);
        if (m.rebuildsTables) {
          const broken = db.pragma('foreign_key_check') as Array<{ table: string }>;
          if (broken.length > 0) {
            throw new StoreError(
              `${path}: migration ${m.version} (${m.name}) would leave ${broken.length} rows of ${broken[0]!.table} pointing at nothing; nothing was changed. Report this as an llmq bug.`,
            );
          }
        }
        db.prepare('INSERT INTO llmq_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
      }).immediate();
    } finally {
      if (m.rebuildsTables) db.pragma(`foreign_keys = ${keysWere ? 'ON' : 'OFF'}`);
    }
  }
}

/**
 * `fn` as an IMMEDIATE transaction, made once and called often. better-sqlite3's `transaction()`
 * builds four wrapper functions and their properties each time it is called (about 5 us, more than
 * a short transaction's own statements), so the paths taken per request make theirs once.
 */
export function immediateTxn<A extends unknown[], R>(db: Db, fn: (...args: A) => R): (...args: A) => R {
  return db.transaction(fn).immediate;
}
