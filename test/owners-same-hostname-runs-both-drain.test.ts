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
 * Two live runs on two machines (containers, cloned VMs) that share a hostname and a queue: each
 * one's pid does not exist on the other's machine. At the end, the drain branch of runQueue asks
 * `reclaim()` whether some run is "dying" (same host, pid gone, heartbeat fresh) and, if so, sleeps
 * and asks again. Each run keeps beating while it sleeps there, so each sees the other as dying
 * forever: both wait for each other and neither ever ends, although the queue is drained.
 */
describe('two runs on same-hostname machines both end when the queue is drained', () => {
  it('both end once the queue is drained, instead of waiting for each other forever', async () => {
    const fake = await startFake({ latencyMs: 50 });
    const path = join(tempDir(), 'q.db');
    const seed = new SqliteStore(path);
    await seedJobs(seed, 8);
    await seed.close();

    const stop = new AbortController();
    const guard = setTimeout(() => stop.abort(new Error('test guard')), 8000);
    const provider = () => new OpenAIProvider({ baseUrl: fake.url, apiKey: 'sk-test-secret', timeoutMs: 5000 });
    const storeA = new SqliteStore(path);
    const storeB = new SqliteStore(path);
    // Each machine sees only its own pid alive.
    const runA = runQueue(
      {
        store: storeA,
        provider: provider(),
        host: 'worker',
        pid: 4_190_001,
        isAlive: (p) => p === 4_190_001,
        runId: 'run-a',
        stopSignal: stop.signal,
      },
      { ...fast, concurrency: 2 },
    );
    const runB = runQueue(
      {
        store: storeB,
        provider: provider(),
        host: 'worker',
        pid: 4_190_002,
        isAlive: (p) => p === 4_190_002,
        runId: 'run-b',
        stopSignal: stop.signal,
      },
      { ...fast, concurrency: 2 },
    );
    const [a, b] = await Promise.all([runA, runB]);
    clearTimeout(guard);
    await storeA.close();
    await storeB.close();
    expect(a.done + b.done).toBe(8);
    // Observed: both 'signal' (ended only by the 8 s guard), although the queue drained in ~0.3 s.
    expect([a.reason, b.reason]).toEqual(['drained', 'drained']);
  }, 20_000);
});
