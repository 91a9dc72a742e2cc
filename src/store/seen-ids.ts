import Database from 'better-sqlite3';

/**
 * Item ids seen in one enqueue, and where each was first seen, kept on disk so that memory stays
 * flat whatever the input size (a JavaScript Map of ten million ids takes gigabytes). It is a
 * private SQLite file (the empty file name) that SQLite deletes when it is closed, whatever the
 * store: a PostgreSQL queue gets the same check without a round trip per document. Nothing in it
 * needs to survive a crash, so it has no journal and never syncs; one transaction stays open so
 * pages are written only when its small cache is full. It lives in the store layer because it is
 * SQL; ingest (`src/ingest/enqueue.ts`) is its only user.
 */
export class SeenIds {
  readonly #db = new Database('');
  readonly #insert;
  readonly #firstAt;

  constructor(cacheMiB = 16) {
    const db = this.#db;
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma(`cache_size = -${cacheMiB * 1024}`);
    db.exec('CREATE TABLE seen (id TEXT PRIMARY KEY, at TEXT NOT NULL) WITHOUT ROWID');
    this.#insert = db.prepare('INSERT INTO seen (id, at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING');
    this.#firstAt = db.prepare('SELECT at FROM seen WHERE id = ?').pluck();
    db.exec('BEGIN');
  }

  /** Remember `id` as seen at `at`; if it was seen before, return where (and keep the first). */
  add(id: string, at: string): string | undefined {
    if (this.#insert.run(id, at).changes === 1) return undefined;
    return this.#firstAt.get(id) as string;
  }

  /** Closing deletes the file. */
  close(): void {
    if (this.#db.open) this.#db.close();
  }
}
