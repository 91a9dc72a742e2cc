import type { Db } from './open.js';
import { BULK_MIN_ROWS, beginBulkLoad, finishBulkLoad } from './bulk-load.js';
import { INSERT_ATTEMPT_SQL, insertAttemptValues } from './attempts.js';
import { toAttempt, toItem, toJob, toRun, type RawAttempt } from '../rows.js';
import { keysetPages } from '../pages.js';
import { INSERT_REQUEST_SQL, JOB_COLUMNS, REQUEST_KEPT_APART } from './requests.js';
import { nanoUp, SPEND_COLUMNS, spendOfJoined } from '../spend-amounts.js';
import type { AttemptRow, CopyInProgress, DroppedCost, ItemRow, JobRow, QueueCopier, RunRow } from '../types.js';
import { DROPPED } from '../tally.js';
import { unplannedLimit } from './unplanned-limit.js';

const PAGE = 1000;

/**
 * Whole-table reads and writes for `llmq copy`. Reads page by the table's own order key (keyset, so
 * a page never rescans what came before); each load is one transaction for its batch.
 */
export class SqliteCopier implements QueueCopier {
  readonly #db: Db;
  readonly #beforeWrite: () => void;
  readonly #bulkAllowed: boolean;
  /**
   * Loading in bulk (bulk-load.ts): the first batch of jobs went into an empty queue, so the two
   * indexes keyed by random SHA-256 (`jobs_key`, `items_job`) are built once after the items instead
   * of taking every row: 200,000 jobs with their items copied in 18 s before, of which those inserts
   * were most. The count triggers stay: copied jobs arrive with their states, tokens and costs.
   */
  #bulk = false;
  #jobsLoaded = false;
  /**
   * `beforeWrite` runs before each load: the store's check that no bulk load holds the queue.
   * `bulk`: whether a copy into an empty queue may load in bulk (not into `:memory:`, where the
   * indexes cost nothing worth saving).
   */
  constructor(db: Db, beforeWrite: () => void = () => {}, o: { bulk?: boolean } = {}) {
    this.#db = db;
    this.#beforeWrite = beforeWrite;
    this.#bulkAllowed = o.bulk ?? false;
  }

  /** Before a load: the store's checks, except during this copier's own bulk load, which they would refuse. */
  #write(): void {
    if (!this.#bulk) this.#beforeWrite();
  }

  /** The first batch of jobs: into an empty queue, and big enough, the load goes in bulk. */
  #maybeBeginBulk(firstRows: number): void {
    if (this.#jobsLoaded || !this.#bulkAllowed || firstRows < BULK_MIN_ROWS) return;
    // off for the load: items reference jobs(key), whose index is gone until markOrphans
    this.#db.pragma('foreign_keys = OFF');
    this.#bulk = beginBulkLoad(this.#db, Date.now(), { keepCountTriggers: true });
    if (!this.#bulk) this.#db.pragma('foreign_keys = ON');
  }

  /** Build what the bulk load dropped; its record goes with it. */
  #endBulk(): void {
    if (!this.#bulk) return;
    try {
      finishBulkLoad(this.#db);
    } finally {
      this.#bulk = false;
      this.#db.pragma('foreign_keys = ON');
    }
  }

  async *dumpJobs(): AsyncIterable<JobRow> {
    for await (const r of this.#pages(`SELECT ${JOB_COLUMNS} FROM jobs WHERE seq > ? ORDER BY seq LIMIT ${unplannedLimit('?')}`, 'seq'))
      yield toJob(r as never);
  }

  async *dumpItems(): AsyncIterable<ItemRow> {
    for await (const r of this.#pages(`SELECT * FROM items WHERE seq > ? ORDER BY seq LIMIT ${unplannedLimit('?')}`, 'seq'))
      yield toItem(r as never);
  }

  async *dumpAttempts(): AsyncIterable<AttemptRow> {
    for await (const r of this.#pages(`SELECT * FROM attempts WHERE id > ? ORDER BY id LIMIT ${unplannedLimit('?')}`, 'id'))
      yield toAttempt(r as unknown as RawAttempt);
  }

  async *dumpRuns(): AsyncIterable<RunRow> {
    // runs has no sequence; rowid is its insertion order.
    const sql = `SELECT r.rowid AS _seq, r.*, ${SPEND_COLUMNS} FROM runs r LEFT JOIN spend s ON s.run_id = r.id
      WHERE r.rowid > ? ORDER BY r.rowid LIMIT ${unplannedLimit('?')}`;
    for await (const r of this.#pages(sql, '_seq')) yield { ...toRun(r as never), spend: spendOfJoined(r) };
  }

  async loadJobs(rows: readonly JobRow[]): Promise<void> {
    this.#write();
    this.#maybeBeginBulk(rows.length);
    this.#jobsLoaded = true;
    const insert = this.#db.prepare(`INSERT INTO jobs (key, request, model, state, priority, attempts, run_after, lease_owner,
        lease_expires_at, output, response, prompt_tokens, completion_tokens, error, created_at, updated_at, finished_at, cost_usd, latency_ms)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    const insertRequest = this.#db.prepare(INSERT_REQUEST_SQL);
    this.#db
      .transaction(() => {
        for (const j of rows) {
          const { lastInsertRowid } = insert.run(
            j.key,
            REQUEST_KEPT_APART,
            j.model,
            j.state,
            j.priority,
            j.attempts,
            j.runAfter,
            j.leaseOwner,
            j.leaseExpiresAt,
            j.output,
            j.response,
            j.usage?.promptTokens ?? null,
            j.usage?.completionTokens ?? null,
            j.error,
            j.createdAt,
            j.updatedAt,
            j.finishedAt,
            j.costUsd ?? null,
            j.latencyMs ?? null,
          );
          insertRequest.run(lastInsertRowid, j.request);
        }
      })
      .immediate();
  }

  async loadItems(rows: readonly ItemRow[]): Promise<void> {
    this.#write();
    const insert = this.#db.prepare('INSERT INTO items (id, source, job_key, meta, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)');
    this.#db
      .transaction(() => {
        for (const i of rows) insert.run(i.id, i.source, i.jobKey, i.meta ? JSON.stringify(i.meta) : null, i.createdAt, i.updatedAt);
      })
      .immediate();
  }

  async dumpSuperseded(): Promise<Array<{ key: string; byKey: string }>> {
    return this.#db.prepare('SELECT key, by_key AS byKey FROM superseded ORDER BY key').all() as Array<{ key: string; byKey: string }>;
  }

  async loadSuperseded(rows: ReadonlyArray<{ readonly key: string; readonly byKey: string }>): Promise<void> {
    this.#write();
    const insert = this.#db.prepare('INSERT OR REPLACE INTO superseded (key, by_key) VALUES (?, ?)');
    this.#db.transaction(() => {
      for (const r of rows) insert.run(r.key, r.byKey);
    })();
  }

  async dumpDroppedCosts(): Promise<DroppedCost[]> {
    return this.#db
      .prepare(`SELECT model, jobs, cost_usd AS usd FROM job_counts WHERE state = '${DROPPED}' ORDER BY model`)
      .all() as DroppedCost[];
  }

  async loadDroppedCosts(rows: readonly DroppedCost[]): Promise<void> {
    this.#write();
    const insert = this.#db.prepare(`INSERT INTO job_counts (model, state, jobs, cost_usd) VALUES (?, '${DROPPED}', ?, ?)
      ON CONFLICT (model, state) DO UPDATE SET jobs = jobs + excluded.jobs, cost_usd = cost_usd + excluded.cost_usd`);
    this.#db.transaction(() => {
      for (const r of rows) insert.run(r.model, r.jobs, r.usd);
    })();
  }

  async markOrphans(): Promise<void> {
    // every job and item is in: the key indexes are built now, as the orphan marking and the
    // attempts' foreign keys need them
    this.#endBulk();
    this.#beforeWrite();
    // two index walks in order, not a probe of items_job per job (migration 15)
    this.#db.prepare('UPDATE jobs SET orphaned = 1 WHERE key IN (SELECT key FROM jobs EXCEPT SELECT job_key FROM items)').run();
  }

  async beginCopy(source: string, now: number): Promise<void> {
    this.#beforeWrite();
    // a copy that stopped before any row went in left its mark on an empty queue: this one takes its place
    this.#db
      .transaction(() => {
        this.#db.prepare('DELETE FROM copying').run();
        this.#db.prepare('INSERT INTO copying (source, started_at) VALUES (?, ?)').run(source, now);
      })
      .immediate();
  }

  async endCopy(): Promise<void> {
    this.#db.prepare('DELETE FROM copying').run();
  }

  async copyInProgress(): Promise<CopyInProgress | null> {
    const row = this.#db.prepare('SELECT source, started_at AS startedAt FROM copying LIMIT 1').get() as CopyInProgress | undefined;
    return row ?? null;
  }

  async loadAttempts(rows: readonly AttemptRow[]): Promise<void> {
    this.#beforeWrite();
    const insert = this.#db.prepare(INSERT_ATTEMPT_SQL);
    this.#db
      .transaction(() => {
        for (const a of rows) insert.run(...insertAttemptValues(a, a.latencyMs));
      })
      .immediate();
  }

  async loadRuns(rows: readonly RunRow[]): Promise<void> {
    this.#beforeWrite();
    const insert = this.#db.prepare(`INSERT INTO runs (id, host, pid, started_at, heartbeat_at, ended_at, exit_reason, options, stats)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`);
    const spend = this.#db.prepare(`INSERT INTO spend (run_id, reserved_nanousd, in_flight, spent_nanousd, unknown_nanousd, unknown_tries,
        unpriced_tries, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`);
    this.#db
      .transaction(() => {
        for (const r of rows) {
          insert.run(
            r.id,
            r.host,
            r.pid,
            r.startedAt,
            r.heartbeatAt,
            r.endedAt,
            r.exitReason,
            JSON.stringify(r.options),
            r.stats ? JSON.stringify(r.stats) : null,
          );
          const m = r.spend;
          if (m) {
            spend.run(
              r.id,
              nanoUp(m.reservedUsd),
              m.inFlight,
              nanoUp(m.spentUsd),
              nanoUp(m.mayBeBilledUsd),
              m.mayBeBilledTries,
              m.unpricedTries,
              r.heartbeatAt,
            );
          }
        }
      })
      .immediate();
  }

  /** One page per query, each its own implicit transaction, so a long copy never holds a read lock. */
  #pages(sql: string, orderKey: string): AsyncIterable<Record<string, unknown>> {
    const page = this.#db.prepare(sql);
    return keysetPages((after, size) => page.all(after, size) as Array<Record<string, unknown>>, orderKey, PAGE);
  }
}
