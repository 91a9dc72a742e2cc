import { join } from 'node:path';
import { describe, expect, it, vi } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';

// An enqueue's connection keeps SQLite's temporary storage in memory (SqliteStore.ENQUEUE_PRAGMAS):
// each insert into a queue that has jobs keeps a statement journal, which on a file cost a resumed
// enqueue 40% of its time. A bulk load's index builds sort every key of the queue, which at ten
// million jobs is more than memory should hold: they spill to temporary files (finishBulkLoad).
const MEMORY = 2;
const FILE = 1;

describe("an enqueue's temporary storage", () => {
  it('is memory while rows go in; a bulk load builds its indexes with files, then gives memory back', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    const tempStore = () => store.db.pragma('temp_store', { simple: true });
    // the settings an index build ran under: observed where the store runs its CREATE INDEX
    const duringBuilds: unknown[] = [];
    const exec = store.db.exec.bind(store.db);
    vi.spyOn(store.db, 'exec').mockImplementation((sql: string) => {
      if (/CREATE (UNIQUE )?INDEX IF NOT EXISTS (jobs_key|items_job)/.test(sql)) duringBuilds.push(tempStore());
      return exec(sql);
    });
    store.beginLoad();
    await seedJobs(store, 2000); // into an empty queue, 1000 a batch: a bulk load
    expect(tempStore()).toBe(MEMORY);
    await store.endLoad();
    expect(duringBuilds).toEqual([FILE, FILE]);
    expect(tempStore()).toBe(MEMORY);

    // into a queue that has jobs: no bulk load, and the inserts' journals in memory
    store.beginLoad();
    await seedJobs(store, 3000);
    await store.endLoad();
    expect(tempStore()).toBe(MEMORY);
    expect((await store.status()).counts.pending).toBe(3000);
    await store.close();
  });
});
