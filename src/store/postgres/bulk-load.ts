import type pg from 'pg';
import { ONE_ENQUEUE_AT_A_TIME_SQL } from './enqueue.js';
import type { EnqueueResult, EnqueueRow } from '../types.js';
import { copyField, copyIn } from './copy-in.js';

/**
 * Loading a fresh queue in bulk. `jobs.key` and `items.job_key` are random SHA-256 hex, so keeping
 * their indexes (and the foreign key's lookup of each item's job) up to date while rows go in
 * touches a random page of each per row; once they outgrow shared_buffers most of those pages are
 * read and written back per row, and the rate falls as the queue grows (1M documents: 339 s).
 * Built once after the load (a sort), they cost a fraction of that: 1M rows loaded and indexed in
 * 90 s of which the three builds take 25 s.
 *
 * The whole load is one transaction on one connection, the index drops included (DDL is
 * transactional in PostgreSQL). A load that dies half way (SIGKILL, a lost connection, Ctrl-C)
 * leaves the queue exactly as it was, empty with its indexes, with nothing to repair; the price is
 * that its progress is lost too, and enqueueing the file again starts over. Meanwhile the lock the
 * drops take makes other commands on this queue wait for the load to end (they would find it
 * empty anyway), except `status`, which shows the committed (empty) queue at once.
 */

/**
 * The jobs indexes that are not about keys, as migrations 1, 5 and 6 made them (the bulk test
 * compares every index definition with a queue loaded batch by batch). Each COPYed row went into
 * all three; built once at the end (their keys arrive nearly sorted) they took a fifth less server
 * CPU for the whole load: 300,000 rows 4.4-4.5 s instead of 5.5-6.3 s; 1M documents in-process
 * 16.6-18.7 s instead of 20.3-21.7 s, the end of the load 2 s longer (load 3.3-3.6).
 */
const JOB_INDEXES = `CREATE INDEX jobs_claim ON jobs (priority, seq) WHERE state = 'pending';
  CREATE INDEX jobs_claim_model ON jobs (model, priority, seq) WHERE state = 'pending';
  CREATE INDEX jobs_age ON jobs (state, created_at)`;

/** The first batch of an enqueue into an empty queue must hold this many rows to load it in bulk: below it, the indexes cost nothing worth saving. */
export const BULK_MIN_ROWS = 1000;

/**
 * A load batch goes in by COPY, jobs then items: every row is new (the queue was empty and an
 * enqueue never repeats an item id), so there is nothing to look up, only rows to append. Against
 * one INSERT ... SELECT from JSON arrays per batch it spares the server parsing the JSON, two sorts
 * and the CTEs, and COPY writes many rows per heap page at a time: 300,000 documents took 4.5-5.8 s
 * of server CPU instead of 7.8-8.5 s (load 3-5 on 2 cores). Identical requests within a batch are
 * left out here (the first keeps the job); repeats of a key from earlier batches are removed at the end.
 */
const COPY_JOBS = 'COPY jobs (key, request, model, priority, created_at, updated_at) FROM STDIN';
const COPY_ITEMS = 'COPY items (id, source, job_key, meta, created_at, updated_at) FROM STDIN';

function copyText(rows: readonly EnqueueRow[], now: number): { jobs: Buffer; items: Buffer; newJobs: number } {
  const keys = new Set<string>();
  let jobs = '';
  let items = '';
  for (const r of rows) {
    if (!keys.has(r.key)) {
      keys.add(r.key);
      jobs += `${copyField(r.key)}\t${copyField(r.request)}\t${copyField(r.model)}\t${r.priority}\t${now}\t${now}\n`;
    }
    const meta = r.meta ? copyField(JSON.stringify(r.meta)) : '\\N';
    items += `${copyField(r.itemId)}\t${copyField(r.source)}\t${copyField(r.key)}\t${meta}\t${now}\t${now}\n`;
  }
  return { jobs: Buffer.from(jobs), items: Buffer.from(items), newJobs: keys.size };
}

/** Jobs whose key an earlier job of the load already has: the first one (lowest seq, the earliest) is kept, as ON CONFLICT DO NOTHING would have. */
const DEDUPE_SQL = `
WITH repeated AS (
  DELETE FROM jobs j USING (SELECT key, min(seq) AS first FROM jobs GROUP BY key HAVING count(*) > 1) d
  WHERE j.key = d.key AND j.seq <> d.first RETURNING 1
) SELECT count(*)::int AS n FROM repeated`;

const UNIQUE_VIOLATION = '23505';

/** Whether the queue has anything (or a run working it): only an empty, idle queue is loaded in bulk. */
const BUSY_SQL = `SELECT EXISTS (SELECT 1 FROM jobs) OR EXISTS (SELECT 1 FROM items)
  OR EXISTS (SELECT 1 FROM runs WHERE ended_at IS NULL) AS busy`;

/** A bulk load in progress: its connection holds the transaction from the index drops to the commit. */
export class PgBulkLoad {
  readonly #client: pg.PoolClient;
  #failed = false;

  private constructor(client: pg.PoolClient) {
    this.#client = client;
  }

  /**
   * Start a bulk load if the queue is empty and no run is open on it: lock jobs and items, then drop
   * the key index, `items_job` and the foreign key between them. Null (nothing changed) otherwise.
   */
  static async begin(pool: pg.Pool): Promise<PgBulkLoad | null> {
    // Asked first without the lock: a queue with jobs (where other enqueues and runs may be at work)
    // is never locked. Taking the lock there to find out deadlocked with a concurrent enqueue that
    // had read items and then wrote jobs, which this lock had taken in between.
    if ((await pool.query<{ busy: boolean }>(BUSY_SQL)).rows[0]!.busy) return null;
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      // in turn with the other enqueues first: one that had read items and was about to write jobs
      // (a batch not committed yet, unseen by the question above) would deadlock with this lock
      await client.query(ONE_ENQUEUE_AT_A_TIME_SQL);
      await client.query('LOCK TABLE jobs, items IN ACCESS EXCLUSIVE MODE');
      const busy = (await client.query<{ busy: boolean }>(BUSY_SQL)).rows[0]!.busy;
      if (busy) {
        await client.query('ROLLBACK');
        client.release();
        return null;
      }
      // sorts of a batch and the index builds at the end, in memory where they fit
      await client.query(`SET LOCAL work_mem = '64MB'; SET LOCAL maintenance_work_mem = '256MB'`);
      await client.query(`ALTER TABLE items DROP CONSTRAINT items_job_key_fkey;
        DROP INDEX items_job, jobs_claim, jobs_claim_model, jobs_age;
        ALTER TABLE jobs DROP CONSTRAINT jobs_key_key`);
      return new PgBulkLoad(client);
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      client.release();
      throw error;
    }
  }

  /** One batch; its item ids are new to the queue and to the load. */
  async load(rows: readonly EnqueueRow[], now: number): Promise<EnqueueResult> {
    try {
      const { jobs, items, newJobs } = copyText(rows, now);
      await copyIn(this.#client, COPY_JOBS, jobs);
      await copyIn(this.#client, COPY_ITEMS, items);
      return { newJobs, newItems: rows.length, movedItems: 0, unchanged: 0, droppedJobs: 0, orphanedAnswers: 0, reprioritized: 0 };
    } catch (error) {
      this.#failed = true;
      throw error;
    }
  }

  /**
   * End the load: remove repeated keys, build the indexes and the foreign key back, commit. Returns
   * how many jobs the batches counted as new that repeated a key of an earlier batch. After a batch
   * failed the transaction can only roll back: nothing of the load stays, and 0 is returned (the
   * batch's error is the one to report).
   */
  async finish(): Promise<{ repeatedJobs: number }> {
    const c = this.#client;
    try {
      if (this.#failed) {
        await c.query('ROLLBACK');
        return { repeatedJobs: 0 };
      }
      const repeatedJobs = await this.#buildKeyIndex();
      await c.query(`ALTER TABLE jobs ADD CONSTRAINT jobs_key_key UNIQUE USING INDEX jobs_key_key;
        ${JOB_INDEXES};
        CREATE INDEX items_job ON items (job_key);
        ALTER TABLE items ADD CONSTRAINT items_job_key_fkey FOREIGN KEY (job_key) REFERENCES jobs (key)`);
      await c.query('COMMIT');
      return { repeatedJobs };
    } catch (error) {
      await c.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      c.release();
    }
  }

  /** The unique key index, built once; repeated keys (rare: identical documents in different batches) are removed first when the build finds some. */
  async #buildKeyIndex(): Promise<number> {
    const c = this.#client;
    await c.query('SAVEPOINT build');
    try {
      await c.query('CREATE UNIQUE INDEX jobs_key_key ON jobs (key)');
      return 0;
    } catch (error) {
      if ((error as { code?: string }).code !== UNIQUE_VIOLATION) throw error;
      await c.query('ROLLBACK TO SAVEPOINT build');
    }
    const repeated = (await c.query<{ n: number }>(DEDUPE_SQL)).rows[0]!.n;
    await c.query('CREATE UNIQUE INDEX jobs_key_key ON jobs (key)');
    return repeated;
  }
}
