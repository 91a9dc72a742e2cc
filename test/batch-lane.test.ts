import { NO_STATS } from './helpers/stores.js';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cancelBatches } from '../src/batch/cancel.js';
import { HttpBatchApi } from '../src/batch/http-api.js';
import { buildInputFile } from '../src/batch/input-file.js';
import { batchMetadata } from '../src/batch/submit.js';
import { waitFor } from './helpers/wait.js';
import { LlmqError } from '../src/errors.js';
import { loadPriceTable } from '../src/pricing/price-table.js';
import { runBatchLane, type BatchLaneOptions } from '../src/batch/lane.js';
import { runQueue } from '../src/scheduler/run-queue.js';
import { OpenAIProvider } from '../src/provider/openai.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { answerFor, reply } from './helpers/fake-openai.js';
import { requestFor, seedJobs } from './helpers/seed.js';
import { jobKey } from '../src/request.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';
import { all } from './helpers/store-reads.js';

// The batch lane as a library, against the real HTTP fake and a real SQLite file.

const stores: SqliteStore[] = [];
afterEach(async () => {
  await Promise.all(stores.splice(0).map((s) => s.close()));
});

async function setup(jobs: number) {
  const fake = await startFake();
  fake.batches.configure({ completeAfterMs: 50 });
  const store = new SqliteStore(join(tempDir(), 'q.db'));
  stores.push(store);
  const keys = await seedJobs(store, jobs, { priority: (n) => (n % 2 === 0 ? 1 : 0) });
  const lane = (options: BatchLaneOptions = {}) =>
    runBatchLane({ store, api: new HttpBatchApi({ baseUrl: fake.url }), baseUrl: fake.url }, { pollMs: 20, heartbeatMs: 50, ...options });
  return { fake, store, keys, lane };
}

/** Every job in queue order, as the store dumps it. */
function jobs(store: SqliteStore) {
  return all(store.copier.dumpJobs());
}

describe('batch lane', () => {
  it('sends every job once through batches of --batch-size, in priority order, and stores answers as online ones are stored', async () => {
    const { fake, store, keys, lane } = await setup(25);
    const summary = await lane({ batchSize: 10 });
    expect(summary).toMatchObject({ reason: 'drained', done: 25, failed: 0, remaining: 0 });
    expect([...fake.batches.batches.values()].map((b) => b.lines.length)).toEqual([10, 10, 5]);
    // priority 0 (odd documents) first
    expect(fake.batches.batches.get('batch_fake1')!.lines.map((l) => l.custom_id)).toEqual(keys.filter((_, n) => n % 2 === 1).slice(0, 10));
    const first = fake.batches.batches.get('batch_fake1')!;
    expect(first.metadata).toMatchObject({ llmq: 'llmq' });
    expect(first.metadata.llmq_submission).toMatch(/^[0-9a-f-]{36}$/);
    for (const j of await jobs(store)) {
      expect(j).toMatchObject({ state: 'done', attempts: 1, output: answerFor(j.request), leaseOwner: null });
      expect(j.usage?.promptTokens).toBeGreaterThan(0);
      expect(fake.sentCount(j.key)).toBe(1);
    }
    const attempts = await all(store.copier.dumpAttempts());
    expect(attempts).toHaveLength(25);
    for (const a of attempts) expect(a).toMatchObject({ outcome: 'done', status: 200, runId: expect.stringMatching(/^batch:/) });
    expect(fake.received).toBe(0); // nothing went online
    const rows = await store.batches.recent(10);
    expect(rows.map((r) => [r.state, r.providerStatus, r.jobs, r.done])).toEqual([
      ['ended', 'completed', 5, 5],
      ['ended', 'completed', 10, 10],
      ['ended', 'completed', 10, 10],
    ]);
  });

  it('puts the jobs of one model in each batch: the Batch API refuses an input file that names two', async () => {
    const { fake, store, lane } = await setup(0);
    // interleaved in claim order, so one claim meets both models
    const rows = Array.from({ length: 10 }, (_, n) => {
      const model = n % 3 === 1 ? 'gpt-4o' : 'gpt-4o-mini';
      const request = requestFor(n, { model });
      return { itemId: `doc-${n}`, source: 'seed', meta: null, key: jobKey(request), request, model, priority: 0 };
    });
    await store.enqueue(rows, Date.now());
    const summary = await lane({ batchSize: 3 });
    expect(summary).toMatchObject({ reason: 'drained', done: 10, failed: 0, remaining: 0 });
    const batches = [...fake.batches.batches.values()];
    const models = batches.map((b) => [...new Set(b.lines.map((l) => l.body.model))]);
    expect(models).toEqual([['gpt-4o-mini'], ['gpt-4o'], ['gpt-4o-mini'], ['gpt-4o-mini']]);
    // each batch full but a model's last: not a claim of both models with the other's handed back
    expect(batches.map((b) => b.lines.length)).toEqual([3, 3, 3, 1]);
    for (const j of await jobs(store)) expect(fake.sentCount(j.key)).toBe(1);
  });

  it('a job at the head of the queue whose attempts are used up is failed, and the batch takes the next ones', async () => {
    const { fake, store, keys, lane } = await setup(10);
    // a crash loop: the first job in claim order (priority 0, the odd documents first) used its attempts
    store.db.prepare('UPDATE jobs SET attempts = 5 WHERE key = ?').run(keys[1]);
    const summary = await lane({ batchSize: 50, noWait: true, maxAttempts: 5 });
    expect(summary.failed).toBe(1);
    expect([...fake.batches.batches.values()].map((b) => b.lines.length)).toEqual([9]);
  });

  it('prices batch answers at the batch price: half the online one for OpenAI models', async () => {
    const { store, fake } = await setup(4);
    const prices = loadPriceTable({});
    const summary = await runBatchLane(
      { store, api: new HttpBatchApi({ baseUrl: fake.url }), baseUrl: fake.url, prices },
      { pollMs: 20, heartbeatMs: 50 },
    );
    expect(summary).toMatchObject({ reason: 'drained', done: 4 });
    const rows = (await all(store.copier.dumpJobs())).map((j) => ({
      model: j.model,
      p: j.usage!.promptTokens,
      c: j.usage!.completionTokens,
      cost: j.costUsd!,
    }));
    let total = 0;
    for (const r of rows) {
      const online = prices.lookup(r.model)!.cost({ promptTokens: r.p, completionTokens: r.c })!;
      expect(r.cost).toBeCloseTo(online / 2, 12);
      total += r.cost;
    }
    expect(summary.costUsd).toBeCloseTo(total, 12);
  });

  it("a run's cost is unknown (null), never the sum of the rest, once an answer of a model without a price came: batch and online", async () => {
    const fake = await startFake();
    fake.batches.configure({ completeAfterMs: 50 });
    const queue = async (model: string) => {
      const store = new SqliteStore(join(tempDir(), 'q.db'));
      stores.push(store);
      await seedJobs(store, 2, { model });
      return store;
    };
    const prices = loadPriceTable({});
    const inBatches = (store: SqliteStore) =>
      runBatchLane({ store, api: new HttpBatchApi({ baseUrl: fake.url }), baseUrl: fake.url, prices }, { pollMs: 20, heartbeatMs: 50 });
    expect(await inBatches(await queue('my-own-finetune'))).toMatchObject({ done: 2, costUsd: null });
    expect((await inBatches(await queue('gpt-4o-mini'))).costUsd).toBeGreaterThan(0);
    const online = (store: SqliteStore) =>
      runQueue({ store, provider: new OpenAIProvider({ baseUrl: fake.url }), prices }, { concurrency: 2 });
    expect(await online(await queue('my-own-finetune'))).toMatchObject({ done: 2, costUsd: null });
    expect((await online(await queue('gpt-4o-mini'))).costUsd).toBeGreaterThan(0);
  });

  it('keeps partial results: error lines fail, expired and missing lines go back to pending and are resubmitted', async () => {
    const { fake, store, keys, lane } = await setup(10);
    const bad = keys[3]!;
    const missing = keys[5]!;
    const flaky = keys[7]!;
    const garbled = keys[1]!; // answered in the first batch
    let flakySeen = 0;
    let garbledSeen = 0;
    fake.batches.fate = (b) => (b.seq === 1 ? 'expired' : 'completed');
    fake.batches.line = (key) =>
      key === bad
        ? 'error'
        : key === missing
          ? 'missing'
          : key === flaky && flakySeen++ === 0
            ? 'server'
            : key === garbled && garbledSeen++ === 0
              ? 'bad-body'
              : 'ok';
    const summary = await lane({ batchSize: 10 });
    expect(summary).toMatchObject({ reason: 'drained', failed: 2, failedInStore: 2, remaining: 0 });
    const byKey = new Map((await jobs(store)).map((j) => [j.key, j]));
    expect(byKey.get(bad)).toMatchObject({ state: 'failed', error: expect.stringMatching(/HTTP 400: Invalid value for 'temperature'/) });
    // the first batch expired after answering its first half; the rest went out again, once each batch
    const first = fake.batches.batches.get('batch_fake1')!;
    const answeredFirst = new Set(first.lines.slice(0, 5).map((l) => l.custom_id));
    for (const [key, j] of byKey) {
      if (key === bad || key === missing) continue;
      expect(j.state, key).toBe('done');
      expect(fake.sentCount(key), key).toBe(answeredFirst.has(key) && key !== flaky && key !== garbled ? 1 : 2);
    }
    // a 200 whose body was no completion is tried again, as online
    expect(byKey.get(garbled)!.attempts).toBe(2);
    // a line missing from every output is resubmitted until its attempts are used up, never lost
    expect(byKey.get(missing)!.state).toBe('failed');
    expect(byKey.get(missing)!.error).toMatch(/gave up after 5 attempts; last error: no answer in the output of batch batch_fake\d+/);
    // each of those tries has its attempt row, as `show` lists them
    const tries = (await all(store.copier.dumpAttempts())).filter((a) => a.key === missing);
    expect(tries.map((a) => [a.attempt, a.outcome])).toEqual([1, 2, 3, 4, 5].map((n) => [n, 'retry']));
    // (its first batch expired: that try says so)
    expect(tries[0]!.error).toBe('batch batch_fake1 expired before the provider answered this line');
    expect(tries.slice(1).every((a) => /^no answer in the output of batch batch_fake\d+$/.test(a.error ?? ''))).toBe(true);
    expect(byKey.get(flaky)!.attempts).toBe(2);
    // each batch's own account holds every job it took: the line answered 5xx went back to pending
    // too (retried), as the missing and the unanswered ones
    for (const b of (await store.batches.recent(20)).filter((b) => b.providerBatchId)) {
      expect(b.done + b.failed + b.requeued, b.providerBatchId!).toBe(b.jobs);
    }
  });

  it('a line that every batch leaves unanswered as it expires fails at --max-attempts, saying so, instead of going round forever', async () => {
    const { fake, store, keys, lane } = await setup(2);
    // the batch of one line expires with nothing answered, every time
    fake.batches.fate = () => 'expired';
    // without the cap the lane submits forever, and the test times out
    const summary = await lane({ batchSize: 1, maxAttempts: 3 });
    expect(summary).toMatchObject({ reason: 'drained', done: 0, failed: 2, remaining: 0 });
    expect(fake.batches.batches.size).toBe(6);
    for (const j of await jobs(store)) {
      expect(j).toMatchObject({ state: 'failed', attempts: 3 });
      expect(j.error).toMatch(/gave up after 3 attempts; last error: batch batch_fake\d+ expired before the provider answered this line/);
    }
    // each expiry is a try of its own in the job's history (llmq show)
    const tries = (await all(store.copier.dumpAttempts())).filter((a) => a.key === keys[0]);
    expect(tries.map((a) => [a.attempt, a.outcome])).toEqual([1, 2, 3].map((n) => [n, 'retry']));
  });

  it('waits and submits later when the provider has too many tokens enqueued, failing nothing', async () => {
    const { fake, store, lane } = await setup(4);
    fake.batches.fate = (b) => (b.seq === 1 ? 'quota' : 'completed');
    const summary = await lane({ quotaWaitMs: 100 });
    expect(summary).toMatchObject({ done: 4, failed: 0, remaining: 0 });
    expect(fake.batches.batches.size).toBe(2);
    const rows = await store.batches.recent(5);
    expect(rows.at(-1)).toMatchObject({ state: 'abandoned', requeued: 4, error: expect.stringMatching(/token_limit_exceeded/) });
    for (const j of await jobs(store)) expect(j.attempts).toBe(1);
  });

  it('retries 5xx on every Batch API endpoint, and a create whose answer was lost is found, not made twice', async () => {
    const { fake, store, lane } = await setup(6);
    fake.batches.script('upload', reply.serverError(503));
    fake.batches.script('create', reply.reset());
    fake.batches.script('get', reply.serverError(502));
    fake.batches.script('content', reply.serverError(500));
    const summary = await lane({ batchSize: 6 });
    expect(summary).toMatchObject({ done: 6, remaining: 0 });
    expect(fake.batches.count('create')).toBe(1);
    expect(fake.batches.batches.size).toBe(1);
    for (const j of await jobs(store)) expect(fake.sentCount(j.key)).toBe(1);
  }, 20_000);

  it('a create whose answer was lost, then a refusal while looking for it: the batch may exist, so its jobs stay held, never sent twice', async () => {
    const { fake, store, lane } = await setup(6);
    // the create happened but its answer was lost; the look before trying again is refused
    fake.batches.script('create', reply.reset());
    fake.batches.script('list', reply.error(403, 'You are not allowed to list batches.'));
    await lane({ batchSize: 6 }).catch(() => undefined);
    expect(fake.batches.batches.size).toBe(1);
    expect((await store.status()).counts).toMatchObject({ pending: 0, running: 6 });
    // the next run looks again, finds it, and collects it
    const summary = await lane({ batchSize: 6 });
    expect(summary).toMatchObject({ done: 6, remaining: 0 });
    expect(fake.batches.batches.size).toBe(1);
    for (const j of await jobs(store)) expect(fake.sentCount(j.key)).toBe(1);
  }, 20_000);

  it('a submission another run abandoned meanwhile (taking this one for dead) is not created: each job is sent once', async () => {
    const { fake, store } = await setup(4);
    let abandoned = false;
    const lane = runBatchLane(
      {
        store,
        api: new HttpBatchApi({ baseUrl: fake.url }),
        baseUrl: fake.url,
        // after the claim, before the upload is noted: another run's reclaim takes this run for dead
        crashAt: (step) => {
          if (step !== 'claimed' || abandoned) return;
          abandoned = true;
          void store.activeRuns().then((runs) =>
            store.reclaim(
              Date.now(),
              runs.map((r) => r.id),
            ),
          );
        },
      },
      { pollMs: 20, heartbeatMs: 50, batchSize: 4 },
    );
    const summary = await lane;
    expect(abandoned).toBe(true);
    expect(summary).toMatchObject({ done: 4, remaining: 0 });
    expect(fake.batches.batches.size).toBe(1);
    for (const j of await jobs(store)) expect(fake.sentCount(j.key)).toBe(1);
  }, 20_000);

  it('with noWait submits and returns; jobs in a live batch are taken by no online run; the next lane collects them', async () => {
    const { fake, store, keys, lane } = await setup(8);
    fake.batches.configure({ completeAfterMs: 400 });
    const first = await lane({ noWait: true, limit: 5 });
    expect(first).toMatchObject({ reason: 'limit', done: 0, remaining: 8 });
    const held = (await jobs(store)).filter((j) => j.state === 'running');
    expect(held).toHaveLength(5);
    for (const j of held) expect(j.leaseOwner).toMatch(/^batch:/);
    // an online run meanwhile takes only the three jobs not in the batch, and reclaims nothing
    const online = await runQueue(
      { store, provider: new OpenAIProvider({ baseUrl: fake.url }), now: () => Date.now() + 3600_000 },
      { concurrency: 2 },
    );
    expect(online.done).toBe(3);
    expect(fake.received).toBe(3);
    const second = await lane();
    expect(second).toMatchObject({ done: 5, remaining: 0 });
    for (const key of keys) expect(fake.sentCount(key)).toBe(1);
  });

  it('adopts the batches of a run that ended while they were live, and hands back a submission never created', async () => {
    const { fake, store, keys, lane } = await setup(6);
    fake.batches.configure({ completeAfterMs: 300 });
    await lane({ noWait: true, batchSize: 3, limit: 3 });
    // a submission recorded by a run that then stopped, before its file went up: its jobs come back
    await store.startRun({ id: 'gone', host: 'elsewhere', pid: 1, startedAt: 0, options: {} });
    await store.finishRun('gone', 1, 'died', NO_STATS);
    await store.batches.begin({ id: 'orphan', runId: 'gone', baseUrl: fake.url, now: Date.now() });
    await store.claim({ owner: 'batch:orphan', limit: 2, now: Date.now(), leaseUntil: Date.now() + 1e9, maxAttempts: 5 });
    const summary = await lane({ batchSize: 10 });
    expect(summary).toMatchObject({ done: 6, remaining: 0 });
    expect(fake.batches.count('create')).toBe(2);
    for (const key of keys) expect(fake.sentCount(key)).toBe(1);
    expect((await store.batches.recent(5)).find((b) => b.id === 'orphan')).toMatchObject({ state: 'abandoned', requeued: 2 });
    for (const j of await jobs(store)) expect(j.attempts).toBe(1);
  });

  it('records a run found dead as died even when its process goes between two looks, and takes its submission over after', async () => {
    const { fake, store, keys } = await setup(3);
    const now = Date.now();
    // a run on this host, quiet past a few heartbeats, killed with its batch out (and answered by now)
    await store.startRun({ id: 'killed', host: 'here', pid: 4242, startedAt: now - 10_000, options: {} });
    await store.batches.begin({ id: 'orphan', runId: 'killed', baseUrl: fake.url, now: now - 10_000 });
    const { jobs: claimed } = await store.claim({
      owner: 'batch:orphan',
      limit: 3,
      now: now - 10_000,
      leaseUntil: now + 1e9,
      maxAttempts: 5,
    });
    const api = new HttpBatchApi({ baseUrl: fake.url });
    const fileId = await api.uploadFile('orphan.jsonl', buildInputFile(claimed).content);
    await store.batches.noteInputFile('orphan', fileId, now - 10_000);
    const batch = await api.createBatch(fileId, batchMetadata('orphan'));
    await store.batches.submitted('orphan', batch.id, batch.status, now - 10_000);
    await waitFor(async () => (await api.getBatch(batch.id)).status === 'completed', { what: 'the batch to be answered' });
    // its process is still there at the first look and gone at every later one: the lane's first
    // pass finds it alive when it records dead runs, dead when it looks for their submissions
    let looks = 0;
    const isAlive = (pid: number) => pid === 4242 && looks++ === 0;
    const events: string[] = [];
    const summary = await runBatchLane(
      { store, api, baseUrl: fake.url, host: 'here', isAlive, emit: (e) => events.push(e.type) },
      { pollMs: 20, heartbeatMs: 50 },
    );
    expect(summary).toMatchObject({ reason: 'drained', done: 3, remaining: 0 });
    expect((await store.status()).activeRuns).toEqual([]);
    expect(events).toContain('dead-runs');
    expect(events).toContain('adopted');
    expect(fake.batches.count('create')).toBe(1);
    for (const key of keys) expect(fake.sentCount(key)).toBe(1);
  });

  it('recording a dead run, takes back its jobs and other expired leases, but not those of a run stopped here (Ctrl-Z)', async () => {
    const { fake, store } = await setup(6);
    const now = Date.now();
    // both on this host, quiet 10 s: one killed (its process gone), one stopped with Ctrl-Z (alive)
    for (const [id, pid] of [
      ['killed', 4242],
      ['stopped', 4343],
    ] as const) {
      await store.startRun({ id, host: 'here', pid, startedAt: now - 10_000, options: {} });
      await store.claim({ owner: id, limit: 2, now: now - 10_000, leaseUntil: now - 1, maxAttempts: 5 });
    }
    const summary = await runBatchLane(
      {
        store,
        api: new HttpBatchApi({ baseUrl: fake.url }),
        baseUrl: fake.url,
        host: 'here',
        isAlive: (pid) => pid === 4343,
        isStopped: (pid) => pid === 4343,
      },
      { pollMs: 20, heartbeatMs: 50 },
    );
    // the killed run's 2 and the 2 pending went in a batch; the stopped run's 2 are still its own
    expect(summary).toMatchObject({ done: 4, remaining: 2 });
    const held = (await jobs(store)).filter((j) => j.state === 'running');
    expect(held.map((j) => j.leaseOwner)).toEqual(['stopped', 'stopped']);
  });

  it('a create refused for too many enqueued tokens waits and submits again; a refused key stops the run with nothing used up', async () => {
    const { fake, lane } = await setup(3);
    fake.batches.script(
      'create',
      reply.error(400, 'Enqueued token limit reached for gpt-4o-mini in organization org-x.', { code: 'token_limit_exceeded' }),
    );
    expect(await lane({ quotaWaitMs: 100 })).toMatchObject({ done: 3, failed: 0, remaining: 0 });
    expect(fake.batches.count('create')).toBe(2);

    const other = await setup(3);
    other.fake.batches.script('upload', reply.unauthorized());
    const summary = await other.lane();
    expect(summary).toMatchObject({ reason: 'fatal', done: 0, remaining: 3, fatal: { reason: 'auth' } });
    for (const j of await jobs(other.store)) expect(j).toMatchObject({ state: 'pending', attempts: 0 });
    expect(other.fake.batches.count('create')).toBe(0);
  });

  it('cuts a file at the byte cap: what does not fit goes back (attempt unused) and into the next batch', async () => {
    const { fake, store, lane } = await setup(5);
    const lineBytes = Buffer.byteLength(
      `{"custom_id":"${'0'.repeat(64)}","method":"POST","url":"/v1/chat/completions","body":${(await jobs(store))[0]!.request}}\n`,
    );
    const summary = await lane({ maxBytes: lineBytes * 2 + 10 });
    expect(summary).toMatchObject({ done: 5, remaining: 0 });
    expect([...fake.batches.batches.values()].map((b) => b.lines.length)).toEqual([2, 2, 1]);
    for (const j of await jobs(store)) expect(j).toMatchObject({ state: 'done', attempts: 1 });
  });

  it('cancelBatches makes every client before the first cancel: one it cannot make (no key) stops it with nothing cancelled', async () => {
    const { fake, store } = await setup(2);
    const now = Date.now();
    await store.batches.begin({ id: 's1', runId: 'gone', baseUrl: fake.url, now });
    await store.batches.submitted('s1', 'batch_1', 'in_progress', now);
    await store.batches.begin({ id: 's2', runId: 'gone', baseUrl: 'https://api.openai.com/v1', now: now + 1 });
    await store.batches.submitted('s2', 'batch_2', 'in_progress', now + 1);
    const apiFor = (b: { baseUrl: string }) => {
      if (b.baseUrl !== fake.url) throw new LlmqError('No API key for the OpenAI API.');
      return new HttpBatchApi({ baseUrl: fake.url });
    };
    await expect(cancelBatches(store, apiFor, undefined)).rejects.toThrow(/No API key/);
    expect(fake.batches.count('cancel')).toBe(0);
  });
});
