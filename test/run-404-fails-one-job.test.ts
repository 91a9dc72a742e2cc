import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OpenAIProvider } from '../src/provider/openai.js';
import { runQueue, type RunOptions } from '../src/scheduler/run-queue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { reply } from './helpers/fake-openai.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';

const fast: RunOptions = { retryDelayMs: 10, maxRetryDelayMs: 50, heartbeatMs: 200, outage: { probeDelayMs: 100, maxProbeDelayMs: 400 } };

/**
 * "404 before any answer stops the run" is decided on this run's own `done` counter, and the 404'd
 * try is recorded `not_counted` (attempt given back), so the job goes back to pending at the head of
 * the queue. When the 404 belongs to one job (say one JSONL line names a model or deployment that
 * does not exist, in a queue of many models), every later run claims that job first, gets the 404
 * before any answer, and stops: the other 9 documents are never worked and the job never ends
 * `failed` (a 404 is fatal for the job: the failure policy, src/scheduler/decide.ts, as
 * docs/architecture.md places it). No run makes progress, ever.
 */
describe('a 404 for one job at the head of the queue fails that job, not every run', () => {
  it('does not block every later run: the others get done and the 404 job ends failed', async () => {
    const fake = await startFake();
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    const keys = await seedJobs(store, 10);
    fake.respond((r) =>
      r.key === keys[0] ? reply.error(404, 'The model `gpt-old` does not exist', { code: 'model_not_found' }) : undefined,
    );
    const p = new OpenAIProvider({ baseUrl: fake.url, apiKey: 'sk-test-secret', timeoutMs: 5000 });
    const reasons: string[] = [];
    for (let i = 0; i < 3; i++) reasons.push((await runQueue({ store, provider: p }, { ...fast, concurrency: 1 })).reason);
    const head = (await store.item('doc-0'))!.job; // seedJobs: item doc-0 is job keys[0]
    const done = (await store.status()).counts.done;
    await store.close();
    // Observed: reasons ['fatal', 'fatal', 'fatal'], done 0, head job pending with 0 attempts.
    expect({ done, head: head.state }).toEqual({ done: 9, head: 'failed' });
  }, 15_000);
});
