import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OpenAIProvider } from '../src/provider/openai.js';
import { runQueue } from '../src/scheduler/run-queue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { jobKey } from '../src/request.js';
import { requestFor, seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';
import { reply } from './helpers/fake-openai.js';
import { waitFor } from './helpers/wait.js';

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

  it('is not sent by the live run holding it once its heartbeat finds no item needs it, nor retried: its backoff is woken', async () => {
    const fake = await startFake({ latencyMs: 20 });
    // doc-1's first try fails: it backs off, held (running), while the fix is enqueued
    fake.respond((r) => (r.body.includes('document 1:') && r.attempt === 1 ? reply.serverError(500) : undefined));
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    const oldKeys = await seedJobs(store, 8);
    const warnings: string[] = [];
    // 120 a minute at -c 4: the run holds every job, and the jobs it claimed for seconds before each goes out
    const run = runQueue(
      {
        store,
        provider: new OpenAIProvider({ baseUrl: fake.url, apiKey: 'sk-test-secret', timeoutMs: 5000 }),
        emit: (event, payload) => {
          if (event === 'warning') warnings.push((payload as { message: string }).message);
        },
      },
      { concurrency: 4, rpm: 120, retryDelayMs: 30_000, maxRetryDelayMs: 30_000, heartbeatMs: 200 },
    );
    await waitFor(() => fake.sentCount(oldKeys[1]!) === 1, { what: "doc-1's first try, refused" });
    // every document's prompt fixed: each moves to a new job; the old ones the run holds are kept, marked
    const rows = Array.from({ length: 8 }, (_, n) => {
      const request = requestFor(n, { text: `Summarize document ${n}, fixed prompt.` });
      return { itemId: `doc-${n}`, source: 'seed', meta: null, key: jobKey(request), request, model: 'gpt-4o-mini', priority: 0 };
    });
    await store.enqueue(rows, Date.now());
    const sentAtEnqueue = oldKeys.map((k) => fake.sentCount(k));
    const enqueuedAt = Date.now();
    const summary = await run;
    // doc-1, waiting out a backoff of 30 s, was woken and handed back: the run ended with the new jobs' pace (4 s)
    expect(Date.now() - enqueuedAt).toBeLessThan(15_000);
    // a heartbeat later (200 ms) the run knows; until then at most the one request the pace let go
    const sentAfter = oldKeys.reduce((n, k, i) => n + fake.sentCount(k) - sentAtEnqueue[i]!, 0);
    expect(sentAfter).toBeLessThanOrEqual(1);
    expect(fake.sentCount(oldKeys[1]!)).toBe(1); // its retry never went
    expect(warnings.some((w) => /needed by no document any more/.test(w))).toBe(true);
    // the old jobs the run held are gone, not left pending for the next run: the new ones are answered
    const status = await store.status();
    expect(status.counts).toMatchObject({ done: 8, pending: 0, running: 0, failed: 0 });
    // what the run answered: the new ones, and the old ones that went out before it knew
    expect(summary.done).toBe(8 + oldKeys.filter((k, i) => i !== 1 && fake.sentCount(k) > 0).length);
    await store.close();
  });
});
