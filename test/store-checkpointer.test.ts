import { statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';

// A run's SQLite writer leaves WAL checkpoints (page copies and fsyncs) to a worker thread, so they
// never block its event loop (src/store/sqlite/checkpointer.ts).
describe('SQLite checkpoints during a run', () => {
  it("the run's connection does not checkpoint; a worker copies its commits into the file; after the run it does again", async () => {
    const path = join(tempDir(), 'q.db');
    const store = new SqliteStore(path);
    const autocheckpoint = () => store.db.pragma('wal_autocheckpoint', { simple: true });
    expect(autocheckpoint()).toBe(1000);
    await store.startRun({ id: 'run-1', host: 'h', pid: 1, startedAt: 1, options: {} });
    expect(autocheckpoint()).toBe(0);
    const before = statSync(path).size;
    // about 1 MB of commits, well under the 1000 pages (4 MB) of an automatic checkpoint
    await seedJobs(store, 2000, { text: (n) => `document ${n} `.repeat(20) });
    await expect.poll(() => statSync(path).size, { timeout: 10_000, interval: 50 }).toBeGreaterThan(before + 500_000);
    await store.finishRun('run-1', 2, 'drained', {
      done: 0,
      failed: 0,
      retried: 0,
      requests: 0,
      rateLimited: 0,
      promptTokens: 0,
      completionTokens: 0,
      jobsPerSecond: 0,
      concurrency: 0,
      inFlight: 0,
      paused: null,
      lanes: [],
    });
    expect(autocheckpoint()).toBe(1000);
    await store.close();
  });
});
