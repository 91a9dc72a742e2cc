import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { collect, spawnCli } from './helpers/cli.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { waitFor } from './helpers/wait.js';

// A run keeps its SQLite file open: removed under it, the file lives on until the run ends, and
// every answer paid for meanwhile was stored in it, where nothing will ever read it.

describe('a run whose queue file is removed under it', () => {
  it('stops at its next heartbeat, saying where its answers went, instead of paying on into the removed file', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 400);
    await store.close();
    // 400 jobs, 2 at a time, 100 ms each: 20 s of work
    const child = spawnCli(['run', '--db', db, '--provider', 'mock', '--mock-latency', '100', '--concurrency', '2', '--json']);
    const done = collect(child, 30_000);
    let events = '';
    child.stdout!.on('data', (d) => (events += String(d)));
    await waitFor(() => events.includes('"event":"job:done"'), { what: 'a first answer stored', timeoutMs: 15_000 });
    const removedAt = Date.now();
    for (const f of [db, `${db}-wal`, `${db}-shm`]) rmSync(f, { force: true });
    const r = await done;
    expect(r.code, r.stderr).toBe(1);
    // within a heartbeat (2 s) and the requests out then, not the 20 s the work would take
    expect(Date.now() - removedAt).toBeLessThan(8_000);
    expect(r.stderr).toContain(`${db} was removed while this run wrote to it: the answers stored since went into the removed file`);
  }, 40_000);
});
