import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OpenAIProvider } from '../src/provider/openai.js';
import { runQueue } from '../src/scheduler/run-queue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { jobKey } from '../src/request.js';
import { requestFor, seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';

/**
 * Enqueue drops the old job of a changed document only if it is pending or failed at that moment.
 * If a run holds it (running, e.g. backing off after a 5xx) while the fix is enqueued, it is kept;
 * when that run stops and hands it back, it is a pending job no item points to, and nothing ever
 * drops it again: the next run sends (and pays for) the old prompt, and `status` counts it forever.
 */
describe('the old job of a changed document, held by a run at enqueue time, is never sent', () => {
  it('is never sent once handed back', async () => {
    const fake = await startFake();
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    const [oldKey] = await seedJobs(store, 1);
    const t = Date.now();
    await store.claim({ owner: 'run-x', limit: 1, now: t, leaseUntil: t + 60_000, maxAttempts: 5 });
    const request = requestFor(0, { text: 'Summarize document 0, fixed prompt.' });
    const r = await store.enqueue(
      [{ itemId: 'doc-0', source: 'seed', meta: null, key: jobKey(request), request, model: 'gpt-4o-mini', priority: 0 }],
      t + 1,
    );
    expect(r.movedItems).toBe(1);
    await store.release('run-x', { refund: true, now: t + 2 }); // run-x stops
    await runQueue(
      { store, provider: new OpenAIProvider({ baseUrl: fake.url, apiKey: 'sk-test-secret', timeoutMs: 5000 }) },
      { retryDelayMs: 10, heartbeatMs: 200 },
    );
    const total = (await store.status()).total;
    await store.close();
    // Observed: the old prompt is sent once and stays as a second (done) job with no item.
    expect(fake.sentCount(oldKey!)).toBe(0);
    expect(total).toBe(1);
  });
});
