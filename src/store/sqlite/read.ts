import { tallyJobs } from '../tally.js';
import type { Db } from './open.js';
import {
  type ExportFilter, type ExportRow, type ItemDetail, type JobRow, type JobState, type RunRow, type StatusSnapshot,
} from '../types.js';

const EXPORT_PAGE = 1000;

/** The read side of the SQLite store: status, one item, and the export stream. */
export class SqliteReader {
  readonly #db: Db;
  constructor(db: Db) {
    this.#db = db;
  }

  status(_now: number): StatusSnapshot {
    const db = this.#db;
    return db.transaction(() => {
      const rows = db.prepare(`SELECT model, state, count(*) AS n, coalesce(sum(prompt_tokens), 0) AS p,
          coalesce(sum(completion_tokens), 0) AS c FROM jobs INDEXED BY jobs_usage GROUP BY model, state`).all() as
        Array<{ model: string; state: JobState; n: number; p: number; c: number }>;
      const tally = tallyJobs(rows);
      const items = db.prepare('SELECT count(*) FROM items').pluck().get() as number;
      const failures = db.prepare(`SELECT coalesce(error, 'unknown error') AS error, count(*) AS count FROM jobs
          WHERE state = 'failed' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 10`).all() as Array<{ error: string; count: number }>;
      const retrying = db.prepare(`SELECT count(*) FROM jobs WHERE state = 'pending' AND attempts > 0`).pluck().get() as number;
      const oldestPendingAt = db.prepare(`SELECT min(created_at) FROM jobs WHERE state = 'pending'`).pluck().get() as number | null;
      const activeRuns = this.activeRuns();
      const last = db.prepare('SELECT * FROM runs ORDER BY started_at DESC LIMIT 1').get() as RawRun | undefined;
      return {
        ...tally, items, failures, retrying,
        oldestPendingAt: oldestPendingAt ?? null, activeRuns, lastRun: last ? toRun(last) : null,
      };
    })();
  }

  activeRuns(): RunRow[] {
    const rows = this.#db.prepare('SELECT * FROM runs WHERE ended_at IS NULL ORDER BY started_at DESC').all() as RawRun[];
    return rows.map(toRun);
  }

  item(id: string): ItemDetail | null {
    const db = this.#db;
    return db.transaction(() => {
      const item = db.prepare('SELECT * FROM items WHERE id = ?').get(id) as
        { id: string; source: string; job_key: string; meta: string | null } | undefined;
      if (!item) return null;
      const job = db.prepare('SELECT * FROM jobs WHERE key = ?').get(item.job_key) as RawJob;
      const attempts = (db.prepare('SELECT * FROM attempts WHERE job_key = ? ORDER BY id').all(item.job_key) as RawAttempt[]).map((a) => ({
        key: a.job_key, runId: a.run_id, attempt: a.attempt, startedAt: a.started_at, endedAt: a.ended_at,
        latencyMs: a.latency_ms, status: a.status, outcome: a.outcome as ItemDetail['attempts'][number]['outcome'], error: a.error,
        usage: a.prompt_tokens === null ? null : { promptTokens: a.prompt_tokens, completionTokens: a.completion_tokens ?? 0 },
      }));
      return { id: item.id, source: item.source, meta: item.meta ? JSON.parse(item.meta) : null, job: toJob(job), attempts };
    })();
  }

  /** Items in input order, a page at a time, so a million rows never sit in memory at once. */
  async *exportRows(filter: ExportFilter): AsyncIterable<ExportRow> {
    const states = filter.states?.length ? filter.states : null;
    const where = states ? `AND j.state IN (${states.map(() => '?').join(', ')})` : '';
    const page = this.#db.prepare(`SELECT i.seq, i.id, i.source, i.meta, j.key, j.state, j.model, j.output, j.response, j.error,
        j.attempts, j.prompt_tokens, j.completion_tokens,
        (SELECT latency_ms FROM attempts a WHERE a.job_key = j.key ORDER BY a.id DESC LIMIT 1) AS latency_ms
      FROM items i JOIN jobs j ON j.key = i.job_key
      WHERE i.seq > ? ${where} ORDER BY i.seq LIMIT ${EXPORT_PAGE}`);
    let after = 0;
    for (;;) {
      const rows = page.all(after, ...(states ?? [])) as RawExport[];
      for (const r of rows) {
        yield {
          id: r.id, source: r.source, meta: r.meta ? JSON.parse(r.meta) : null, key: r.key, state: r.state, model: r.model,
          output: r.output, response: r.response, error: r.error, attempts: r.attempts,
          usage: r.prompt_tokens === null ? null : { promptTokens: r.prompt_tokens, completionTokens: r.completion_tokens ?? 0 },
          latencyMs: r.latency_ms,
        };
      }
      if (rows.length < EXPORT_PAGE) return;
      after = rows[rows.length - 1]!.seq;
    }
  }
}

interface RawRun {
  id: string; host: string; pid: number; started_at: number; heartbeat_at: number; ended_at: number | null;
  exit_reason: string | null; options: string; stats: string | null;
}
interface RawJob {
  key: string; request: string; model: string; state: JobState; priority: number; attempts: number; run_after: number;
  lease_owner: string | null; lease_expires_at: number | null; output: string | null; response: string | null;
  prompt_tokens: number | null; completion_tokens: number | null; error: string | null; created_at: number;
  updated_at: number; finished_at: number | null;
}
interface RawAttempt {
  job_key: string; run_id: string; attempt: number; started_at: number; ended_at: number; latency_ms: number;
  status: number | null; outcome: string; error: string | null; prompt_tokens: number | null; completion_tokens: number | null;
}
interface RawExport {
  seq: number; id: string; source: string; meta: string | null; key: string; state: JobState; model: string;
  output: string | null; response: string | null; error: string | null; attempts: number;
  prompt_tokens: number | null; completion_tokens: number | null; latency_ms: number | null;
}

export function toRun(r: RawRun): RunRow {
  return {
    id: r.id, host: r.host, pid: r.pid, startedAt: r.started_at, heartbeatAt: r.heartbeat_at, endedAt: r.ended_at,
    exitReason: r.exit_reason, options: JSON.parse(r.options), stats: r.stats ? JSON.parse(r.stats) : null,
  };
}

export function toJob(j: RawJob): JobRow {
  return {
    key: j.key, request: j.request, model: j.model, state: j.state, priority: j.priority, attempts: j.attempts,
    runAfter: j.run_after, leaseOwner: j.lease_owner, leaseExpiresAt: j.lease_expires_at, output: j.output,
    response: j.response, usage: j.prompt_tokens === null ? null : { promptTokens: j.prompt_tokens, completionTokens: j.completion_tokens ?? 0 },
    error: j.error, createdAt: j.created_at, updatedAt: j.updated_at, finishedAt: j.finished_at,
  };
}
