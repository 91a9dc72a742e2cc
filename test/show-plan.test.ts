import { describe, expect, it } from 'vitest';
import { answeredSql, ITEM_SQL as SQLITE_ITEM_SQL } from '../src/store/sqlite/read.js';
import { ATTEMPTS_OF_JOB, DROP_ATTEMPTS_SQL, INSERT_ATTEMPT_SQL } from '../src/store/sqlite/attempts.js';
import { exportJobColumns } from '../src/store/rows.js';
import { ITEM_SQL as PG_ITEM_SQL } from '../src/store/postgres/read.js';
import type { SqliteStore } from '../src/store/sqlite/store.js';
import type { PostgresStore } from '../src/store/postgres/store.js';
import { STORE_KINDS, skipUnavailable } from './helpers/stores.js';

// `llmq show` must stay a few index lookups at ten million items: a plan that scans a table is a
// bug whatever the queue's size, so the plans are checked here rather than timed.
describe('show reads through indexes', () => {
  it('SQLite: every read of item() searches an index, none scans', async () => {
    const { store } = await STORE_KINDS[0]!.fresh();
    const db = (store as SqliteStore).db;
    for (const [name, sql] of Object.entries(SQLITE_ITEM_SQL)) {
      const params = Array.from(sql.match(/\?/g) ?? [], () => 'x');
      const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((r) => r.detail).join('; ');
      expect(plan, name).toMatch(/USING (COVERING )?INDEX/);
      expect(plan, name).not.toMatch(/\bSCAN\b|TEMP B-TREE/);
    }
  });

  it("SQLite: a job's attempts are inserted, read and deleted through indexes, never by a scan of attempts", async () => {
    const { store } = await STORE_KINDS[0]!.fresh();
    const db = (store as SqliteStore).db;
    // each names the attempts of one job by seq or by key (migration 9): a condition that fits
    // neither partial index still answers right, by reading every attempt for every job
    const statements = {
      insert: INSERT_ATTEMPT_SQL,
      drop: DROP_ATTEMPTS_SQL,
      exportLatency: `SELECT ${exportJobColumns({}, ATTEMPTS_OF_JOB)} FROM jobs j WHERE j.seq = ?`,
      answered: answeredSql(false),
    };
    for (const [name, sql] of Object.entries(statements)) {
      const params = Array.from(sql.match(/\?/g) ?? [], () => 'x');
      const plan = (db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((r) => r.detail).join('; ');
      expect(plan, name).not.toMatch(/SCAN (a|attempts)\b/);
      if (name !== 'insert') expect(plan, name).toMatch(/attempts_by_job.*attempts_by_key|attempts_by_key.*attempts_by_job/);
    }
  });

  it('PostgreSQL: every read of item() can use an index (sequential scans turned off)', async (ctx) => {
    const kind = STORE_KINDS[1]!;
    skipUnavailable(kind, ctx);
    const { store } = await kind.fresh();
    const client = await (store as PostgresStore).pool.connect();
    try {
      await client.query('SET enable_seqscan = off');
      await client.query('SET enable_sort = off');
      for (const [name, sql] of Object.entries(PG_ITEM_SQL)) {
        const plan = (await client.query(`EXPLAIN ${sql}`.replace('$1', `'x'`))).rows.map((r) => r['QUERY PLAN']).join('\n');
        // an index walked from end to end (to avoid a sort) would have a Filter instead
        expect(plan, name).toMatch(/Index Cond/);
        // a disabled plan node is still chosen when nothing else is possible: none may be left
        expect(plan, name).not.toMatch(/Seq Scan|Sort/);
      }
    } finally {
      client.release();
    }
  });
});
