import { describe, expect, it } from 'vitest';
import { apiKeyId } from '../src/batch/api-key-id.js';
import { HttpBatchApi } from '../src/batch/http-api.js';
import { runBatchLane } from '../src/batch/lane.js';
import { MOCK_RUN_STOPPED, STOPPED_BEFORE_CREATED, batchOwner } from '../src/store/batches.js';
import { copyStore } from '../src/store/copy.js';
import { jobKey } from '../src/request.js';
import { seedJobs } from './helpers/seed.js';
import { STORE_KINDS, skipUnavailable } from './helpers/stores.js';
import { startFake } from './helpers/start-fake.js';

const STATS = { done: 0, failed: 0, retried: 0, requests: 0, rateLimited: 0, promptTokens: 0, completionTokens: 0, jobsPerSecond: 0 };

// The batch ledger on both stores: what holds a job in a live batch, and what gives it back.

describe.each(STORE_KINDS)('batches on $name', (kind) => {
  it('held jobs carry their request only when it asks for JSON: its answer is checked against it, no other request is read', async (ctx) => {
    skipUnavailable(kind, ctx);
    const { store } = await kind.fresh();
    const plain = '{"max_tokens":5,"messages":[{"content":"a","role":"user"}],"model":"m"}';
    const asking = '{"max_tokens":5,"messages":[{"content":"b","role":"user"}],"model":"m","response_format":{"type":"json_object"}}';
    await store.enqueue(
      [plain, asking].map((request, i) => ({
        itemId: `d${i}`,
        source: 'seed',
        meta: null,
        key: jobKey(request),
        request,
        model: 'm',
        priority: 0,
      })),
      Date.now(),
    );
    const now = Date.now();
    await store.batches.begin({ id: 's1', runId: 'r1', baseUrl: 'http://x/v1', apiKey: apiKeyId('sk-proj-0123456789abcdef-wxyz')!, now });
    await store.claim({ owner: batchOwner('s1'), limit: 2, now, leaseUntil: now + 86400_000, maxAttempts: 5 });
    const held = await store.batches.held('s1');
    expect(held.map((j) => [j.key, j.request])).toEqual([
      [jobKey(plain), null],
      [jobKey(asking), asking],
    ]);
    await store.close();
  });

  it('jobs of a live submission are taken by no claim and no reclaim; end hands back what it still holds', async (ctx) => {
    skipUnavailable(kind, ctx);
    const { store } = await kind.fresh();
    const keys = await seedJobs(store, 5);
    const now = Date.now();
    const apiKey = apiKeyId('sk-proj-0123456789abcdef-wxyz')!;
    await store.batches.begin({ id: 's1', runId: 'r1', baseUrl: 'http://x/v1', apiKey, now });
    const got = await store.claim({ owner: batchOwner('s1'), limit: 3, now, leaseUntil: now + 7 * 86400_000, maxAttempts: 5 });
    expect(got.jobs.map((j) => j.key)).toEqual(keys.slice(0, 3));
    await store.batches.noteJobs('s1', 3, now);
    await store.batches.submitted('s1', 'batch_1', 'validating', now);
    // a day later: an online run reclaims expired leases and those of the (dead) submitting run, then claims
    expect(await store.reclaim(now + 86400_000, ['r1'])).toBe(0);
    const online = await store.claim({
      owner: 'r2',
      limit: 10,
      now: now + 86400_000,
      leaseUntil: now + 86400_000 + 60_000,
      maxAttempts: 5,
    });
    expect(online.jobs.map((j) => j.key)).toEqual(keys.slice(3));
    await store.release('r2', { refund: true, now });
    expect((await store.batches.held('s1')).map((j) => j.key)).toEqual(keys.slice(0, 3));
    expect(await store.batches.adopt('s1', 'someone-else', 'r3', now)).toBe(false);
    expect(await store.batches.adopt('s1', 'r1', 'r3', now)).toBe(true);
    const [open] = await store.batches.open();
    expect(open).toMatchObject({ id: 's1', runId: 'r3', state: 'submitted', providerBatchId: 'batch_1', jobs: 3 });
    // the key it was sent with is kept as a fingerprint and a hint, never the key
    expect(open!.apiKey).toEqual({ fingerprint: apiKey.fingerprint, hint: '…wxyz' });
    expect(open!.progress).toBeNull();
    await store.batches.noteStatus('s1', 'in_progress', { completed: 2, failed: 1 }, now);
    expect((await store.batches.open())[0]).toMatchObject({ providerStatus: 'in_progress', progress: { completed: 2, failed: 1 } });
    expect(JSON.stringify(open)).not.toContain('0123456789abcdef');
    expect(
      await store.batches.end('s1', { state: 'ended', providerStatus: 'expired', done: 0, failed: 0, error: null, now, refund: true }),
    ).toBe(3);
    expect(await store.batches.open()).toEqual([]);
    expect((await store.batches.recent(1))[0]).toMatchObject({ state: 'ended', providerStatus: 'expired', requeued: 3, endedAt: now });
    const status = await store.status();
    expect(status.counts).toMatchObject({ pending: 5, running: 0 });
  });

  it('jobs of a live batch are not taken back when their 7-day lease runs out (a batch left alone may still answer, and bills)', async (ctx) => {
    skipUnavailable(kind, ctx);
    const { store } = await kind.fresh();
    const keys = await seedJobs(store, 4);
    const sentAt = Date.now() - 8 * 86400_000;
    await store.batches.begin({ id: 's1', runId: 'gone', baseUrl: 'http://elsewhere/v1', now: sentAt });
    await store.claim({ owner: batchOwner('s1'), limit: 2, now: sentAt, leaseUntil: sentAt + 7 * 86400_000, maxAttempts: 5 });
    await store.batches.submitted('s1', 'batch_1', 'in_progress', sentAt);
    // a submission never created holds its jobs no longer than its lease
    await store.batches.begin({ id: 's2', runId: 'gone', baseUrl: 'http://elsewhere/v1', now: sentAt });
    await store.claim({ owner: batchOwner('s2'), limit: 1, now: sentAt, leaseUntil: sentAt + 7 * 86400_000, maxAttempts: 5 });
    // one whose file was uploaded may have been created, and left alone to the key that made it
    await store.batches.begin({ id: 's3', runId: 'gone', baseUrl: 'http://elsewhere/v1', now: sentAt });
    await store.claim({ owner: batchOwner('s3'), limit: 1, now: sentAt, leaseUntil: sentAt + 7 * 86400_000, maxAttempts: 5 });
    await store.batches.noteInputFile('s3', 'file-1', sentAt);
    expect(await store.reclaim(Date.now(), ['gone'])).toBe(1);
    expect((await store.batches.held('s1')).map((j) => j.key)).toEqual(keys.slice(0, 2));
    expect((await store.batches.held('s3')).map((j) => j.key)).toEqual([keys[3]]);
    // nor listed as to be run (estimate, --dry-run)
    const toRun: string[] = [];
    for await (const j of store.jobsToRun(Date.now())) toRun.push(j.key);
    expect(toRun).toEqual([keys[2]]);
    const online = await store.claim({ owner: 'r2', limit: 10, now: Date.now(), leaseUntil: Date.now() + 60_000, maxAttempts: 5 });
    expect(online.jobs.map((j) => j.key)).toEqual([keys[2]]);
  });

  it('a submission whose run died or ended before uploading its file, or made to the offline mock, gives its jobs back at the next reclaim', async (ctx) => {
    skipUnavailable(kind, ctx);
    const { store } = await kind.fresh();
    const keys = await seedJobs(store, 6);
    const now = Date.now();
    const lease = { now, leaseUntil: now + 7 * 86400_000, maxAttempts: 5 };
    for (const id of ['r-killed', 'r-ended', 'r-uploaded', 'r-mock'])
      await store.startRun({ id, host: 'h', pid: 1, startedAt: now, options: {} });
    await store.batches.begin({ id: 's-killed', runId: 'r-killed', baseUrl: 'http://x/v1', now });
    await store.claim({ owner: batchOwner('s-killed'), limit: 2, ...lease });
    await store.batches.begin({ id: 's-ended', runId: 'r-ended', baseUrl: 'http://x/v1', now });
    await store.claim({ owner: batchOwner('s-ended'), limit: 1, ...lease });
    // its file uploaded: the batch may exist, so only a batch run (which can ask the provider) may end it
    await store.batches.begin({ id: 's-uploaded', runId: 'r-uploaded', baseUrl: 'http://x/v1', now });
    await store.claim({ owner: batchOwner('s-uploaded'), limit: 1, ...lease });
    await store.batches.noteInputFile('s-uploaded', 'file-1', now);
    // the offline mock's Batch API lives in its run's process: its batches end with it
    await store.batches.begin({ id: 's-mock', runId: 'r-mock', baseUrl: 'mock', now });
    await store.claim({ owner: batchOwner('s-mock'), limit: 1, ...lease });
    await store.batches.noteInputFile('s-mock', 'file-mock-1', now);
    await store.batches.submitted('s-mock', 'batch_mock_1', 'in_progress', now);
    // while their runs live, nothing moves
    expect(await store.reclaim(now + 1, [])).toBe(0);
    expect((await store.batches.held('s-killed')).map((j) => j.key)).toEqual(keys.slice(0, 2));
    await store.finishRun('r-ended', now + 2, 'error', STATS);
    expect(await store.reclaim(now + 3, ['r-killed', 'r-uploaded', 'r-mock'])).toBe(4);
    expect((await store.batches.held('s-uploaded')).map((j) => j.key)).toEqual([keys[3]]);
    const rows = await store.batches.recent(10);
    expect(
      rows
        .filter((r) => r.state === 'abandoned')
        .map((r) => [r.id, r.requeued, r.error])
        .sort(),
    ).toEqual([
      ['s-ended', 1, STOPPED_BEFORE_CREATED],
      ['s-killed', 2, STOPPED_BEFORE_CREATED],
      ['s-mock', 1, MOCK_RUN_STOPPED],
    ]);
    // never sent: their attempt given back
    const online = await store.claim({ owner: 'r2', limit: 10, now: now + 4, leaseUntil: now + 60_000, maxAttempts: 5 });
    expect(online.jobs.map((j) => [j.key, j.attempts])).toEqual([keys[0], keys[1], keys[2], keys[4], keys[5]].map((k) => [k, 1]));
  });

  it('the lane end to end: an expired batch keeps its answers and resubmits the rest', async (ctx) => {
    skipUnavailable(kind, ctx);
    const { store } = await kind.fresh();
    const fake = await startFake();
    fake.batches.configure({ completeAfterMs: 30 });
    fake.batches.fate = (b) => (b.seq === 1 ? 'expired' : 'completed');
    const keys = await seedJobs(store, 6);
    const summary = await runBatchLane(
      { store, api: new HttpBatchApi({ baseUrl: fake.url }), baseUrl: fake.url },
      { pollMs: 20, heartbeatMs: 50 },
    );
    expect(summary).toMatchObject({ done: 6, failed: 0, remaining: 0 });
    const sent = keys.map((k) => fake.sentCount(k));
    expect(sent.filter((n) => n === 1)).toHaveLength(3);
    expect(sent.filter((n) => n === 2)).toHaveLength(3);
    expect((await store.batches.recent(5)).map((b) => [b.providerStatus, b.done, b.requeued])).toEqual([
      ['completed', 3, 0],
      ['expired', 3, 3],
    ]);
  });

  it('copy refuses a queue with live batches (the copy would send their jobs again)', async (ctx) => {
    skipUnavailable(kind, ctx);
    const { store } = await kind.fresh();
    const { store: target } = await STORE_KINDS[0]!.fresh();
    await seedJobs(store, 2);
    await store.batches.begin({ id: 's1', runId: 'r1', baseUrl: 'http://x/v1', now: 1 });
    await expect(copyStore(store, target, { now: 2 })).rejects.toThrow(/1 batch still live at the provider; collect them first/);
    expect((await target.status()).total).toBe(0);
  });
});
