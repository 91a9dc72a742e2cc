import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OpenAIProvider } from '../src/provider/openai.js';
import { runQueue, type RunOptions } from '../src/scheduler/run-queue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';

const fast: RunOptions = { retryDelayMs: 10, maxRetryDelayMs: 50, heartbeatMs: 100, outage: { probeDelayMs: 100, maxProbeDelayMs: 400 } };

/**
 * `deadOwners` trusts "same hostname + pid not alive here" alone. Two machines (or VMs, or
 * containers with a set hostname) that share a PostgreSQL queue and happen to have the same
 * hostname then declare each other dead on sight, while their heartbeats are fresh: the live run's
 * jobs are reclaimed mid-request and sent again by the other run (invariant 6, docs/architecture.md). Here run A stands
 * for the process on the other machine: same host name, a pid that does not exist on this one.
 */
describe('a run with a fresh heartbeat is not dead, though another machine shares its hostname', () => {
  it('is not declared dead while its heartbeat is fresh, so its jobs are not sent twice', async () => {
    const fake = await startFake({ latencyMs: 800 });
    const path = join(tempDir(), 'q.db');
    const seedStore = new SqliteStore(path);
    await seedJobs(seedStore, 8);
    await seedStore.close();

    const storeA = new SqliteStore(path);
    const storeB = new SqliteStore(path);
    const provider = () => new OpenAIProvider({ baseUrl: fake.url, apiKey: 'sk-test-secret', timeoutMs: 5000 });
    const runA = runQueue(
      { store: storeA, provider: provider(), host: 'worker', pid: 4_190_001, runId: 'run-a' },
      { ...fast, concurrency: 4 },
    );
    await fake.waitForRequests(4); // A holds 8 jobs, 4 of them in flight, heartbeating every 100 ms
    const runB = runQueue(
      { store: storeB, provider: provider(), host: 'worker', pid: process.pid, runId: 'run-b' },
      { ...fast, concurrency: 4 },
    );
    await Promise.all([runA, runB]);
    await storeA.close();
    await storeB.close();
    expect(fake.duplicates()).toEqual([]);
  });
});
