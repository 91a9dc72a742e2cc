import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OpenAIProvider } from '../src/provider/openai.js';
import { runQueue, type RunOptions } from '../src/scheduler/run-queue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { all } from './helpers/store-reads.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';
import { runCli } from './helpers/cli.js';
import { enqueueJsonl } from './helpers/e2e.js';
import { reply } from './helpers/fake-openai.js';

/**
 * MAX_UNCOUNTED_OUTAGES (job-runner.ts) counts a job's outage failures against it once it has been
 * the probe 20 times, whatever the provider did meanwhile. In a real outage the probe is always one
 * of the few jobs in hand (2 x concurrency), so an outage longer than ~20 probe intervals per job in
 * hand (about 7 minutes at --concurrency 1 and the default 10 s probe spacing) starts failing jobs
 * one after the other: exactly what the breaker is there to prevent ("pauses and probes instead of
 * burning every job's attempts"). The probe spacing is shrunk here so that "long" takes a second.
 */
describe('a long outage with refused connections burns no attempts', () => {
  it('burns no attempt however many probes it takes', async () => {
    const fake = await startFake();
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 4);
    await fake.down();
    setTimeout(() => void fake.up(), 2500);
    const options: RunOptions = {
      retryDelayMs: 10,
      maxRetryDelayMs: 50,
      heartbeatMs: 200,
      concurrency: 1,
      maxAttempts: 3,
      outage: { probeDelayMs: 5, maxProbeDelayMs: 10 },
    };
    const summary = await runQueue(
      { store, provider: new OpenAIProvider({ baseUrl: fake.url, apiKey: 'sk-test-secret', timeoutMs: 5000 }) },
      options,
    );
    const rows = await all(store.copier.dumpJobs());
    await store.close();
    // Observed: the jobs in hand fail with "gave up after 3 attempts: ... ECONNREFUSED" during the outage.
    expect(summary).toMatchObject({ done: 4, failed: 0 });
    expect(rows.every((r) => r.state === 'done' && r.attempts === 1)).toBe(true);
    // the probes are counted apart: neither retries nor tries of a job
    expect(summary.probes).toBeGreaterThan(10);
    expect(summary.requests - summary.probes).toBeGreaterThanOrEqual(3);
  }, 15_000);
});

describe("the run's summary after an outage", () => {
  it('says how many of the requests sent were probes: beside "0 retries", the tries that may be billed read as unsent', async () => {
    const fake = await startFake({ latencyMs: 5 });
    fake.respond(() => reply.serverError(503, 'Service Unavailable'));
    const { db } = await enqueueJsonl(
      tempDir(),
      Array.from({ length: 4 }, (_, i) => ({ id: `d${i}`, text: `document ${i}` })),
    );
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '-c', '2', '--max-outage', '4s', '--retry-delay', '50ms']);
    expect(r.code, r.stderr).toBe(1);
    const said =
      /(\d+) requests sent, (\d+) of them probes? while the provider was down \(one at a time; a failed one counts as no retry\)/.exec(
        r.stderr,
      );
    expect(said, r.stderr).not.toBeNull();
    expect(Number(said![1])).toBe(fake.received);
    // a probe a second or so apart, after the 503s in a row that opened the pause
    expect(Number(said![2])).toBeGreaterThanOrEqual(1);
    expect(Number(said![2])).toBeLessThan(fake.received);
  }, 30_000);
});
