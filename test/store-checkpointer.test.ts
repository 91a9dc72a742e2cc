import { NO_STATS } from './helpers/stores.js';
import { existsSync, statSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';

// A run's SQLite writer leaves WAL checkpoints (page copies and fsyncs) to a worker thread, so they
// never block its event loop (src/store/sqlite/checkpointer.ts).
describe('SQLite checkpoints during a run', () => {
  it("the run's connection checkpoints only past 4000 pages; a worker copies its commits into the file; after the run it is as before", async () => {
    const path = join(tempDir(), 'q.db');
    const store = new SqliteStore(path);
    const autocheckpoint = () => store.db.pragma('wal_autocheckpoint', { simple: true });
    expect(autocheckpoint()).toBe(1000);
    await store.startRun({ id: 'run-1', host: 'h', pid: 1, startedAt: 1, options: {} });
    expect(autocheckpoint()).toBe(4000);
    const before = statSync(path).size;
    // about 1 MB of commits, well under the 1000 pages (4 MB) of an automatic checkpoint
    await seedJobs(store, 2000, { text: (n) => `document ${n} `.repeat(20) });
    await expect.poll(() => statSync(path).size, { timeout: 10_000, interval: 50 }).toBeGreaterThan(before + 500_000);
    await store.finishRun('run-1', 2, 'drained', {
      ...NO_STATS,
      concurrency: 0,
      inFlight: 0,
      paused: null,
      lanes: [],
    });
    expect(autocheckpoint()).toBe(1000);
    await store.close();
  });

  it('keeps the WAL from growing while the run commits without a pause (PASSIVE alone never rewinds it)', async () => {
    const path = join(tempDir(), 'q.db');
    const store = new SqliteStore(path);
    await store.startRun({ id: 'run-1', host: 'h', pid: 1, startedAt: 1, options: {} });
    // a writer that never leaves the WAL idle: 100 KB commits back to back for 4 s, the table itself kept small
    store.db.exec('CREATE TABLE filler (b BLOB)');
    const insert = store.db.prepare('INSERT INTO filler (b) VALUES (?)');
    const trim = store.db.prepare('DELETE FROM filler WHERE rowid < (SELECT max(rowid) FROM filler) - 200');
    const commit = store.db.transaction(() => {
      for (let i = 0; i < 25; i++) insert.run(randomBytes(4096));
      trim.run();
    });
    let largestWal = 0;
    const end = Date.now() + 4_000;
    while (Date.now() < end) {
      commit();
      if (existsSync(`${path}-wal`)) largestWal = Math.max(largestWal, statSync(`${path}-wal`).size);
      await new Promise((r) => setImmediate(r));
    }
    // 4000 pages (16 MB) before the writer checkpoints, and what it adds meanwhile; without it, hundreds of MB
    expect(largestWal).toBeLessThan(48 * 1024 * 1024);
    await store.close();
  }, 20_000);

  it("copies a bulk load's commits into the file while the load goes on; after it, the connection checkpoints as before", async () => {
    const path = join(tempDir(), 'q.db');
    const store = new SqliteStore(path);
    const before = statSync(path).size;
    store.beginLoad();
    // about 6 MB in batches of 1000 (bulk: the queue was empty), far under the 64 MB past which the
    // load's writer thread checkpoints by itself: only the load's checkpointer copies it this soon
    await seedJobs(store, 3000, { text: (n) => `document ${n} `.repeat(120) });
    await expect.poll(() => statSync(path).size, { timeout: 10_000, interval: 20 }).toBeGreaterThan(before + 4_000_000);
    await store.endLoad();
    // the enqueue's own setting (SqliteStore.ENQUEUE_PRAGMAS), not the run's 4000 nor the default
    expect(store.db.pragma('wal_autocheckpoint', { simple: true })).toBe(16384);
    expect((await store.status()).counts.pending).toBe(3000);
    await store.close();
  });

  it("stops the load's checkpointer also when the load cannot be finished", async () => {
    const path = join(tempDir(), 'q.db');
    const store = new SqliteStore(path);
    store.beginLoad();
    await seedJobs(store, 1000);
    // an item whose job is not in the queue: finishing the load refuses it (only a bug could do this,
    // so only the database itself can set it up; foreign keys are off while a load lasts)
    store.db.prepare("INSERT INTO items (id, source, job_key, created_at, updated_at) VALUES ('orphan', 'x', 'no-such-job', 1, 1)").run();
    await expect(store.endLoad()).rejects.toThrow(/an item points at job no-such-job/);
    expect(store.db.pragma('wal_autocheckpoint', { simple: true })).toBe(16384);
    await store.close();
  });
});
