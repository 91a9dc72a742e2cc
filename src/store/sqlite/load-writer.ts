import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { EnqueueRow } from '../types.js';

/**
 * A bulk load's inserts, on a connection of their own in a worker thread, so they overlap with the
 * reading, rendering and hashing of the next batch on the main thread (better-sqlite3 is
 * synchronous: on the main thread the two took turns). Each batch is one transaction: its jobs and
 * items, 64 rows a statement (one call into SQLite a row cost more than the insert), and its rows
 * added to the counts, whose per-insert triggers the load dropped (bulk-load.ts).
 *
 * The requests, nearly all of a batch's bytes, travel as UTF-8 in one transferred buffer and are
 * bound as byte views, cast to TEXT by the statement. Sent as strings, a batch of 5,000 took the
 * main thread about 10 ms to write into the message and the writer about as long to read back; as
 * bytes, 2 ms and nothing. With two cores shared with the load's checkpointer, 100,000 documents
 * loaded 3-4% sooner (16 runs, alternated with the string version).
 */
const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
db.pragma('busy_timeout = 10000');
db.pragma('synchronous = NORMAL');
db.pragma('foreign_keys = OFF'); // items reference jobs(key), whose index is gone until the load ends
for (const p of workerData.pragmas) db.pragma(p);
db.pragma('cache_size = ' + workerData.cacheKib);
const PER_CALL = 64;
// each statement takes PER_CALL rows of \`width\` values, the last ones of a batch one at a time
const manyRows = (into, row) => {
  const width = row.split('?').length - 1;
  return {
    width,
    values: new Array(width * PER_CALL),
    many: db.prepare('INSERT INTO ' + into + ' VALUES ' + Array(PER_CALL).fill(row).join(', ')),
    one: db.prepare('INSERT INTO ' + into + ' VALUES ' + row),
  };
};
// each job's seq is given (the batch's first is the next after the queue's last), so that its
// request goes into job_requests beside it; jobs.request is '' for them (requests.ts)
const jobs = manyRows('jobs (seq, key, request, model, priority, created_at, updated_at)', "(?, ?, '', ?, ?, ?, ?)");
// the request comes as UTF-8 bytes: CAST keeps them as they are and makes them TEXT, as binding the
// string would (requests are JSON, whose text has no unpaired surrogate: those become U+FFFD in bytes)
const requests = manyRows('job_requests (seq, request)', '(?, CAST(? AS TEXT))');
const items = manyRows('items (id, source, job_key, meta, created_at, updated_at)', '(?, ?, ?, ?, ?, ?)');
const lastSeq = db.prepare('SELECT coalesce(max(seq), 0) FROM jobs').pluck();
const addJobs = db.prepare("INSERT INTO job_counts (model, state, jobs) VALUES (?, 'pending', ?) " +
  'ON CONFLICT (model, state) DO UPDATE SET jobs = jobs + excluded.jobs');
const addItems = db.prepare('UPDATE item_counts SET items = items + ?');
function insert(statements, n, rowAt) {
  const { width, values } = statements;
  let i = 0;
  for (; i + PER_CALL <= n; i += PER_CALL) {
    for (let k = 0; k < PER_CALL; k++) rowAt(i + k, values, width * k);
    statements.many.run(values);
  }
  const one = new Array(width);
  for (; i < n; i++) {
    rowAt(i, one, 0);
    statements.one.run(one);
  }
}
const load = db.transaction((b) => {
  const n = b.keys.length;
  const bytes = Buffer.from(b.requestBytes);
  const first = lastSeq.get() + 1;
  insert(jobs, n, (i, v, at) => {
    v[at] = first + i; v[at + 1] = b.keys[i];
    v[at + 2] = b.models[i]; v[at + 3] = b.priorities[i];
    v[at + 4] = b.now; v[at + 5] = b.now;
  });
  insert(requests, n, (i, v, at) => {
    v[at] = first + i;
    v[at + 1] = bytes.subarray(i === 0 ? 0 : b.requestEnds[i - 1], b.requestEnds[i]);
  });
  insert(items, n, (i, v, at) => {
    v[at] = b.itemIds[i]; v[at + 1] = b.sources[i]; v[at + 2] = b.keys[i]; v[at + 3] = b.metas[i];
    v[at + 4] = b.now; v[at + 5] = b.now;
  });
  const perModel = new Map();
  for (const m of b.models) perModel.set(m, (perModel.get(m) || 0) + 1);
  for (const [model, count] of perModel) addJobs.run(model, count);
  addItems.run(n);
});
parentPort.on('message', (b) => {
  if (b === 'close') {
    db.close();
    parentPort.close();
    return;
  }
  try {
    load.immediate(b);
    parentPort.postMessage({ ok: true });
  } catch (error) {
    parentPort.postMessage({ ok: false, message: String(error && error.message), code: error && error.code });
  }
});
`;

/** What a batch travels as: one array a column, and the requests as bytes. */
interface BatchMessage {
  readonly keys: string[];
  /** Every request, UTF-8, one after another: request i ends at requestEnds[i]. */
  readonly requestBytes: ArrayBuffer;
  readonly requestEnds: Uint32Array;
  readonly models: string[];
  readonly priorities: number[];
  readonly itemIds: string[];
  readonly sources: string[];
  readonly metas: (string | null)[];
  readonly now: number;
}

/**
 * The writer's page cache, in KiB (negative: SQLite's unit for KiB). Its rows go in at the end of
 * each table and index but one (items.id, in the input's order), so it needs little: with the
 * enqueue's 64 MiB beside the main thread's, a million documents peaked at 324 MB RSS; 275 MB at 16.
 */
const WRITER_CACHE_KIB = -16384;

type Reply = { ok: true } | { ok: false; message: string; code: unknown };

export class BulkLoadWriter {
  readonly #worker: Worker;
  readonly #exited: Promise<void>;
  /** The batch being written: one at a time, in order. */
  #pending: { resolve: () => void; reject: (error: Error) => void } | null = null;
  /** Why the worker can write no more, once it cannot. */
  #broken: Error | null = null;

  /** `pragmas`: the enqueue's connection settings (checkpoint size, temporary storage), applied to the worker's; its page cache is its own. */
  constructor(path: string, pragmas: readonly string[]) {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    this.#worker = new Worker(WORKER, { eval: true, workerData: { driver, path, pragmas, cacheKib: WRITER_CACHE_KIB } });
    this.#exited = new Promise((resolve) => this.#worker.once('exit', () => resolve()));
    this.#worker.on('message', (reply: Reply) => {
      const pending = this.#pending;
      this.#pending = null;
      if (reply.ok) pending?.resolve();
      else pending?.reject(Object.assign(new Error(reply.message), { code: reply.code }));
    });
    const fail = (error: Error): void => {
      this.#broken ??= error;
      this.#pending?.reject(error);
      this.#pending = null;
    };
    this.#worker.once('error', fail);
    this.#worker.once('exit', (code) => fail(new Error(`the bulk load's writer thread ended (exit code ${code}) before the load did`)));
  }

  /** Write one batch in one transaction; resolves when it is committed. */
  write(rows: readonly EnqueueRow[], now: number): Promise<void> {
    if (this.#broken) return Promise.reject(this.#broken);
    if (this.#pending) return Promise.reject(new Error('BulkLoadWriter.write: the previous batch is still being written'));
    const { bytes, ends } = utf8Joined(rows);
    const batch: BatchMessage = {
      keys: rows.map((r) => r.key),
      requestBytes: bytes,
      requestEnds: ends,
      models: rows.map((r) => r.model),
      priorities: rows.map((r) => r.priority),
      itemIds: rows.map((r) => r.itemId),
      sources: rows.map((r) => r.source),
      metas: rows.map((r) => (r.meta ? JSON.stringify(r.meta) : null)),
      now,
    };
    return new Promise((resolve, reject) => {
      this.#pending = { resolve, reject };
      this.#worker.postMessage(batch, [batch.requestBytes]);
    });
  }

  /** Close the worker's connection and wait for the thread to end. */
  async close(): Promise<void> {
    if (!this.#broken) this.#worker.postMessage('close');
    await this.#exited;
  }
}

/** The rows' requests as UTF-8 in one buffer of their own (it is transferred, not copied), and where each ends. */
function utf8Joined(rows: readonly EnqueueRow[]): { bytes: ArrayBuffer; ends: Uint32Array } {
  const ends = new Uint32Array(rows.length);
  let end = 0;
  for (let i = 0; i < rows.length; i++) ends[i] = end += Buffer.byteLength(rows[i]!.request);
  const buffer = Buffer.allocUnsafeSlow(end);
  for (let i = 0; i < rows.length; i++) buffer.write(rows[i]!.request, i === 0 ? 0 : ends[i - 1]!);
  return { bytes: buffer.buffer as ArrayBuffer, ends };
}
