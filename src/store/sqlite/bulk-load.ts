import { hostname } from 'node:os';
import { StoreError } from '../../errors.js';
import { isProcessAlive } from '../../process-alive.js';
import { INSERT_COUNT_TRIGGERS, nameJobsKeyIndexIfEmpty } from './migrations.js';
import type { Db } from './open.js';

/**
 * Loading a fresh queue in bulk. `jobs_key` and `items_job` are keyed by random SHA-256 hex, so
 * keeping them up to date while rows go in dirties about one page of each per row, in every batch:
 * at 500,000 documents that was half the CPU time and three quarters of the bytes written. Built
 * once after the load (a sort), they cost a fraction of that.
 *
 * While the indexes are gone, nothing else may write (a key lookup would scan every job, and with
 * foreign keys on an item insert fails "foreign key mismatch"), so the load is recorded in
 * `bulk_load` in the same transaction that drops them. A writer that finds the record refuses while
 * its loader lives, and finishes the load (dedupe, indexes) once the loader is gone: a load killed
 * half way leaves a queue the next command repairs.
 *
 * The count triggers that fire on each insert are dropped with the indexes (9% of a load's time at a
 * million rows): the load adds each batch's rows to the counts in the batch's transaction instead
 * (load-writer.ts), so `status` during a load, or after one was killed, counts what is committed.
 */

/** The first batch of an enqueue into an empty queue must hold this many rows to load it in bulk: below it, the indexes cost nothing worth saving. */
export const BULK_MIN_ROWS = 1000;

export interface LoadRecord {
  readonly host: string;
  readonly pid: number;
  readonly started_at: number;
}

export function loadRecord(db: Db): LoadRecord | undefined {
  return db.prepare('SELECT host, pid, started_at FROM bulk_load').get() as LoadRecord | undefined;
}

/**
 * Start a bulk load if the queue is empty and nobody else writes it: record it and drop the two
 * indexes, in one transaction. False (and nothing changed) when the queue is not empty, a run is
 * open on it, or another load is recorded. The caller turns foreign keys off first (outside any
 * transaction, where the pragma takes effect). `keepCountTriggers`: for a load whose rows come with
 * their states, tokens and costs (a copy), which the triggers count as they go in; an enqueue's
 * writer adds its pending jobs to the counts itself.
 */
export function beginBulkLoad(db: Db, now: number, o: { keepCountTriggers?: boolean } = {}): boolean {
  return db
    .transaction(() => {
      const busy = db
        .prepare(`SELECT EXISTS (SELECT 1 FROM jobs) OR EXISTS (SELECT 1 FROM items) OR EXISTS (SELECT 1 FROM bulk_load)
            OR EXISTS (SELECT 1 FROM runs WHERE ended_at IS NULL)`)
        .pluck()
        .get() as number;
      if (busy) return false;
      // a queue from before migration 8 that had jobs then keeps key UNIQUE inline; empty now, so rebuilt in no time
      nameJobsKeyIndexIfEmpty(db);
      db.prepare('INSERT INTO bulk_load (id, host, pid, started_at) VALUES (1, ?, ?, ?)').run(hostname(), process.pid, now);
      db.exec('DROP INDEX jobs_key; DROP INDEX items_job;');
      if (!o.keepCountTriggers) db.exec('DROP TRIGGER jobs_count_insert; DROP TRIGGER items_count_insert;');
      return true;
    })
    .immediate();
}

/**
 * Build the indexes a bulk load dropped, create its triggers again, and clear its record; returns how many jobs were removed
 * as repeats of an earlier job with the same key (identical documents in one load). Idempotent:
 * each step is its own transaction so the WAL never holds a whole index at once, and a crash
 * between them leaves the record for the next writer to finish with this same function.
 */
export function finishBulkLoad(db: Db): number {
  // Each build sorts in memory up to the page cache's size on top of the cache itself, then spills
  // to temporary files: with the enqueue's 64 MiB cache that was the enqueue's peak (1M documents:
  // 297 MB); 32 MiB peaks at 268 MB, no slower at a million (24-25 s). At ten million: 271 MB and
  // 303 s, against one run with 64 MiB of 283 MB and 275 s (not repeated: the difference may be noise).
  const cacheSize = db.pragma('cache_size', { simple: true }) as number;
  const tempStore = db.pragma('temp_store', { simple: true }) as number;
  db.pragma(`cache_size = ${BUILD_CACHE_KIB}`);
  // what the sort spills goes to temporary files: held in memory (the enqueue's temp_store), a
  // ten-million-job build would keep all of it
  db.pragma('temp_store = FILE');
  try {
    return buildLoadIndexes(db);
  } finally {
    if (db.open) {
      db.pragma(`cache_size = ${cacheSize}`);
      db.pragma(`temp_store = ${tempStore}`);
    }
  }
}

/** Page cache while a load's indexes are built, in KiB (negative: SQLite's unit for KiB). */
const BUILD_CACHE_KIB = -32768;

function buildLoadIndexes(db: Db): number {
  const hasTrigger = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'trigger' AND name = ?").pluck();
  // checked and made under the write lock: two commands opened at once may both finish a dead load
  db.transaction(() => {
    for (const [name, sql] of Object.entries(INSERT_COUNT_TRIGGERS)) if (!hasTrigger.get(name)) db.exec(sql);
  }).immediate();
  let repeats = 0;
  try {
    db.exec('CREATE UNIQUE INDEX IF NOT EXISTS jobs_key ON jobs (key)');
  } catch (error) {
    if ((error as { code?: string }).code !== 'SQLITE_CONSTRAINT_UNIQUE') throw error;
    // Rare, so only paid for when the index refused: keep the first job of each key, as an
    // enqueue with the index in place would have (its insert of the repeat did nothing).
    db.transaction(() => {
      repeats = db
        .prepare(`DELETE FROM jobs WHERE seq IN (SELECT seq FROM
            (SELECT seq, row_number() OVER (PARTITION BY key ORDER BY seq) AS nth FROM jobs) WHERE nth > 1)`)
        .run().changes;
      db.exec('CREATE UNIQUE INDEX IF NOT EXISTS jobs_key ON jobs (key)');
    })();
  }
  db.exec('CREATE INDEX IF NOT EXISTS items_job ON items (job_key)');
  // Every item's job exists: read in key order on both indexes, so cheap even at millions of rows.
  const orphan = db
    .prepare(`SELECT job_key FROM items INDEXED BY items_job
      WHERE NOT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_key WHERE jobs.key = items.job_key) LIMIT 1`)
    .pluck()
    .get() as string | undefined;
  if (orphan !== undefined) {
    throw new StoreError(`After a bulk load, an item points at job ${orphan}, which is not in the queue. Report this as an llmq bug.`);
  }
  db.exec('DELETE FROM bulk_load');
  return repeats;
}

/**
 * Finish a load whose loader is gone (killed, or a second Ctrl-C): true if there was one. Done when
 * the queue is opened, by every command, reading ones too: the load left each repeated request as a
 * job of its own and no key index, so `export` joined an item to every repeat of its job (2,061
 * items gave 25,966 lines) and `status` counted the repeats. A live loader's load is its own to
 * finish (readers see what it committed), as is one on another host, whose process cannot be checked.
 */
export function finishDeadBulkLoad(db: Db): boolean {
  const r = loadRecord(db);
  if (!r || r.host !== hostname() || r.pid === process.pid || isProcessAlive(r.pid)) return false;
  db.pragma('foreign_keys = OFF');
  finishBulkLoad(db);
  db.pragma('foreign_keys = ON');
  return true;
}

/**
 * Before a write other than the load's own: finish a load whose loader is gone, or refuse while it
 * lives (it is rebuilding nothing yet, and everything else would crawl or fail without the indexes).
 */
export function settleBulkLoad(db: Db, location: string): void {
  const r = loadRecord(db);
  if (!r) {
    // opened during a load that has ended since (openSqlite turned the check off)
    if (!db.pragma('foreign_keys', { simple: true })) db.pragma('foreign_keys = ON');
    return;
  }
  if (finishDeadBulkLoad(db)) return;
  const here = hostname();
  const since = new Date(r.started_at).toISOString();
  throw new StoreError(
    `${location} is being loaded by llmq enqueue or llmq copy (pid ${r.pid} on ${r.host}, since ${since}): its indexes are built when the load ends, ` +
      `and nothing else can write to the queue until then. Wait for that command to finish, then run this again` +
      (r.host === here ? '.' : `; if that process is gone, run this command on ${r.host} to finish the load.`),
  );
}
