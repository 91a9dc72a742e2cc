import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MockProvider, OpenAIProvider, runQueue, SqliteStore } from '../src/index.js';
import type { SchedulerEventMap } from '../src/scheduler/events.js';
import { answerFor } from './helpers/fake-openai.js';
import { seedJobs } from './helpers/seed.js';
import { startFake } from './helpers/start-fake.js';
import { all } from './helpers/store-reads.js';
import { tempDir } from './helpers/tmp.js';

// llmq as a library: a run of the offline mock, then one of a real provider, with nothing described
// by the caller. The mock's stand-ins were kept as answers for good (the CLI took them back itself).
describe('runQueue: the offline mock, then a real provider', () => {
  it('the real run takes the mock answers back and sends their jobs, once each', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    const keys = await seedJobs(store, 5);
    const mock = await runQueue({ store, provider: new MockProvider({ latencyMs: 0 }) });
    expect(mock.done).toBe(5);
    const fake = await startFake({ latencyMs: 5 });
    const starts: Array<SchedulerEventMap['run:start']> = [];
    const real = await runQueue({
      store,
      provider: new OpenAIProvider({ baseUrl: fake.url, apiKey: 'sk-test-0123456789abcdef' }),
      emit: (event, payload) => {
        if (event === 'run:start') starts.push(payload as SchedulerEventMap['run:start']);
      },
    });
    expect(real.done).toBe(5);
    expect(starts[0]?.mockAnswersTakenBack).toBe(5);
    for (const key of keys) expect(fake.sentCount(key)).toBe(1);
    const jobs = await all(store.copier.dumpJobs());
    expect(jobs.map((j) => j.output)).toEqual(jobs.map((j) => answerFor(j.request)));
    await store.close();
  });
});

describe('runQueue: a run is named by its provider', () => {
  it('whatever the caller describes: a mock run described as another is still known as the mock (its answers taken back)', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 2);
    await runQueue({ store, provider: new MockProvider({ latencyMs: 0 }), describe: { provider: 'my-label', note: 'kept' } });
    const [run] = (await store.status()).spend;
    expect(run?.options).toMatchObject({ provider: 'mock', note: 'kept' });
    expect(await store.takeBackMockAnswers(Date.now(), Date.now())).toBe(2);
    await store.close();
  });
});

describe('runQueue: its options checked as the CLI checks its flags', () => {
  it.each([
    [{ concurrency: 0 }, 'runQueue: concurrency must be a whole number of 1 or more, got 0'],
    [{ maxAttempts: 0 }, 'runQueue: maxAttempts must be a whole number of 1 or more, got 0'],
    [{ rpm: -3 }, 'runQueue: rpm must be a number above 0 (left out: no cap), got -3'],
    [{ timeout: 0 }, "runQueue: timeout must be a number above 0 (ms), or 'auto', got 0"],
    [{ budget: { runUsd: Number.NaN, totalUsd: null } }, 'runQueue: budget.runUsd must be an amount above 0 (null: no budget), got NaN'],
  ])('%j is refused before anything is claimed, naming the option', async (options, message) => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 2);
    await expect(runQueue({ store, provider: new MockProvider({ latencyMs: 0 }) }, options)).rejects.toThrow(
      expect.objectContaining({ name: 'UsageError', message }),
    );
    expect((await store.status()).counts).toMatchObject({ pending: 2, running: 0 });
    await store.close();
  });
});
