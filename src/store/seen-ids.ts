import Database from 'better-sqlite3';

/** Ids a statement takes at most: one call into SQLite per id cost more than its insert (232 ms per 100,000 ids, 80-120 ms at 64 a call). */
export const SEEN_IDS_PER_CALL = 64;

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
  /** Multi-row inserts by row count, prepared when first needed. */
  readonly #inserts = new Map<number, Database.Statement>();
  readonly #firstAt;
  /** Numbers each `addAll` call; every row remembers the call that inserted it (`call`), so a call can tell its own inserts from earlier ones. */
  #calls = 0;

  constructor(cacheMiB = 16) {
    const db = this.#db;
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma(`cache_size = -${cacheMiB * 1024}`);
    db.exec('CREATE TABLE seen (id TEXT PRIMARY KEY, at TEXT NOT NULL, call INTEGER NOT NULL) WITHOUT ROWID');
    this.#firstAt = db.prepare('SELECT at, call FROM seen WHERE id = ?').raw();
    db.exec('BEGIN');
  }

  /** Whether `id` was seen. */
  has(id: string): boolean {
    return this.#firstAt.get(id) !== undefined;
  }

  /** Remember `id` as seen at `at`; if it was seen before, return where (and keep the first). */
  add(id: string, at: string): string | undefined {
    return this.addAll([id], [at])?.[0];
  }

  /**
   * The same as `add(ids[i], ats[i])` for each i in turn, in one statement (at most
   * SEEN_IDS_PER_CALL ids): for each, where its id was first seen if before (earlier in `ids` or in
   * an earlier call), else undefined. Null when every id is new, the usual case.
   */
  addAll(ids: readonly string[], ats: readonly string[]): (string | undefined)[] | null {
    const n = ids.length;
    if (n === 0) return null;
    if (n > SEEN_IDS_PER_CALL) throw new RangeError(`SeenIds.addAll takes at most ${SEEN_IDS_PER_CALL} ids, got ${n}`);
    const call = ++this.#calls;
    // An id twice in one statement would conflict with itself, and which of the two SQLite keeps
    // is its business, not input order: only the first of each goes in, the others are settled here.
    const firstIndex = new Map<string, number>();
    const values: unknown[] = [];
    for (let i = 0; i < n; i++) {
      if (firstIndex.has(ids[i]!)) continue;
      firstIndex.set(ids[i]!, i);
      values.push(ids[i], ats[i], call);
    }
    const unique = values.length / 3;
    const inserted = this.#insert(unique).run(values).changes;
    if (inserted === n) return null;
    // Some were seen before: ask for each where it was first seen (an insert of this call is the first sighting).
    const out = new Array<string | undefined>(n);
    const before = new Map<string, string | undefined>();
    for (const [id, i] of firstIndex) {
      let at: string | undefined;
      if (inserted !== unique) {
        const [firstAt, firstCall] = this.#firstAt.get(id) as [string, number];
        if (firstCall !== call) at = firstAt;
      }
      before.set(id, at);
      out[i] = at;
    }
    for (let i = 0; i < n; i++) {
      const first = firstIndex.get(ids[i]!)!;
      if (first !== i) out[i] = before.get(ids[i]!) ?? ats[first];
    }
    return out;
  }

  #insert(rows: number): Database.Statement {
    let statement = this.#inserts.get(rows);
    if (!statement) {
      const values = Array(rows).fill('(?, ?, ?)').join(', ');
      statement = this.#db.prepare(`INSERT INTO seen (id, at, call) VALUES ${values} ON CONFLICT (id) DO NOTHING`);
      this.#inserts.set(rows, statement);
    }
    return statement;
  }

  /** Closing deletes the file. */
  close(): void {
    if (this.#db.open) this.#db.close();
  }
}
