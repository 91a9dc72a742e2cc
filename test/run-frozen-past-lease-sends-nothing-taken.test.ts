import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MockProvider } from '../src/provider/mock.js';
import { type CompletionResult, type Provider, ProviderError } from '../src/provider/types.js';
import { jobKey } from '../src/request.js';
import { runQueue } from '../src/scheduler/run-queue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import type { Completion } from '../src/store/types.js';
import { requestFor, seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { gatedProvider } from './helpers/gated-provider.js';

/**
 * A run frozen past its leases (a laptop asleep, an event loop stalled) may find, when it wakes, that
 * another run took its jobs and answered them. It must not send one that had not left yet: that
 * would be paid twice. The freeze is a jump of the run's clock; the other run is the store's own
 * reclaim, claim and complete at the later time.
 */
const LEASE_MS = 60_000;

function answered(key: string, owner: string): Completion {
  const usage = { promptTokens: 5, completionTokens: 5 };
  return {
    owner,
    output: 'answered by the other run',
    response: '{}',
    usage,
    attempt: { key, runId: owner, attempt: 1, startedAt: 0, endedAt: 1, status: 200, outcome: 'done', error: null, usage },
  };
}

describe('a run frozen past its leases', () => {
  it.each([
    // the run wakes and goes on before its next heartbeat: the lease covering the job has run out
    { when: 'before its next heartbeat', heartbeatMs: 60_000 },
    // a heartbeat comes first and renews what is still the run's: the job's lease had run out before it
    { when: 'after a heartbeat that found its leases run out', heartbeatMs: 50 },
  ])('sends no job it held that had not left yet, woken $when', async ({ heartbeatMs }) => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    const [first, second] = await seedJobs(store, 2);
    let frozenFor = 0;
    const now = () => Date.now() + frozenFor;
    const { provider, sent, firstSent, release } = gatedProvider();
    // at 60 a minute, the first job is out (held at the provider), the second waits in hand for its turn
    await store.saveLaneLimits({ baseUrl: 'mock', model: 'gpt-4o-mini', rpm: 60, tpm: null, source: 'headers', at: Date.now() });
    const run = runQueue({ store, provider, now }, { concurrency: 2, leaseMs: LEASE_MS, heartbeatMs, retryDelayMs: 10 });
    await firstSent;
    while ((await store.status()).counts.running < 2) await new Promise((r) => setTimeout(r, 5));

    // two leases later, another run takes both jobs back and answers them
    frozenFor = 2 * LEASE_MS;
    expect(await store.reclaim(now(), [])).toBe(2);
    const taken = await store.claim({ owner: 'other-run', limit: 10, now: now(), leaseUntil: now() + LEASE_MS, maxAttempts: 5 });
    expect(taken.jobs.map((j) => j.key)).toEqual([first, second]);
    if (heartbeatMs < 1000) await new Promise((r) => setTimeout(r, 10 * heartbeatMs));
    for (const key of [first!, second!]) await store.complete(key, answered(key, 'other-run'));

    // the frozen run wakes: the first request was out already (its answer comes, and is not
    // stored over the other's); the second never leaves
    release();
    const summary = await run;
    expect(sent).toEqual([first]);
    // the answer that came was paid for: said, not counted done
    expect(summary).toMatchObject({ reason: 'drained', done: 0, answersNotStored: 1 });
    const status = await store.status();
    expect(status.counts).toEqual({ pending: 0, running: 0, done: 2, failed: 0 });
    expect((await store.item('doc-1'))!.job.output).toBe('answered by the other run');
    await store.close();
  });

  it.each([
    { limit: undefined, reason: 'drained' },
    // the try that never left is not one of the run's --limit
    { limit: 2, reason: 'limit' },
  ])('a job nobody took meanwhile goes back to pending at once and is sent afresh, once (limit $limit)', async ({ limit, reason }) => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    const [first, second] = await seedJobs(store, 2);
    let frozenFor = 0;
    const { provider, sent, firstSent, release } = gatedProvider();
    await store.saveLaneLimits({ baseUrl: 'mock', model: 'gpt-4o-mini', rpm: 60, tpm: null, source: 'headers', at: Date.now() });
    const run = runQueue(
      { store, provider, now: () => Date.now() + frozenFor },
      { concurrency: 2, leaseMs: LEASE_MS, heartbeatMs: 60_000, retryDelayMs: 10, limit },
    );
    await firstSent;
    while ((await store.status()).counts.running < 2) await new Promise((r) => setTimeout(r, 5));
    frozenFor = 2 * LEASE_MS;
    release();
    expect(await run).toMatchObject({ reason, done: 2 });
    expect(sent).toEqual([first, second]);
    expect((await store.status()).counts).toEqual({ pending: 0, running: 0, done: 2, failed: 0 });
    // the try that never left gave its attempt back
    expect((await store.item('doc-1'))!.job.attempts).toBe(1);
    await store.close();
  });

  it('a job backing off before a retry, taken back and claimed again meanwhile, is sent by the new claim alone', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    const [key] = await seedJobs(store, 1);
    let frozenFor = 0;
    const now = () => Date.now() + frozenFor;
    const mock = new MockProvider({ latencyMs: 1 });
    const sent: number[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const provider: Provider = {
      name: 'mock',
      async complete(body, options): Promise<CompletionResult> {
        sent.push(Date.now());
        // the first try fails (a 500: backs off 3 to 6 s); the next is held at the provider
        if (sent.length === 1) throw new ProviderError({ message: 'HTTP 500', scope: 'retryable', reason: 'server', status: 500 });
        if (sent.length === 2) await gate;
        return mock.complete(body, options);
      },
    };
    const run = runQueue({ store, provider, now }, { concurrency: 2, leaseMs: LEASE_MS, heartbeatMs: 60_000, retryDelayMs: 3000 });
    while ((await store.item('doc-0'))!.attempts.length < 1) await new Promise((r) => setTimeout(r, 5));
    // frozen past the lease while it backs off: taken back, then claimed again by this run's own claim loop
    frozenFor = 2 * LEASE_MS;
    expect(await store.reclaim(now(), [])).toBe(1);
    while (sent.length < 2) await new Promise((r) => setTimeout(r, 20));
    // the first claim's backoff ends while the second claim's request is out: it must not send too
    await new Promise((r) => setTimeout(r, 6500));
    release();
    expect(await run).toMatchObject({ reason: 'drained', done: 1 });
    expect(sent).toHaveLength(2);
    const item = (await store.item('doc-0'))!;
    expect(item.job).toMatchObject({ key, state: 'done', attempts: 2 });
    expect(item.attempts.map((a) => a.outcome)).toEqual(['retry', 'done']);
    await store.close();
  }, 20_000);

  it('a job backing off when the run froze past its lease goes back to pending with its tries counted, and is sent once more', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 1);
    let frozenFor = 0;
    const mock = new MockProvider({ latencyMs: 1 });
    let sent = 0;
    const provider: Provider = {
      name: 'mock',
      async complete(body, options): Promise<CompletionResult> {
        if (++sent === 1) throw new ProviderError({ message: 'HTTP 500', scope: 'retryable', reason: 'server', status: 500 });
        return mock.complete(body, options);
      },
    };
    const run = runQueue(
      { store, provider, now: () => Date.now() + frozenFor },
      { concurrency: 2, leaseMs: LEASE_MS, heartbeatMs: 60_000, retryDelayMs: 500 },
    );
    while ((await store.item('doc-0'))!.attempts.length < 1) await new Promise((r) => setTimeout(r, 5));
    frozenFor = 2 * LEASE_MS;
    expect(await run).toMatchObject({ reason: 'drained', done: 1 });
    expect(sent).toBe(2);
    // the failed try went out: it stays counted
    const item = (await store.item('doc-0'))!;
    expect(item.job).toMatchObject({ state: 'done', attempts: 2 });
    expect(item.attempts.map((a) => a.outcome)).toEqual(['retry', 'done']);
    await store.close();
  });

  it('a job it claimed again meanwhile is not handed back by the claim that lapsed: sent once', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    const row = (n: number, model: string, priority = 0) => {
      const request = requestFor(n, { model });
      return { itemId: `${model}-${n}`, source: 'seed', meta: null, key: jobKey(request), request, model, priority };
    };
    // -c 2: a and b take both slots and are held at the provider (their lane's limit is known: no
    // first request alone); c, of another model, waits for a slot
    const [a, b, c] = [row(0, 'm1'), row(1, 'm1'), row(2, 'm2', 1)];
    await store.saveLaneLimits({ baseUrl: 'mock', model: 'm1', rpm: 6000, tpm: null, source: 'headers', at: Date.now() });
    await store.enqueue([a, b, c], Date.now());
    let frozenFor = 0;
    const now = () => Date.now() + frozenFor;
    const { provider, sent, firstSent, release } = gatedProvider(2);
    const run = runQueue({ store, provider, now }, { concurrency: 2, leaseMs: LEASE_MS, heartbeatMs: 60_000, retryDelayMs: 10 });
    await firstSent;
    while ((await store.status()).counts.running < 3) await new Promise((r) => setTimeout(r, 5));
    expect(sent.sort()).toEqual([a.key, b.key].sort());
    // frozen past the lease: another run takes a and b back and answers them; c is pending again
    frozenFor = 2 * LEASE_MS;
    expect(await store.reclaim(now(), [])).toBe(3);
    const taken = await store.claim({ owner: 'other-run', limit: 2, now: now(), leaseUntil: now() + LEASE_MS, maxAttempts: 5 });
    expect(taken.jobs.map((j) => j.key).sort()).toEqual([a.key, b.key].sort());
    for (const key of [a.key, b.key]) await store.complete(key, answered(key, 'other-run'));
    // this run claims c again (its claim loop looks at least once a second) while its first claim waits
    while ((await store.status()).counts.running < 1) await new Promise((r) => setTimeout(r, 20));
    release();
    expect(await run).toMatchObject({ reason: 'drained' });
    expect(sent.filter((k) => k === c.key)).toHaveLength(1);
    expect((await store.status()).counts).toEqual({ pending: 0, running: 0, done: 3, failed: 0 });
    await store.close();
  });
});
