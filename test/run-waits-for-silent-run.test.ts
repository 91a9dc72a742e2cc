import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OpenAIProvider } from '../src/provider/openai.js';
import { runQueue } from '../src/scheduler/run-queue.js';
import { startText } from '../src/cli/progress/lines.js';
import type { SchedulerEventMap } from '../src/scheduler/events.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { claimOpts } from './helpers/stores.js';
import { seedJobs } from './helpers/seed.js';
import { startFake } from './helpers/start-fake.js';
import { tempDir } from './helpers/tmp.js';

/**
 * A run killed on another machine cannot be checked from here (its pid means nothing on this host):
 * its jobs come back only when their leases run out. A run left to finish the queue must wait for
 * them rather than exit 0 with them undone (`run && export` would export an unfinished queue).
 */
describe('a run whose queue has jobs held by a run that stopped heartbeating elsewhere', () => {
  it('waits for their leases to run out and does them, instead of ending with them undone', async () => {
    const fake = await startFake({ latencyMs: 5 });
    const path = join(tempDir(), 'q.db');
    const store = new SqliteStore(path);
    await seedJobs(store, 20);
    const now = Date.now();
    // killed on "otherbox" 10 s ago, holding 5 jobs whose leases run out in 1.5 s
    await store.startRun({ id: 'run-gone', host: 'otherbox', pid: 4_190_002, startedAt: now - 10_000, options: {} });
    const held = await store.claim(claimOpts({ owner: 'run-gone', limit: 5, now, leaseUntil: now + 1500 }));
    expect(held.jobs).toHaveLength(5);

    let start: SchedulerEventMap['run:start'] | undefined;
    const summary = await runQueue(
      {
        store,
        provider: new OpenAIProvider({ baseUrl: fake.url, apiKey: 'sk-test-secret', timeoutMs: 5000 }),
        emit: (event, payload) => {
          if (event === 'run:start') start = payload as SchedulerEventMap['run:start'];
        },
      },
      { concurrency: 4, heartbeatMs: 100 },
    );
    // said at the start: up to that many may come back when the leases run out
    expect(start).toMatchObject({ total: 15, silentMayHold: 5 });
    expect(startText(start!, { db: 'q.db', provider: null })).toMatch(
      /: 15 jobs to do; up to 5 more held by a run that stopped heartbeating, back when its leases run out \(a minute at most\)$/,
    );
    expect(summary.reason).toBe('drained');
    expect(summary.done).toBe(20);
    expect((await store.status()).counts).toMatchObject({ done: 20, running: 0, pending: 0 });
    await store.close();
  }, 30_000);
});
