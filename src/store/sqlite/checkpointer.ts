import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { Db } from './open.js';

/** How often the worker copies a run's WAL back into the database file. */
const RUN_EVERY_MS = 250;

/**
 * WAL pages past which the writer's own connection checkpoints after all. PASSIVE from the worker
 * copies frames but never rewinds the file while the writer keeps committing (SQLite starts the WAL
 * over only at the first write after a checkpoint that copied everything, and only the writer, between
 * its transactions, gets one): a fast run grew it by hundreds of MB a minute. The writer's checkpoint
 * finds the frames the worker already copied and has little left to do.
 */
const WRITER_CHECKPOINT_PAGES = 4000;

// A worker of its own connection: PASSIVE never waits for the writer, and the writer never waits for
// it. Busy is the next tick's business; any other error, three times running, ends the worker, and
// the writer's connection checkpoints by itself as before.
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
db.pragma('cache_size = -256'); // a checkpoint copies WAL frames; it needs no page cache of its own
let failures = 0;
const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
    failures = 0;
  } catch (error) {
    if (String(error && error.code).startsWith('SQLITE_BUSY')) return;
    if (++failures >= 3) throw error;
  }
}, workerData.everyMs);
parentPort.once('message', () => {
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

/**
 * Checkpoints a WAL from a worker thread. better-sqlite3 is synchronous, so SQLite's automatic
 * checkpoint (inside the COMMIT that crosses 1000 WAL pages) copies pages and fsyncs the file on the
 * event loop: at a zero-latency fake that was a third of a run's wall time. While a checkpointer
 * runs, the writer's connection checkpoints only past WRITER_CHECKPOINT_PAGES; if the worker fails,
 * or when it is closed, the connection checkpoints as it did before.
 *
 * A bulk load's writer thread has its own connection and checkpoint size (load-writer.ts): there
 * the checkpointer copies every `everyMs` what the batches committed, so the writer's own
 * checkpoint finds little left to copy.
 */
export class Checkpointer {
  readonly #db: Db;
  readonly #worker: Worker;
  readonly #exited: Promise<void>;
  /** The connection's automatic checkpoint before this one took over, given back at the end. */
  readonly #autocheckpoint: number;

  constructor(db: Db, path: string, options: { everyMs?: number } = {}) {
    this.#db = db;
    this.#autocheckpoint = db.pragma('wal_autocheckpoint', { simple: true }) as number;
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    // a timer and one connection: a small heap keeps the run's memory where it was without the worker
    this.#worker = new Worker(WORKER, {
      eval: true,
      workerData: { driver, path, everyMs: options.everyMs ?? RUN_EVERY_MS },
      resourceLimits: { maxYoungGenerationSizeMb: 1, maxOldGenerationSizeMb: 8 },
    });
    // never what keeps the process alive
    this.#worker.unref();
    this.#exited = new Promise((resolve) => this.#worker.once('exit', () => resolve()));
    this.#worker.once('error', () => this.#restoreAutomatic());
    db.pragma(`wal_autocheckpoint = ${WRITER_CHECKPOINT_PAGES}`);
  }

  /** Stop the worker; the connection checkpoints by itself again, as before. */
  async close(): Promise<void> {
    // held by its exit now: an unref'd worker is no reason to wait, and Node would end the process mid-await
    this.#worker.ref();
    this.#worker.postMessage('close');
    await this.#exited;
    this.#restoreAutomatic();
  }

  #restoreAutomatic(): void {
    if (this.#db.open) this.#db.pragma(`wal_autocheckpoint = ${this.#autocheckpoint}`);
  }
}
