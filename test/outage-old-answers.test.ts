import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OpenAIProvider } from '../src/provider/openai.js';
import type { SchedulerEventMap } from '../src/scheduler/events.js';
import { runQueue } from '../src/scheduler/run-queue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { reply, uniformLatency } from './helpers/fake-openai.js';
import { seedJobs } from './helpers/seed.js';
import { startFake } from './helpers/start-fake.js';
import { all } from './helpers/store-reads.js';
import { tempDir } from './helpers/tmp.js';

describe('an outage that begins while answers are on their way', () => {
  it('is not ended by the answers of requests sent before it began: one pause, no attempts used', async () => {
    // Answers take 150-450 ms; then the provider answers every request with an instant 503 for 2 s.
    // The answers of requests sent before the first 503's request still come in after it, for up to
    // 450 ms: each closed the breaker ("resumed after the outage"), another wave went out and failed,
    // and those failures used attempts (a run at -c 32 flapped 28 times in 15 s, 32 tries counted).
    const fake = await startFake({ latencyMs: uniformLatency(300, 150), record: true });
    let downFrom = Number.POSITIVE_INFINITY;
    fake.respond((r) => {
      if (r.index === 100) downFrom = Date.now();
      const now = Date.now();
      return now >= downFrom && now < downFrom + 2000 ? { ...reply.serverError(503), latencyMs: 0 } : undefined;
    });
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 300);
    const events: Array<keyof SchedulerEventMap> = [];
    const summary = await runQueue(
      { store, provider: new OpenAIProvider({ baseUrl: fake.url, apiKey: 'sk-test', timeoutMs: 5000 }), emit: (e) => events.push(e) },
      {
        concurrency: 32,
        maxAttempts: 2,
        retryDelayMs: 10,
        maxRetryDelayMs: 50,
        heartbeatMs: 200,
        outage: { probeDelayMs: 200, maxProbeDelayMs: 400 },
      },
    );
    expect(summary).toMatchObject({ done: 300, failed: 0 });
    // one outage: resumed once (each probe that fails tells the pause again, with its next probe)
    const resumed = events.filter((e) => e === 'resumed').length;
    const attempts = await all(store.copier.dumpAttempts());
    const counted503s = attempts.filter((a) => a.status === 503 && a.outcome === 'retry').length;
    // Resumed once; twice at most on a loaded machine (1 in 8-16 runs beside busy cores, s45): a request
    // the run stamped just after the first failing one can reach the fake before the outage begins and
    // be answered, a fresh answer by the run's clock (it closes the breaker, the next failures open it
    // again). The bug this guards against flapped 28 times in 15 s.
    expect(resumed).toBeGreaterThanOrEqual(1);
    expect(resumed).toBeLessThanOrEqual(2);
    // the failures of the requests out as the breaker opened, at most the concurrency's wave, for each
    // time it opened; not a wave after each old answer. Mostly 3 to 10: a loaded CI counted 16 beside
    // two openings (6cdf787) and 20 beside one (9645b6f: its 32 answered in one late turn of the loop)
    expect(counted503s).toBeLessThanOrEqual(32 * resumed);
    await store.close();
  });
});
