import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { StoreError } from '../../errors.js';
import { LATEST_VERSION, MIGRATIONS } from './migrations.js';

export type Db = Database.Database;

/**
 * Open (creating if needed) an llmq SQLite database: WAL mode so readers (`status`) never block
 * the writer, a busy timeout so several runs can share the file, and the schema migrated forward.
 */
export function openSqlite(path: string, options: { readonly?: boolean } = {}): Db {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  let db: Db;
  try {
    db = new Database(path, { fileMustExist: options.readonly ?? false });
  } catch (error) {
    throw new StoreError(`Cannot open database ${path}: ${(error as Error).message}. Check the path given to --db (or LLMQ_DB).`, { cause: error });
  }
  try {
    db.pragma('busy_timeout = 10000');
    db.pragma('journal_mode = WAL');
    // NORMAL in WAL mode is durable across process crashes (only an OS crash can lose the last commits).
    db.pragma('synchronous = NORMAL');
    db.pragma('foreign_keys = ON');
    migrate(db, path);
  } catch (error) {
    db.close();
    if (error instanceof StoreError) throw error;
    const code = (error as { code?: string }).code;
    if (code === 'SQLITE_NOTADB') {
      throw new StoreError(`${path} is not an SQLite database. Point --db at an llmq database or a new file.`, { cause: error });
    }
    throw error;
  }
  return db;
}

/** Apply every migration newer than the database, each in its own transaction. */
export function migrate(db: Db, path: string): void {
  // Refuse someone else's database before writing anything into it.
  const hasLog = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'llmq_migrations'").get();
  if (!hasLog) {
    const foreign = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' LIMIT 1").get() as { name: string } | undefined;
    if (foreign) {
      throw new StoreError(`${path} is an SQLite database but not an llmq one (it has a table "${foreign.name}"). Point --db at an llmq database or a new file.`);
    }
  }
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
    db.transaction(() => {
      // Another process may have migrated between our read and this write lock.
      const done = db.prepare('SELECT 1 FROM llmq_migrations WHERE version = ?').get(m.version);
      if (done) return;
      db.exec(m.sql);
      db.prepare('INSERT INTO llmq_migrations (version, name, applied_at) VALUES (?, ?, ?)').run(m.version, m.name, Date.now());
    }).immediate();
  }
}
