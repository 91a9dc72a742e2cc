import { beforeEach, describe, expect, it } from 'vitest';
import { STORE_KINDS, T0, OWNER, claimOpts, rows, skipUnavailable } from './helpers/stores.js';
import { batchOwner } from '../src/store/batches.js';

// What `llmq estimate` reads, for every store kind.

describe.each(STORE_KINDS)('store contract: estimate reads [$name]', (kind) => {
  beforeEach((ctx) => skipUnavailable(kind, ctx));

  it('jobsToRun: pending jobs in claim order across pages, with running jobs whose lease expired in their place', async () => {
    const { store } = await kind.fresh();
    await store.enqueue(rows(1200, { prefix: 'low', priority: 1 }), T0);
    await store.enqueue(rows(900, { prefix: 'high', priority: -1 }), T0);
    // a page that ends inside a priority goes on into the next one (the third page: 98 low, then these)
    await store.enqueue(rows(500, { prefix: 'last', priority: 5 }), T0);
    // two of the high ones are held: one by a dead run (lease over), one by a live one
    const held = (await store.claim(claimOpts({ limit: 1, leaseUntil: T0 - 1 }))).jobs[0]!;
    const live = (await store.claim(claimOpts({ limit: 1, owner: 'run-live', leaseUntil: T0 + 60_000 }))).jobs[0]!;
    const seen = [];
    for await (const j of store.jobsToRun(T0)) seen.push(j);
    expect(seen).toHaveLength(2599);
    expect(seen[0]!.key).toBe(held.key); // first in its priority, as it was before the dead run took it
    expect(seen.some((j) => j.key === live.key)).toBe(false);
    expect(seen.slice(0, 899).every((j) => j.priority === -1)).toBe(true);
    expect(seen.slice(899, 2099).every((j) => j.priority === 1)).toBe(true);
    expect(seen.slice(2099).every((j) => j.priority === 5)).toBe(true);
    expect(new Set(seen.map((j) => j.key)).size).toBe(2599);
    expect(seen.some((j) => j.mockAnswered)).toBe(false); // no mock answered any
    expect(seen[0]).toMatchObject({ model: 'gpt-test', attempts: 1 });
    expect(JSON.parse(seen[1]!.request).messages[0].content).toBe('high text 2');
  });

  it("jobsToRun: a dead run's jobs are in, their leases held or not; a spared run's expired ones are not", async () => {
    const { store } = await kind.fresh();
    await store.enqueue(rows(6), T0);
    // a run killed a moment ago, its leases still held: a run takes its jobs back at once
    const killed = (await store.claim(claimOpts({ limit: 2, owner: 'run-killed', leaseUntil: T0 + 60_000 }))).jobs;
    // a run stopped with Ctrl-Z, its leases over: a run leaves them
    const stopped = (await store.claim(claimOpts({ limit: 1, owner: 'run-stopped', leaseUntil: T0 - 1 }))).jobs;
    // a live run
    await store.claim(claimOpts({ limit: 1, owner: 'run-live', leaseUntil: T0 + 60_000 }));
    const keys = async (o: Parameters<typeof store.jobsToRun>[1]) => {
      const seen: string[] = [];
      for await (const j of store.jobsToRun(T0, o)) seen.push(j.key);
      return seen;
    };
    expect(await keys({})).toHaveLength(3); // 2 pending, the stopped run's expired lease
    const toRun = await keys({ spared: ['run-stopped'], deadOwners: ['run-killed'] });
    expect(toRun).toHaveLength(4);
    expect(toRun).toEqual(expect.arrayContaining(killed.map((j) => j.key)));
    expect(toRun).not.toContain(stopped[0]!.key);
  });

  it('answered: the newest answers of a model with their online latency, requests only when asked', async () => {
    const { store } = await kind.fresh();
    await store.enqueue(rows(6), T0);
    const jobs = (await store.claim(claimOpts({ limit: 6 }))).jobs;
    for (const [i, j] of jobs.entries()) {
      const usage = { promptTokens: 10 + i, completionTokens: 100 + i };
      // the newest came back in a provider batch, after an hour: no measure of how long a request takes
      const runId = i === 5 ? batchOwner('sub-1') : OWNER;
      await store.complete(j.key, {
        owner: runId,
        output: 'x',
        response: '{}',
        usage,
        attempt: {
          key: j.key,
          runId,
          attempt: 1,
          startedAt: T0,
          endedAt: i === 5 ? T0 + 3_600_000 : T0 + 50 * (i + 1),
          status: 200,
          outcome: 'done',
          error: null,
          usage,
        },
      });
    }
    const three = await store.answered('gpt-test', { limit: 3, withRequest: false });
    expect(three).toEqual([
      { promptTokens: 15, completionTokens: 105, latencyMs: null, request: null },
      { promptTokens: 14, completionTokens: 104, latencyMs: 250, request: null },
      { promptTokens: 13, completionTokens: 103, latencyMs: 200, request: null },
    ]);
    const withRequests = await store.answered('gpt-test', { limit: 10, withRequest: true });
    expect(withRequests).toHaveLength(6);
    expect(JSON.parse(withRequests[5]!.request!).messages[0].content).toBe('doc text 0');
    expect(await store.answered('other-model', { limit: 10, withRequest: false })).toEqual([]);

    // a newer answer from the offline mock (a run with --provider mock): a stand-in, no measure of a real one
    await store.enqueue(rows(1, { prefix: 'tried' }), T0 + 1);
    await store.startRun({ id: 'run-mock', host: 'h', pid: 1, startedAt: T0, options: { provider: 'mock' } });
    const [tried] = (await store.claim(claimOpts({ limit: 1, owner: 'run-mock' }))).jobs;
    const usage = { promptTokens: 999, completionTokens: 999 };
    await store.complete(tried!.key, {
      owner: 'run-mock',
      output: '[mock]',
      response: '{}',
      usage,
      attempt: {
        key: tried!.key,
        runId: 'run-mock',
        attempt: 1,
        startedAt: T0,
        endedAt: T0 + 1,
        status: 200,
        outcome: 'done',
        error: null,
        usage,
      },
    });
    expect(await store.answered('gpt-test', { limit: 1, withRequest: false })).toEqual([three[0]]);
  });
});
