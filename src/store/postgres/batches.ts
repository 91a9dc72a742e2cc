import type pg from 'pg';
import type { BatchEnd, BatchRow, BatchState, BatchStore, HeldJob } from '../batches.js';
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
import { dropOrphans } from './statements.js';
import { pgText } from './pg-text.js';
import { AFTER_ENQUEUE_IN_PROGRESS_SQL } from './enqueue.js';
import { inTransaction, query } from './connect.js';

const COLUMNS = `id, run_id, base_url, state, provider_batch_id, input_file_id, provider_status, jobs, done, failed,
  requeued, error, created_at, updated_at, ended_at, api_key_fingerprint, api_key_hint,
  provider_completed, provider_failed`;

/** The batch lane's ledger in PostgreSQL (see src/store/batches.ts). */
export class PgBatches implements BatchStore {
  readonly #pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async begin(r: { id: string; runId: string; baseUrl: string; apiKey?: ApiKeyId | null; now: number }): Promise<void> {
    await this.#q(
      `INSERT INTO batches (id, run_id, base_url, api_key_fingerprint, api_key_hint, created_at, updated_at)
      VALUES ($1, $2, $3, $4, $5, $6, $6)`,
      [r.id, r.runId, r.baseUrl, r.apiKey?.fingerprint ?? null, r.apiKey?.hint ?? null, r.now],
    );
  }

  async noteJobs(id: string, jobs: number, now: number): Promise<void> {
    await this.#q('UPDATE batches SET jobs = $1, updated_at = $2 WHERE id = $3', [jobs, now, id]);
  }

  async noteInputFile(id: string, fileId: string, now: number): Promise<boolean> {
    const r = await this.#q(`UPDATE batches SET input_file_id = $1, updated_at = $2 WHERE id = $3 AND state = 'preparing'`, [
      fileId,
      now,
      id,
    ]);
    return r.rowCount === 1;
  }

  async submitted(id: string, providerBatchId: string, providerStatus: string, now: number): Promise<boolean> {
    const r = await this.#q(
      `UPDATE batches SET state = 'submitted', provider_batch_id = $1, provider_status = $2, updated_at = $3
      WHERE id = $4 AND state = 'preparing'`,
      [providerBatchId, providerStatus, now, id],
    );
    return r.rowCount === 1;
  }

  async noteStatus(id: string, providerStatus: string, progress: BatchProgress | null, now: number): Promise<void> {
    await this.#q('UPDATE batches SET provider_status = $1, provider_completed = $2, provider_failed = $3, updated_at = $4 WHERE id = $5', [
      providerStatus,
      progress?.completed ?? null,
      progress?.failed ?? null,
      now,
      id,
    ]);
  }

  async adopt(id: string, fromRunId: string, toRunId: string, now: number): Promise<boolean> {
    const r = await this.#q(
      `UPDATE batches SET run_id = $1, updated_at = $2 WHERE id = $3 AND run_id = $4
      AND state IN ('preparing', 'submitted')`,
      [toRunId, now, id, fromRunId],
    );
    return r.rowCount === 1;
  }

  async end(id: string, e: BatchEnd): Promise<number> {
    return inTransaction(this.#pool, async (client) => {
      const back = await requeueHeld(client, id, e);
      await client.query(
        `UPDATE batches SET state = $1, provider_status = coalesce($2, provider_status), done = $3, failed = $4,
          requeued = $5, error = $6, updated_at = $7, ended_at = $7 WHERE id = $8`,
        [e.state, e.providerStatus, e.done, e.failed, back + (e.requeuedBefore ?? 0), pgText(e.error), e.now, id],
      );
      return back + (e.requeuedBefore ?? 0);
    });
  }

  async abandonUnsent(deadOwners: readonly string[], now: number): Promise<number> {
    return inTransaction(this.#pool, async (client) => {
      // taken in the same statement that abandons them: two reclaims never both hand one back
      const ids = (
        await client.query<{ id: string }>(
          `UPDATE batches SET state = 'abandoned', error = CASE WHEN base_url = '${MOCK_BASE_URL}' THEN $4 ELSE $3 END, updated_at = $2, ended_at = $2
          WHERE ${unsentOfStoppedRunWhere('run_id = ANY($1::text[])')} RETURNING id`,
          [[...deadOwners], now, STOPPED_BEFORE_CREATED, MOCK_RUN_STOPPED],
        )
      ).rows.map((r) => r.id);
      let requeued = 0;
      for (const id of ids) {
        const back = await requeueHeld(client, id, { refund: true, now });
        await client.query('UPDATE batches SET requeued = $1 WHERE id = $2', [back, id]);
        requeued += back;
      }
      return requeued;
    });
  }

  async held(id: string): Promise<HeldJob[]> {
    const r = await this.#q(
      `SELECT key, attempts, model, CASE WHEN strpos(request, '"response_format"') > 0 THEN request END AS request
      FROM jobs WHERE lease_owner = $1 AND state = 'running' ORDER BY seq`,
      [batchOwner(id)],
    );
    return r.rows.map((row) => ({ key: row.key, attempts: Number(row.attempts), model: row.model, request: row.request ?? null }));
  }

  async open(): Promise<BatchRow[]> {
    const r = await this.#q(`SELECT ${COLUMNS} FROM batches WHERE state IN ('preparing', 'submitted') ORDER BY created_at, id`);
    return r.rows.map(toRow);
  }

  async recent(limit: number): Promise<BatchRow[]> {
    const r = await this.#q(`SELECT ${COLUMNS} FROM batches ORDER BY created_at DESC, id DESC LIMIT $1`, [limit]);
    return r.rows.map(toRow);
  }

  #q(sql: string, params: unknown[] = []) {
    return query<Record<string, any>>(this.#pool, sql, params);
  }
}

function toRow(r: Record<string, any>): BatchRow {
  return {
    id: r.id,
    runId: r.run_id,
    baseUrl: r.base_url,
    apiKey: apiKeyOfRow(r as KeyColumns),
    progress: progressOfRow(r as KeyColumns),
    state: r.state as BatchState,
    providerBatchId: r.provider_batch_id,
    inputFileId: r.input_file_id,
    providerStatus: r.provider_status,
    jobs: Number(r.jobs),
    done: Number(r.done),
    failed: Number(r.failed),
    requeued: Number(r.requeued),
    error: r.error,
    createdAt: Number(r.created_at),
    updatedAt: Number(r.updated_at),
    endedAt: r.ended_at === null ? null : Number(r.ended_at),
  };
}

/**
 * Jobs a submission still holds were not answered: pending again, in the caller's transaction. One
 * whose document changed while it was in the batch is needed by no item: dropped, never resent.
 * Returns how many came back.
 */
async function requeueHeld(client: pg.PoolClient, id: string, e: Pick<BatchEnd, 'refund' | 'now' | 'jobError'>): Promise<number> {
  // before the jobs' rows are locked: an enqueue holding its turn may wait on them (a document
  // enqueued again as it was), while the orphan drop below would wait on its turn, a deadlock
  await client.query(AFTER_ENQUEUE_IN_PROGRESS_SQL);
  const back = (
    await client.query<{ key: string }>(
      `UPDATE jobs SET state = 'pending', attempts = greatest(attempts - $3::int, 0), error = coalesce($4::text, error),
      lease_owner = NULL, lease_expires_at = NULL, updated_at = $1 WHERE lease_owner = $2 AND state = 'running' RETURNING key`,
      [e.now, batchOwner(id), e.refund ? 1 : 0, e.jobError ?? null],
    )
  ).rows.map((r) => r.key);
  await dropOrphans(client, back);
  return back.length;
}
