import Database from 'better-sqlite3';
import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { copyStore } from '../src/store/copy.js';
import type { EnqueueRow } from '../src/store/types.js';
import { sqliteAtVersion } from './helpers/stores.js';
import { LATEST_VERSION } from '../src/store/sqlite/migrations.js';
import { tempDir } from './helpers/tmp.js';

// Since migration 10 the SQLite store keeps a job's request in job_requests, apart from the job's row,
// which every change of state rewrites whole. Jobs enqueued before keep theirs in jobs.request.

const T0 = 1_760_000_000_000;
const RUN = 'r1';
const claimAll = (store: SqliteStore, limit = 10_000) =>
  store.claim({ owner: RUN, limit, now: T0, leaseUntil: T0 + 60_000, maxAttempts: 5 });

const row = (n: number, text = `document ${n}`): EnqueueRow => ({
  itemId: `doc-${n}`,
  source: `doc-${n}.txt`,
  meta: null,
  key: `key-${n}`,
  request: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: text }] }),
  model: 'm',
  priority: 0,
});

/** How the store holds its jobs' requests: in the row, apart, and requests whose job is gone. */
function layout(store: SqliteStore) {
  const count = (sql: string) => store.db.prepare(sql).pluck().get() as number;
  return {
    inRow: count("SELECT count(*) FROM jobs WHERE request <> ''"),
    apart: count('SELECT count(*) FROM job_requests'),
    orphans: count('SELECT count(*) FROM job_requests WHERE seq NOT IN (SELECT seq FROM jobs)'),
  };
}

describe("a job's request, kept apart from its row (SQLite migration 10)", () => {
  it('an enqueue writes each request once, apart, and every read finds it', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    try {
      const rows = [row(1), row(2, 'ünïcødé ✓'), row(3, 'x'.repeat(20_000))];
      await store.enqueue(rows, T0);
      expect(layout(store)).toEqual({ inRow: 0, apart: 3, orphans: 0 });
      expect((await store.item('doc-2'))!.job.request).toBe(rows[1]!.request);
      const toRun: string[] = [];
      for await (const j of store.jobsToRun(T0)) toRun.push(j.request);
      expect(toRun).toEqual(rows.map((r) => r.request));
      await store.startRun({ id: RUN, host: 'h', pid: 1, startedAt: T0, options: {} });
      const claimed = await claimAll(store);
      expect(claimed.jobs.map((j) => j.request)).toEqual(rows.map((r) => r.request));
      const usage = { promptTokens: 1, completionTokens: 1 };
      const attempt = {
        key: 'key-3',
        runId: RUN,
        attempt: 1,
        startedAt: T0,
        endedAt: T0 + 5,
        status: 200,
        outcome: 'done' as const,
        error: null,
        usage,
      };
      await store.complete('key-3', { owner: RUN, output: 'ok', response: '{}', usage, attempt });
      expect((await store.answered('m', { limit: 5, withRequest: true })).map((a) => a.request)).toEqual([rows[2]!.request]);
      // answering rewrote the job's row, and left the request as it was
      expect(layout(store)).toEqual({ inRow: 0, apart: 3, orphans: 0 });
    } finally {
      await store.close();
    }
  });

  it('a bulk load into an empty queue pairs each request with its job, repeated keys and all', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    try {
      const rows = Array.from({ length: 2500 }, (_, n) => row(n));
      // document 2400 repeats document 7: its job is the first one's, dropped when the load ends
      rows[2400] = { ...rows[7]!, itemId: 'doc-2400', source: 'doc-2400.txt' };
      store.beginLoad();
      for (let i = 0; i < rows.length; i += 1000) await store.enqueue(rows.slice(i, i + 1000), T0);
      expect(await store.endLoad()).toEqual({ repeatedJobs: 1 });
      expect(layout(store)).toEqual({ inRow: 0, apart: 2499, orphans: 0 });
      await store.startRun({ id: RUN, host: 'h', pid: 1, startedAt: T0, options: {} });
      const claimed = await claimAll(store);
      const sent = new Map(rows.map((r) => [r.key, r.request]));
      expect(claimed.jobs.length).toBe(2499);
      expect(claimed.jobs.filter((j) => j.request !== sent.get(j.key))).toEqual([]);
    } finally {
      await store.close();
    }
  });

  it('a job dropped because its document changed takes its request with it', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    try {
      await store.enqueue([row(1), row(2)], T0);
      const changed = { ...row(1, 'document 1, edited'), key: 'key-1-edited' };
      expect(await store.enqueue([changed], T0 + 1)).toMatchObject({ movedItems: 1, droppedJobs: 1 });
      expect(layout(store)).toEqual({ inRow: 0, apart: 2, orphans: 0 });
      expect((await store.item('doc-1'))!.job.request).toBe(changed.request);
    } finally {
      await store.close();
    }
  });

  it('an upgraded queue reads the requests of its old jobs from their rows, beside the new ones', async () => {
    const old = `INSERT INTO jobs (seq, key, request, model, state, created_at, updated_at) VALUES
        (1, 'old-1', '{"old":1}', 'm', 'pending', 1, 1), (2, 'old-2', '{"old":2}', 'm', 'done', 1, 1);
      INSERT INTO items (id, source, job_key, created_at, updated_at) VALUES ('a', 'a.txt', 'old-1', 1, 1), ('b', 'b.txt', 'old-2', 1, 1);`;
    const store = new SqliteStore(sqliteAtVersion(9, old));
    const copy = new SqliteStore(join(tempDir(), 'copy.db'));
    try {
      await store.enqueue([row(3)], T0);
      expect(layout(store)).toEqual({ inRow: 2, apart: 1, orphans: 0 });
      expect((await store.item('b'))!.job.request).toBe('{"old":2}');
      await copyStore(store, copy, { now: T0 });
      // a copy writes every request apart, the old ones too
      expect(layout(copy)).toEqual({ inRow: 0, apart: 3, orphans: 0 });
      for (const s of [store, copy]) {
        await s.startRun({ id: RUN, host: 'h', pid: 1, startedAt: T0, options: {} });
        expect((await claimAll(s)).jobs.map((j) => j.request)).toEqual(['{"old":1}', row(3).request]);
      }
    } finally {
      await Promise.all([store.close(), copy.close()]);
    }
  });

  it('waits for a run of the earlier llmq to end: it would send the new jobs empty', async () => {
    const now = Date.now();
    const deadPid = spawnSync(process.execPath, ['-e', '0']).pid!;
    const runs = (...rows: Array<[string, string, number, number]>) =>
      `INSERT INTO runs (id, host, pid, started_at, heartbeat_at, options) VALUES ${rows
        .map(([id, host, pid, beat]) => `('${id}', '${host}', ${pid}, ${beat}, ${beat}, '{}')`)
        .join(', ')};`;
    // alive: this process, beating now; and a run on another machine, beating now
    for (const live of [runs(['old-run', hostname(), process.pid, now]), runs(['far-run', 'elsewhere', 1, now - 5000])]) {
      const path = sqliteAtVersion(9, live);
      expect(() => new SqliteStore(path)).toThrow(
        /a run of an earlier llmq is working this queue \(run (old|far)-run, .*Let the run finish/,
      );
      // nothing was changed, and once the run has ended the upgrade goes ahead
      const raw = new Database(path);
      expect(raw.prepare('SELECT max(version) FROM llmq_migrations').pluck().get()).toBe(9);
      raw.exec('UPDATE runs SET ended_at = 1');
      raw.close();
      const store = new SqliteStore(path);
      expect(layout(store).apart).toBe(0);
      await store.close();
    }
    // dead: quiet for a minute, or its process gone on this host
    const dead = runs(['quiet', 'elsewhere', 1, now - 61_000], ['gone', hostname(), deadPid, now]);
    const store = new SqliteStore(sqliteAtVersion(9, dead));
    expect(store.db.prepare('SELECT max(version) FROM llmq_migrations').pluck().get()).toBe(LATEST_VERSION);
    await store.close();
  });
});
