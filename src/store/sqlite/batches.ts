import type { BatchEnd, BatchRow, BatchStore, HeldJob } from '../batches.js';
import { requestOf } from './requests.js';
import {
  MOCK_RUN_STOPPED,
  STOPPED_BEFORE_CREATED,
  unsentOfStoppedRunWhere,
  apiKeyOfRow,
  batchOwner,
  progressOfRow,
  type BatchProgress,
  type KeyColumns,
} from '../batches.js';
import type { ApiKeyId } from '../../batch/api-key-id.js';
import { MOCK_BASE_URL } from '../../mock-base-url.js';
import type { Db } from './open.js';
import { orphanDropper } from './attempts.js';
import { unplannedLimit } from './unplanned-limit.js';

const COLUMNS = `id, run_id AS runId, base_url AS baseUrl, state, provider_batch_id AS providerBatchId,
  input_file_id AS inputFileId, provider_status AS providerStatus, jobs, done, failed, requeued, error,
  created_at AS createdAt, updated_at AS updatedAt, ended_at AS endedAt, api_key_fingerprint, api_key_hint,
  provider_completed, provider_failed`;

/** The batch lane's ledger in the SQLite file (see src/store/batches.ts). */
export class SqliteBatches implements BatchStore {
  readonly #db: Db;
  readonly #s;

  constructor(db: Db) {
    this.#db = db;
    this.#s = {
      begin: db.prepare(`INSERT INTO batches (id, run_id, base_url, api_key_fingerprint, api_key_hint, created_at, updated_at)
        VALUES (?, ?, ?, ?, ?, ?, ?)`),
      noteJobs: db.prepare('UPDATE batches SET jobs = ?, updated_at = ? WHERE id = ?'),
      noteInputFile: db.prepare(`UPDATE batches SET input_file_id = ?, updated_at = ? WHERE id = ? AND state = 'preparing'`),
      submitted: db.prepare(`UPDATE batches SET state = 'submitted', provider_batch_id = ?, provider_status = ?, updated_at = ?
        WHERE id = ? AND state = 'preparing'`),
      noteStatus: db.prepare(
        'UPDATE batches SET provider_status = ?, provider_completed = ?, provider_failed = ?, updated_at = ? WHERE id = ?',
      ),
      adopt: db.prepare(
        `UPDATE batches SET run_id = ?, updated_at = ? WHERE id = ? AND run_id = ? AND state IN ('preparing', 'submitted')`,
      ),
      // Jobs still held were not answered: pending again.
      requeue: db
        .prepare(`UPDATE jobs SET state = 'pending', attempts = max(attempts - ?, 0), error = coalesce(?, error), lease_owner = NULL,
          lease_expires_at = NULL, updated_at = ? WHERE lease_owner = ? AND state = 'running' RETURNING key`)
        .pluck(),
      dropOrphans: orphanDropper(db),
      end: db.prepare(`UPDATE batches SET state = ?, provider_status = coalesce(?, provider_status), done = ?, failed = ?,
          requeued = ?, error = ?, updated_at = ?, ended_at = ? WHERE id = ?`),
      held: db.prepare(
        `SELECT key, attempts, model, CASE WHEN instr(${requestOf('jobs')}, '"response_format"') > 0 THEN ${requestOf('jobs')} END AS request
        FROM jobs WHERE lease_owner = ? AND state = 'running' ORDER BY seq`,
      ),
      // taken in the same statement that abandons them: two reclaims never both hand one back
      abandonUnsent: db
        .prepare(`UPDATE batches SET state = 'abandoned', error = iif(base_url = '${MOCK_BASE_URL}', @mockReason, @reason), updated_at = @now, ended_at = @now
          WHERE ${unsentOfStoppedRunWhere('run_id IN (SELECT value FROM json_each(@dead))')} RETURNING id`)
        .pluck(),
      noteRequeued: db.prepare('UPDATE batches SET requeued = ? WHERE id = ?'),
      open: db.prepare(`SELECT ${COLUMNS} FROM batches WHERE state IN ('preparing', 'submitted') ORDER BY created_at, id`),
      recent: db.prepare(`SELECT ${COLUMNS} FROM batches ORDER BY created_at DESC, id DESC LIMIT ${unplannedLimit('?')}`),
    };
  }

  async begin(r: { id: string; runId: string; baseUrl: string; apiKey?: ApiKeyId | null; now: number }): Promise<void> {
    this.#s.begin.run(r.id, r.runId, r.baseUrl, r.apiKey?.fingerprint ?? null, r.apiKey?.hint ?? null, r.now, r.now);
  }

  async noteJobs(id: string, jobs: number, now: number): Promise<void> {
    this.#s.noteJobs.run(jobs, now, id);
  }

  async noteInputFile(id: string, fileId: string, now: number): Promise<boolean> {
    return this.#s.noteInputFile.run(fileId, now, id).changes === 1;
  }

  async submitted(id: string, providerBatchId: string, providerStatus: string, now: number): Promise<boolean> {
    return this.#s.submitted.run(providerBatchId, providerStatus, now, id).changes === 1;
  }

  async noteStatus(id: string, providerStatus: string, progress: BatchProgress | null, now: number): Promise<void> {
    this.#s.noteStatus.run(providerStatus, progress?.completed ?? null, progress?.failed ?? null, now, id);
  }

  async adopt(id: string, fromRunId: string, toRunId: string, now: number): Promise<boolean> {
    return this.#s.adopt.run(toRunId, now, id, fromRunId).changes === 1;
  }

  async end(id: string, e: BatchEnd): Promise<number> {
    return this.#db
      .transaction(() => {
        const back = this.#s.requeue.all(e.refund ? 1 : 0, e.jobError ?? null, e.now, batchOwner(id)) as string[];
        // A job whose document changed while it was in the batch is needed by no item: never resend it.
        this.#s.dropOrphans(back);
        const requeued = back.length + (e.requeuedBefore ?? 0);
        this.#s.end.run(e.state, e.providerStatus, e.done, e.failed, requeued, e.error, e.now, e.now, id);
        return requeued;
      })
      .immediate();
  }

  async abandonUnsent(deadOwners: readonly string[], now: number): Promise<number> {
    return this.#db
      .transaction(() => {
        const ids = this.#s.abandonUnsent.all({
          dead: JSON.stringify(deadOwners),
          now,
          reason: STOPPED_BEFORE_CREATED,
          mockReason: MOCK_RUN_STOPPED,
        }) as string[];
        let requeued = 0;
        for (const id of ids) {
          const back = this.#s.requeue.all(1, null, now, batchOwner(id)) as string[];
          this.#s.dropOrphans(back);
          this.#s.noteRequeued.run(back.length, id);
          requeued += back.length;
        }
        return requeued;
      })
      .immediate();
  }

  async held(id: string): Promise<HeldJob[]> {
    return this.#s.held.all(batchOwner(id)) as HeldJob[];
  }

  async open(): Promise<BatchRow[]> {
    return (this.#s.open.all() as SqliteBatchRow[]).map(toRow);
  }

  async recent(limit: number): Promise<BatchRow[]> {
    return (this.#s.recent.all(limit) as SqliteBatchRow[]).map(toRow);
  }
}

type SqliteBatchRow = Omit<BatchRow, 'apiKey' | 'progress'> & KeyColumns;

function toRow({ api_key_fingerprint, api_key_hint, provider_completed, provider_failed, ...row }: SqliteBatchRow): BatchRow {
  const columns = { api_key_fingerprint, api_key_hint, provider_completed, provider_failed };
  return { ...row, apiKey: apiKeyOfRow(columns), progress: progressOfRow(columns) };
}
