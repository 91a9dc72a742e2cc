import { NO_STATS } from './helpers/stores.js';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OpenAIProvider } from '../src/provider/openai.js';
import { MockProvider } from '../src/provider/mock.js';
import type { Provider } from '../src/provider/types.js';
import { runQueue, type RunOptions } from '../src/scheduler/run-queue.js';
import { BACKOFF_ROOM, Lanes, localBoards } from '../src/scheduler/lanes.js';
import type { SchedulerEventMap } from '../src/scheduler/events.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { canonicalJson, jobKey } from '../src/request.js';
import { answerFor, reply, type FakeOpenAI } from './helpers/fake-openai.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';
import { all } from './helpers/store-reads.js';
import { gatedProvider } from './helpers/gated-provider.js';
import { waitFor } from './helpers/wait.js';

async function setup(jobs: number, fakeOptions: Parameters<typeof startFake>[0] = {}) {
  const fake = await startFake(fakeOptions);
  const path = join(tempDir(), 'q.db');
  const store = new SqliteStore(path);
  const keys = await seedJobs(store, jobs);
  return { fake, store, keys, path };
}

const fast: RunOptions = { retryDelayMs: 10, maxRetryDelayMs: 50, heartbeatMs: 200, outage: { probeDelayMs: 100, maxProbeDelayMs: 400 } };

function provider(fake: FakeOpenAI, timeoutMs = 5000): OpenAIProvider {
  return new OpenAIProvider({ baseUrl: fake.url, apiKey: 'sk-test-secret', timeoutMs });
}

/** Every job, in queue order, as the store dumps it. */
function jobsByState(store: SqliteStore) {
  return all(store.copier.dumpJobs());
}

/** The tries of the job seedJobs made as `doc-${index of its key}`, oldest first. */
async function attemptsOf(store: SqliteStore, keys: readonly string[], key: string) {
  return (await store.item(`doc-${keys.indexOf(key)}`))!.attempts;
}

/**
 * Three 500s of the job `key`, counted in a run 'earlier' that claimed it at `t`: a job that fails on
 * its own (src/store/own-failures.ts), as the next claim reads it.
 */
async function failedThriceBefore(store: SqliteStore, key: string, t: number): Promise<void> {
  const error = 'HTTP 500: poisoned';
  for (let attempt = 1; attempt <= 3; attempt++) {
    const tried = {
      key,
      runId: 'earlier',
      attempt,
      startedAt: t,
      endedAt: t + 5,
      status: 500,
      outcome: 'retry' as const,
      error,
      usage: null,
    };
    await store.recordAttempt(tried, { countAttempt: true, error });
  }
}

/**
 * Whether the provider is down: for `ms` from the first request that reaches the fake. Timed from
 * before the run, a loaded machine's slow start met only the outage's tail: a healthy job answered
 * just past its end while the poisoned job's 503 was still on its way, and that 503 then counted
 * as the poisoned job's own failure.
 */
function downForFromFirstRequest(ms: number): () => boolean {
  let until = 0;
  return () => {
    until ||= Date.now() + ms;
    return Date.now() < until;
  };
}

describe('runQueue', () => {
  it('answers every job exactly once, storing each answer with its job', async () => {
    const { fake, store, keys } = await setup(60, { latencyMs: 5 });
    const summary = await runQueue({ store, provider: provider(fake) }, { ...fast, concurrency: 6 });
    expect(summary).toMatchObject({ reason: 'drained', done: 60, failed: 0, remaining: 0 });
    expect(fake.duplicates()).toEqual([]);
    expect(keys.every((k) => fake.sentCount(k) === 1)).toBe(true);
    expect(fake.maxInFlight).toBeLessThanOrEqual(6);
    const rows = await jobsByState(store);
    for (const r of rows) expect(r).toMatchObject({ state: 'done', attempts: 1, output: answerFor(r.request) });
    await store.close();
  });

  it('asks the store for jobs besides a full lane at most once a second when there are none', async () => {
    const { fake, store } = await setup(400, { latencyMs: 2 });
    // one model: its lane is full at `concurrency` in hand, and a claim that skips it can find nothing
    let fruitless = 0;
    const claim = store.claim.bind(store);
    store.claim = async (o) => {
      const got = await claim(o);
      if (o.skipModels?.length && got.jobs.length === 0) fruitless++;
      return got;
    };
    const t0 = Date.now();
    const summary = await runQueue({ store, provider: provider(fake) }, { ...fast, concurrency: 4 });
    expect(summary).toMatchObject({ reason: 'drained', done: 400 });
    expect(fruitless).toBeLessThanOrEqual(Math.ceil((Date.now() - t0) / 1000) + 1);
    await store.close();
  });

  // docs/architecture.md, invariant 1
  it('ends its progress at what it did when another run took some of the jobs it counted at the start', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 10);
    const { provider, firstSent, release } = gatedProvider();
    const totals: number[] = [];
    const progress = (event: string, payload: unknown) => {
      if (event === 'progress') totals.push((payload as SchedulerEventMap['progress']).total);
    };
    // -c 1: the run holds its first job at the provider while another run takes four and answers them
    const run = runQueue({ store, provider, emit: progress as never }, { concurrency: 1, progressMs: 10 });
    await firstSent;
    const other = await store.claim({ owner: 'other', limit: 4, now: Date.now(), leaseUntil: Date.now() + 60_000, maxAttempts: 3 });
    expect(other.jobs.length).toBeGreaterThan(0);
    for (const j of other.jobs) {
      await store.complete(j.key, {
        owner: 'other',
        output: 'theirs',
        response: '{}',
        usage: { promptTokens: 1, completionTokens: 1 },
        attempt: {
          key: j.key,
          runId: 'other',
          attempt: 1,
          startedAt: 0,
          endedAt: 1,
          status: 200,
          outcome: 'done',
          error: null,
          usage: null,
        },
      });
    }
    release();
    const summary = await run;
    expect(summary).toMatchObject({ reason: 'drained', done: 10 - other.jobs.length });
    expect(totals[0]).toBe(10);
    expect(totals.at(-1)).toBe(10 - other.jobs.length);
    await store.close();
  });

  it('never sends a done job again (invariant 1)', async () => {
    const { fake, store } = await setup(10);
    await runQueue({ store, provider: provider(fake) }, fast);
    expect(fake.received).toBe(10);
    // Visit the queue again, and again after handing everything back as if runs had died.
    await runQueue({ store, provider: provider(fake) }, fast);
    await store.release('nobody', { refund: true, now: Date.now() });
    await store.reclaim(Date.now() + 10 * 3600_000, ['nobody']);
    await store.retryFailed({}, Date.now());
    const again = await runQueue({ store, provider: provider(fake) }, fast);
    expect(again.done).toBe(0);
    expect(fake.received).toBe(10);
    await store.close();
  });

  it('keeps concurrency at the limit under load', async () => {
    const { fake, store } = await setup(40, { latencyMs: 150 });
    await runQueue({ store, provider: provider(fake) }, { ...fast, concurrency: 8 });
    expect(fake.maxInFlight).toBe(8);
    await store.close();
  });

  it('fails a 400 after one attempt with the provider message', async () => {
    const { fake, store, keys } = await setup(5);
    fake.respond((r) => (r.body.includes('document 2:') ? reply.badRequest("Invalid value for 'temperature'") : undefined));
    const summary = await runQueue({ store, provider: provider(fake) }, fast);
    expect(summary).toMatchObject({ done: 4, failed: 1, failedInStore: 1 });
    const failed = (await jobsByState(store)).find((r) => r.key === keys[2])!;
    expect(failed.state).toBe('failed');
    expect(failed.attempts).toBe(1);
    expect(failed.error).toContain("Invalid value for 'temperature'");
    expect(fake.sentCount(keys[2]!)).toBe(1);
    await store.close();
  });

  it('retries a 5xx and a bad body, counting each attempt', async () => {
    const { fake, store, keys } = await setup(3);
    fake.respond((r) =>
      r.key === keys[0] && r.attempt === 1 ? reply.serverError(503) : r.key === keys[0] && r.attempt === 2 ? reply.truncate() : undefined,
    );
    const summary = await runQueue({ store, provider: provider(fake) }, { ...fast, concurrency: 1 });
    expect(summary).toMatchObject({ done: 3, failed: 0, retried: 2 });
    expect((await jobsByState(store))[0]).toMatchObject({ key: keys[0], state: 'done', attempts: 3 });
    const attempts = (await attemptsOf(store, keys, keys[0]!)).map(({ status, outcome }) => ({ status, outcome }));
    expect(attempts).toEqual([
      { status: 503, outcome: 'retry' },
      { status: 200, outcome: 'retry' },
      { status: 200, outcome: 'done' },
    ]);
    await store.close();
  });

  it('keeps the slots busy while failed tries back off before their retry', async () => {
    const { fake, store, keys } = await setup(12, { latencyMs: 5 });
    const [a, b] = keys;
    fake.respond((r) => ((r.key === a || r.key === b) && r.attempt === 1 ? reply.serverError(503) : undefined));
    const options = { ...fast, concurrency: 2, retryDelayMs: 1500, maxRetryDelayMs: 1500 };
    const summary = await runQueue({ store, provider: provider(fake) }, options);
    expect(summary).toMatchObject({ done: 12, failed: 0, retried: 2 });
    // both slots' first jobs failed and sleep 1.5-3 s: the other ten are claimed and answered meanwhile
    const retryOfA = fake.requests.findIndex((r) => r.key === a && r.attempt === 2);
    const othersAnswered = fake.requests.filter((r, i) => r.key !== a && r.key !== b && i < retryOfA);
    expect(othersAnswered).toHaveLength(10);
    await store.close();
  });

  it('holds at most BACKOFF_ROOM times the concurrency of jobs backing off per model, so failures cannot draw the whole queue into hand', () => {
    const lanes = new Lanes('http://127.0.0.1:1/v1', { rpm: null, tpm: null }, localBoards(Date.now), Date.now);
    const lane = lanes.get('m');
    // 2 working and 30 backing off at -c 2: the working ones fill the lane
    lane.inHand = 32;
    lane.backingOff = 30;
    expect(lanes.saturated(2)).toEqual(['m']);
    // 1 working: room for another, however many sleep below the cap
    lane.inHand = 31;
    expect(lanes.saturated(2)).toEqual([]);
    expect(lanes.idle()).toBe(30);
    // at the cap, none working: no more
    lane.backingOff = lane.inHand = 2 * BACKOFF_ROOM;
    expect(lanes.saturated(2)).toEqual(['m']);
  });

  it('gives up after --max-attempts with the last error', async () => {
    const { fake, store, keys } = await setup(4);
    fake.respond((r) => (r.body.includes('document 1:') ? reply.truncate() : undefined));
    const summary = await runQueue({ store, provider: provider(fake) }, { ...fast, maxAttempts: 3 });
    expect(summary).toMatchObject({ done: 3, failed: 1 });
    const job = (await jobsByState(store)).find((r) => r.key === keys[1])!;
    expect(job).toMatchObject({ state: 'failed', attempts: 3 });
    expect(job.error).toMatch(/^gave up after 3 attempts: /);
    expect(fake.sentCount(keys[1]!)).toBe(3);
    await store.close();
  });

  it('pauses every request on a 429 retry-after, without using up attempts', async () => {
    const { fake, store } = await setup(6, { latencyMs: 1 });
    fake.script(reply.rateLimited(600));
    const events: Array<[string, number]> = [];
    const t0 = Date.now();
    const summary = await runQueue(
      {
        store,
        provider: provider(fake),
        emit: (e) => {
          if (e === 'job:done') events.push([e, Date.now() - t0]);
        },
      },
      { ...fast, concurrency: 1, retryDelayMs: 1 },
    );
    expect(summary).toMatchObject({ done: 6, rateLimited: 1 });
    expect((await jobsByState(store)).every((r) => r.attempts === 1)).toBe(true);
    // nothing finished until the pause was over
    expect(Math.min(...events.map(([, t]) => t))).toBeGreaterThanOrEqual(550);
    await store.close();
  });

  it('holds dispatch when x-ratelimit-remaining says the budget is spent and its size is unknown, until it resets', async () => {
    const { fake, store } = await setup(3, { latencyMs: 1 });
    fake.script(reply.ok({ headers: { 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '700ms' } }));
    const times: number[] = [];
    await runQueue(
      {
        store,
        provider: provider(fake),
        emit: (e) => {
          if (e === 'job:start') times.push(Date.now());
        },
      },
      { ...fast, concurrency: 1 },
    );
    expect(times.length).toBe(3);
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(600);
    expect(times[2]! - times[1]!).toBeLessThan(600);
    await store.close();
  });

  it('on remaining 0 waits one refill interval, not until the whole budget is back', async () => {
    const { fake, store } = await setup(3, { latencyMs: 1 });
    // 600 per minute, none left, full again in a minute: the next unit comes back in 100 ms.
    fake.script(
      reply.ok({
        headers: { 'x-ratelimit-limit-requests': '600', 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '1m0s' },
      }),
    );
    const times: number[] = [];
    await runQueue(
      {
        store,
        provider: provider(fake),
        emit: (e) => {
          if (e === 'job:start') times.push(Date.now());
        },
      },
      { ...fast, concurrency: 1 },
    );
    expect(times.length).toBe(3);
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(95);
    expect(times[1]! - times[0]!).toBeLessThan(1000);
    await store.close();
  });

  it("paces a gateway counting fixed windows of a minute at its minute's limit, not as a day's", async () => {
    const { fake, store } = await setup(20, { latencyMs: 5 });
    // 1,200 a minute in windows that end a minute after the first request: its reset is when the
    // window ends, whatever was used (2 used and `60s` would be 1,200 a day as OpenAI's refill)
    const windowEnds = Date.now() + 60_000;
    fake.respond((r) =>
      reply.ok({
        headers: {
          'x-ratelimit-limit-requests': '1200',
          'x-ratelimit-remaining-requests': String(1200 - r.index),
          'x-ratelimit-reset-requests': `${((windowEnds - Date.now()) / 1000).toFixed(1)}s`,
        },
      }),
    );
    const stop = new AbortController();
    const stopper = setTimeout(() => stop.abort(), 10_000);
    const t0 = Date.now();
    const summary = await runQueue({ store, provider: provider(fake), stopSignal: stop.signal }, { ...fast, concurrency: 4 });
    clearTimeout(stopper);
    // before, after the first answer it waited 72 s a request (1,200 a day)
    expect(summary.done).toBe(20);
    expect(Date.now() - t0).toBeLessThan(5000);
    await store.close();
  });

  it('stops at once on a wrong key and burns no job', async () => {
    const { fake, store } = await setup(20, { latencyMs: 5 });
    fake.respond(() => reply.unauthorized());
    const summary = await runQueue({ store, provider: provider(fake) }, { ...fast, concurrency: 4 });
    expect(summary.reason).toBe('fatal');
    expect(summary.fatal?.reason).toBe('auth');
    expect(summary.fatal?.message).not.toContain('sk-test-secret');
    const rows = await jobsByState(store);
    expect(rows.every((r) => r.state === 'pending' && r.attempts === 0)).toBe(true);
    expect(fake.received).toBeLessThanOrEqual(4);
    await store.close();
  });

  it('stops on a 404 before any answer (a wrong --base-url or model) instead of failing every job', async () => {
    const { fake, store } = await setup(10);
    fake.respond(() => reply.error(404, 'The model `gpt-9` does not exist', { code: 'model_not_found' }));
    const summary = await runQueue({ store, provider: provider(fake) }, { ...fast, concurrency: 2 });
    expect(summary.reason).toBe('fatal');
    expect(summary.fatal?.message).toMatch(/HTTP 404/);
    const rows = await jobsByState(store);
    expect(rows.every((r) => r.state === 'pending')).toBe(true);
    expect(rows.filter((r) => r.attempts > 0).length).toBeLessThanOrEqual(2);
    // the three 404s, and what the two slots had out while the third was being written down
    expect(fake.received).toBeLessThanOrEqual(5);
    await store.close();
  });

  it("fails a 404 as the job's own once the provider has answered others", async () => {
    const { fake, store, keys } = await setup(4);
    fake.respond((r) => (r.key === keys[3] ? reply.error(404, 'no such thing') : undefined));
    const summary = await runQueue({ store, provider: provider(fake) }, { ...fast, concurrency: 1 });
    expect(summary).toMatchObject({ reason: 'drained', done: 3, failed: 1 });
    await store.close();
  });

  it('burns no attempt on refused connections: the first one pauses the run', async () => {
    const { fake, store } = await setup(6);
    await fake.down();
    setTimeout(() => void fake.up(), 800);
    const summary = await runQueue({ store, provider: provider(fake) }, { ...fast, concurrency: 3, maxAttempts: 1 });
    expect(summary).toMatchObject({ done: 6, failed: 0 });
    expect((await jobsByState(store)).every((r) => r.attempts === 1)).toBe(true);
    await store.close();
  });

  it('fails a document that always breaks the connection, even when it is the last one left', async () => {
    const { fake, store, keys } = await setup(3);
    fake.respond((r) => (r.key === keys[1] ? reply.reset() : undefined));
    const summary = await runQueue(
      { store, provider: provider(fake) },
      { ...fast, concurrency: 1, maxAttempts: 2, outage: { probeDelayMs: 5, maxProbeDelayMs: 10 } },
    );
    expect(summary).toMatchObject({ done: 2, failed: 1 });
    const poison = (await jobsByState(store)).find((r) => r.key === keys[1])!;
    expect(poison.state).toBe('failed');
    expect(poison.error).toMatch(/gave up after 2 attempts/);
    await store.close();
  });

  it('fails documents that always get a 5xx once nothing else is left, instead of probing them as an outage', async () => {
    // The provider answers every other document; the failing ones end up the only ones in hand. Taken
    // for an outage, they would be probed uncounted until --max-outage ended the run, pending.
    const { fake, store, keys } = await setup(24, { latencyMs: 5 });
    const poison = new Set(keys.filter((_, i) => i % 4 === 0));
    fake.respond((r) => (poison.has(r.key) ? reply.serverError(500) : undefined));
    const events: Array<keyof SchedulerEventMap> = [];
    const summary = await runQueue(
      { store, provider: provider(fake), emit: (e) => events.push(e) },
      { ...fast, concurrency: 4, maxAttempts: 3, maxOutageMs: 3000, outage: { probeDelayMs: 300, maxProbeDelayMs: 600 } },
    );
    expect(summary).toMatchObject({ reason: 'drained', done: 18, failed: 6 });
    // Three tries each, all counted. On a loaded machine three of them can fail in a row before a
    // healthy answer is read (failed once so in a loaded suite): the tries that fail inside the pause
    // that opens (at most the concurrency's) are uncounted, and the first answer ends it.
    const pauses = events.filter((e) => e === 'paused').length;
    for (const key of poison) expect(fake.sentCount(key)).toBeGreaterThanOrEqual(3);
    expect([...poison].reduce((n, key) => n + fake.sentCount(key), 0)).toBeLessThanOrEqual(3 * poison.size + 4 * pauses);
    const failed = (await jobsByState(store)).filter((r) => r.state === 'failed');
    expect(failed.every((r) => /gave up after 3 attempts: HTTP 500/.test(r.error ?? ''))).toBe(true);
    await store.close();
  });

  it('still burns no attempt on refused connections when the last jobs are left', async () => {
    // A document cannot make the provider refuse connections: that is an outage, at the end as anywhere.
    const { fake, store } = await setup(6, { latencyMs: 5 });
    let answered = 0;
    const summary = await runQueue(
      {
        store,
        provider: provider(fake),
        emit: (e) => {
          if (e === 'job:done' && ++answered === 5) void fake.down().then(() => setTimeout(() => void fake.up(), 800));
        },
      },
      // 2: the request in flight when the server went down may be reset, which at the end counts
      { ...fast, concurrency: 1, maxAttempts: 2 },
    );
    expect(summary).toMatchObject({ done: 6, failed: 0 });
    await store.close();
  });

  it('stops on insufficient_quota leaving jobs pending', async () => {
    const { fake, store } = await setup(5);
    fake.respond(() => reply.quota());
    const summary = await runQueue({ store, provider: provider(fake) }, fast);
    expect(summary.fatal?.reason).toBe('quota');
    expect((await jobsByState(store)).every((r) => r.state === 'pending' && r.attempts === 0)).toBe(true);
    await store.close();
  });

  it('frees the slot of a hung request at the timeout and retries it', async () => {
    const { fake, store } = await setup(3);
    fake.script(reply.hang());
    const t0 = Date.now();
    const summary = await runQueue({ store, provider: provider(fake, 300) }, { ...fast, concurrency: 1 });
    expect(summary).toMatchObject({ done: 3, failed: 0 });
    expect(Date.now() - t0).toBeLessThan(5000);
    await store.close();
  });

  it('rides out an outage without failing any job', async () => {
    const { fake, store, keys } = await setup(40, { latencyMs: 10 });
    const events: Array<keyof SchedulerEventMap> = [];
    let downed = false;
    const run = runQueue(
      {
        store,
        provider: provider(fake, 1000),
        emit: (e, p) => {
          events.push(e);
          if (e === 'job:done' && !downed && (p as SchedulerEventMap['job:done']) && events.filter((x) => x === 'job:done').length === 10) {
            downed = true;
            void fake.down().then(() => setTimeout(() => void fake.up(), 1500));
          }
        },
      },
      { ...fast, concurrency: 4, maxAttempts: 2 },
    );
    const summary = await run;
    expect(summary).toMatchObject({ done: 40, failed: 0 });
    expect(events).toContain('paused');
    expect(events).toContain('resumed');
    // a request in flight when the server died may be sent again; nothing else is
    expect(keys.filter((k) => fake.sentCount(k) !== 1).length).toBeLessThanOrEqual(4);
    await store.close();
  });

  it("rides out a gateway's maintenance page (HTTP 200, no completion) as an outage", async () => {
    // A proxy in front of the provider answers 200 with an HTML page while it is down: the requests
    // are not the jobs' fault. Taken for each job's own bad body, they burned every attempt at full pace.
    const { fake, store } = await setup(30, { latencyMs: 5 });
    const maintenance = reply.raw(200, '<html><body>Service temporarily unavailable</body></html>', { 'content-type': 'text/html' });
    let downUntil = 0;
    fake.respond((r) => {
      if (r.index === 6) downUntil = Date.now() + 1200;
      return Date.now() < downUntil ? maintenance : undefined;
    });
    const events: Array<keyof SchedulerEventMap> = [];
    const summary = await runQueue(
      { store, provider: provider(fake), emit: (e) => events.push(e) },
      { ...fast, concurrency: 4, maxAttempts: 2 },
    );
    expect(summary).toMatchObject({ done: 30, failed: 0 });
    expect(events).toContain('paused');
    expect((await jobsByState(store)).every((r) => r.attempts <= 2)).toBe(true);
    await store.close();
  });

  it('gives up on a gateway answering only pages after --max-outage, with one probe at a time', async () => {
    const { fake, store } = await setup(20, { latencyMs: 5 });
    fake.respond(() => reply.raw(200, '<html>Service temporarily unavailable</html>', { 'content-type': 'text/html' }));
    const summary = await runQueue(
      { store, provider: provider(fake) },
      { ...fast, concurrency: 4, maxAttempts: 3, maxOutageMs: 1500, heartbeatMs: 100 },
    );
    expect(summary.fatal?.message).toMatch(/has been failing for .*--max-outage.*HTTP 200: invalid completion body/);
    expect(summary.failed).toBe(0);
    // a page is not a model's work: none of these tries counts as one that may be billed (a --budget spent on nothing)
    expect(summary.mayBeBilled.tries).toBe(0);
    // the first requests at full concurrency, then the probes (100, 200, 400, 400 ms apart): not 20 x 3
    expect(fake.received).toBeLessThan(16);
    expect((await jobsByState(store)).every((r) => r.state === 'pending')).toBe(true);
    await store.close();
  });

  it('a provider that takes requests and never answers: said early, probed one at a time, down since the first request', async () => {
    const { fake, store } = await setup(12, { latencyMs: 5, record: true });
    fake.respond(() => reply.hang());
    const t0 = Date.now();
    const events: Array<{ at: number; event: keyof SchedulerEventMap; payload: any }> = [];
    const summary = await runQueue(
      { store, provider: provider(fake, 600_000), emit: (event, payload) => events.push({ at: Date.now(), event, payload }) },
      {
        ...fast,
        concurrency: 4,
        maxOutageMs: 5000,
        timeout: 'auto',
        timeoutCapMs: 2000,
        outage: { probeDelayMs: 300, maxProbeDelayMs: 600 },
      },
    );
    // a tenth of the cap in (here the first request is still out alone, learning the limits): the
    // requests wait up to the cap for a model with no latencies to go by
    const warning = events.find((e) => e.event === 'warning');
    expect(warning?.payload.message).toMatch(
      /^1 request has waited \d+s for gpt-4o-mini with no answer .*--timeout auto waits up to 2s for each; give --timeout <seconds>/,
    );
    expect(warning!.at - t0).toBeLessThan(2500);
    const paused = events.find((e) => e.event === 'paused')!;
    // the provider has not answered since the first request left, not since the breaker saw three time out
    expect(paused.payload.downSinceMs - t0).toBeLessThan(1000);
    // requests waiting for a slot as the breaker opened stay back: the first probe is the next to go
    expect(fake.requests.filter((r) => r.receivedAt >= paused.at && r.receivedAt < paused.at + 250)).toEqual([]);
    expect(summary.fatal?.message).toMatch(/has been not answering for \d+s \(--max-outage\)/);
    expect(Date.now() - t0).toBeLessThan(9000);
    expect((await jobsByState(store)).every((r) => r.state === 'pending')).toBe(true);
    await store.close();
  }, 15_000);

  it('429s and nothing answered for two minutes: said once, with what to look at; the run goes on till stopped', async () => {
    const { fake, store } = await setup(3, { latencyMs: 5 });
    fake.respond(() => reply.error(429, 'Rate limit reached for requests', { type: 'requests', code: 'rate_limit_exceeded' }));
    // the minute passes on the run's clock once the first 429s came
    let skew = 0;
    const events: Array<{ event: keyof SchedulerEventMap; payload: any }> = [];
    const stop = new AbortController();
    const running = runQueue(
      {
        store,
        provider: provider(fake),
        now: () => Date.now() + skew,
        stopSignal: stop.signal,
        emit: (event, payload) => {
          events.push({ event, payload });
          if (event === 'warning' && /nothing answered/.test((payload as { message: string }).message)) stop.abort();
        },
      },
      { ...fast, concurrency: 2 },
    );
    await fake.waitForRequests(2);
    expect(events.some((e) => e.event === 'warning')).toBe(false);
    skew = 121_000;
    await waitFor(() => stop.signal.aborted, { what: 'the word on a run refused all along', timeoutMs: 10_000 });
    const summary = await running;
    expect([summary.reason, summary.done]).toEqual(['signal', 0]);
    const said = events.filter((e) => e.event === 'warning' && /nothing answered/.test(e.payload.message));
    expect(said).toHaveLength(1);
    expect(said[0]!.payload.message).toMatch(
      /^nothing answered in 2m \d+s: \d+ requests were refused with 429 \(the last: .*Rate limit reached for requests\)\. A key with no quota left/,
    );
    await store.close();
  }, 30_000);

  it('a job that failed on its own in an earlier run waits out an outage the other jobs opened, rather than failing on its attempts', async () => {
    const { fake, store, keys } = await setup(4, { latencyMs: 5 });
    // the first two: three 500s each, counted in an earlier run (src/store/own-failures.ts)
    const t = Date.now();
    await store.claim({ owner: 'earlier', limit: 2, now: t, leaseUntil: t + 60_000, maxAttempts: 9 });
    for (const key of keys.slice(0, 2)) await failedThriceBefore(store, key, t);
    await store.release('earlier', { refund: true, now: t + 10 });
    // then the provider is down for everyone for 2.5 s: probes every 30-60 ms go to any of the four
    const down = downForFromFirstRequest(2500);
    fake.respond(() => (down() ? reply.serverError(503, 'down') : undefined));
    const summary = await runQueue(
      { store, provider: provider(fake) },
      { ...fast, concurrency: 4, maxAttempts: 4, maxOutageMs: 60_000, outage: { probeDelayMs: 30, maxProbeDelayMs: 60 } },
    );
    // each probe that went to one of them used an attempt: both failed within the outage
    expect(summary).toMatchObject({ done: 4, failed: 0 });
    await store.close();
  });

  it("a job that failed on its own before counts towards an outage when others' failures began a row before its own came back", async () => {
    const { fake, store, keys } = await setup(3, { latencyMs: 5 });
    const t = Date.now();
    await store.claim({ owner: 'earlier', limit: 3, now: t, leaseUntil: t + 60_000, maxAttempts: 9 });
    await failedThriceBefore(store, keys[2]!, t);
    // its next try its second and last; the others' their first
    await store.release('earlier', { refund: true, now: t + 10, keys: keys.slice(0, 2) });
    await store.release('earlier', { refund: false, now: t + 10 });
    // Down for 1.5 s. The poisoned job's 503 comes back 600 ms after it left: by then the two others
    // have failed once each (their retries wait 2 s), a row of two the breaker opens on at three. Its
    // own failure, taken as its own, would have used its last attempt.
    const down = downForFromFirstRequest(1500);
    fake.respond((req) => {
      if (!down()) return undefined;
      return req.key === keys[2] ? { ...reply.serverError(503, 'down'), latencyMs: 600 } : reply.serverError(503, 'down');
    });
    const summary = await runQueue(
      { store, provider: provider(fake) },
      { ...fast, retryDelayMs: 2000, maxRetryDelayMs: 2000, concurrency: 3, maxAttempts: 2, maxOutageMs: 60_000 },
    );
    expect(summary).toMatchObject({ done: 3, failed: 0 });
    await store.close();
  });

  it('ends at --max-outage without waiting out the timeout of a request still on the wire', async () => {
    // The first request goes alone and times out first; its retry leaves at once and the breaker
    // opens only when the others time out: the run then ended a whole timeout later (20 minutes for
    // a --max-outage 1 behind a 10-minute timeout), waiting for that retry.
    const { fake, store } = await setup(8, { latencyMs: 5 });
    fake.respond(() => reply.hang());
    const t0 = Date.now();
    const summary = await runQueue(
      { store, provider: provider(fake, 600_000) },
      {
        ...fast,
        concurrency: 4,
        maxOutageMs: 1000,
        timeout: 'auto',
        timeoutCapMs: 6000,
        outage: { probeDelayMs: 5000, maxProbeDelayMs: 5000 },
      },
    );
    expect(summary.fatal?.message).toMatch(/has been not answering for \d+s \(--max-outage\)/);
    // the others time out at 2 + 6 s; the retry would have held the end until 6 + 6 s
    expect(Date.now() - t0).toBeLessThan(10_500);
    const rows = await jobsByState(store);
    expect(rows.every((r) => r.state === 'pending')).toBe(true);
    await store.close();
  }, 20_000);

  it('on a stop signal lets in-flight requests finish and hands the rest back', async () => {
    const { fake, store } = await setup(30, { latencyMs: 100 });
    const stop = new AbortController();
    void fake.waitForRequests(6).then(() => stop.abort());
    const summary = await runQueue({ store, provider: provider(fake), stopSignal: stop.signal }, { ...fast, concurrency: 3 });
    expect(summary.reason).toBe('signal');
    const rows = await jobsByState(store);
    expect(rows.filter((r) => r.state === 'running')).toEqual([]);
    expect(rows.filter((r) => r.state === 'done').length).toBe(summary.done);
    // every request that went out came back and was stored: nothing paid for and lost
    expect(summary.done).toBe(fake.received);
    // jobs never sent got their attempt back
    expect(rows.filter((r) => r.state === 'pending').every((r) => r.attempts === 0)).toBe(true);
    await store.close();
  });

  it('with a second signal aborts in-flight requests and hands them back', async () => {
    const { fake, store } = await setup(6, { latencyMs: 5000 });
    const stop = new AbortController();
    const abort = new AbortController();
    void fake.waitForRequests(1).then(() => {
      stop.abort();
      abort.abort();
    });
    const t0 = Date.now();
    const summary = await runQueue(
      { store, provider: provider(fake, 10_000), stopSignal: stop.signal, abortSignal: abort.signal },
      { ...fast, concurrency: 2 },
    );
    expect(Date.now() - t0).toBeLessThan(2000);
    expect([summary.reason, summary.done]).toEqual(['signal', 0]);
    expect((await jobsByState(store)).every((r) => r.state === 'pending' && r.attempts === 0)).toBe(true);
    await store.close();
  });

  it("a hard stop counts tries that may be billed, but none of the offline mock's: it bills nothing", async () => {
    const stoppedMidRequest = async (free: boolean) => {
      const store = new SqliteStore(join(tempDir(), 'q.db'));
      await seedJobs(store, 4);
      const mock = new MockProvider({ latencyMs: 10_000, jitter: 0 });
      const stop = new AbortController();
      const abort = new AbortController();
      let sent = 0;
      const slow: Provider = {
        name: 'mock',
        free,
        complete(body, options) {
          if (++sent === 2)
            setImmediate(() => {
              stop.abort();
              abort.abort();
            });
          return mock.complete(body, options);
        },
      };
      const summary = await runQueue(
        { store, provider: slow, stopSignal: stop.signal, abortSignal: abort.signal },
        { ...fast, concurrency: 2 },
      );
      await store.close();
      return summary.mayBeBilled.tries;
    };
    expect(await stoppedMidRequest(false)).toBe(2);
    expect(await stoppedMidRequest(true)).toBe(0);
  });

  it('--limit stops after N jobs', async () => {
    const { fake, store } = await setup(20);
    const summary = await runQueue({ store, provider: provider(fake) }, { ...fast, limit: 7, concurrency: 3 });
    expect(summary).toMatchObject({ reason: 'limit', done: 7, remaining: 13 });
    await store.close();
  });

  it('takes back jobs of a run that died on this host at once, and fails a crash loop at max attempts', async () => {
    const { fake, store, keys } = await setup(3);
    // A dead run (pid that cannot exist) holding every job, with a lease far in the future.
    await store.startRun({ id: 'dead-run', host: 'this-host', pid: 999_999_999, startedAt: Date.now(), options: {} });
    for (let i = 0; i < 3; i++) {
      await store.claim({ owner: 'dead-run', limit: 1, now: Date.now(), leaseUntil: Date.now() + 3600_000, maxAttempts: 5 });
    }
    // its last heartbeat said all three had gone out (none unsent): their attempts stay used
    await store.heartbeat('dead-run', Date.now() + 1, Date.now() + 3600_000, NO_STATS, []);
    // the first job has crashed its runs 3 times already
    store.db.prepare('UPDATE jobs SET attempts = 3 WHERE key = ?').run(keys[0]);
    const summary = await runQueue({ store, provider: provider(fake), host: 'this-host' }, { ...fast, maxAttempts: 3 });
    expect(summary).toMatchObject({ done: 2, failed: 1 });
    const first = (await jobsByState(store))[0]!;
    expect(first).toMatchObject({ state: 'failed', attempts: 3 });
    expect(first.error).toMatch(/gave up after 3 attempts/);
    expect(fake.sentCount(keys[0]!)).toBe(0);
    await store.close();
  });

  it('paces --rpm so a provider enforcing it per second never answers 429', async () => {
    // 2-second windows: the same limit, less at the mercy of a loaded machine's scheduling jitter
    const { fake, store } = await setup(25, { latencyMs: 20, rpm: 600, windowMs: 2000 });
    const summary = await runQueue({ store, provider: provider(fake) }, { ...fast, concurrency: 8, rpm: 600 });
    expect(summary.done).toBe(25);
    expect(fake.rateLimited).toBe(0);
    await store.close();
  });

  it('paces --tpm, and a request bigger than the whole bucket still goes (alone)', async () => {
    const fake = await startFake({ latencyMs: 5, tpm: 60_000, windowMs: 2000 }); // 2,000 tokens per 2-second window
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 12, { maxTokens: 20 });
    // one job bigger than the bucket (60 tokens) but within one window of the fake
    const big = canonicalJson({ model: 'gpt-4o-mini', max_tokens: 600, messages: [{ role: 'user', content: 'a big one' }] });
    await store.enqueue(
      [{ itemId: 'big', source: 'seed', meta: null, key: jobKey(big), request: big, model: 'gpt-4o-mini', priority: 0 }],
      Date.now(),
    );
    const summary = await runQueue({ store, provider: provider(fake) }, { ...fast, concurrency: 4, tpm: 60_000 });
    expect(summary.done).toBe(13);
    expect(fake.rateLimited).toBe(0);
    await store.close();
  });

  // docs/architecture.md, invariant 6
  it('three runs on one database send every job once (invariant 6)', async () => {
    const { fake, store, keys, path } = await setup(150, { latencyMs: 3 });
    const others = [new SqliteStore(path), new SqliteStore(path)];
    const summaries = await Promise.all(
      [store, ...others].map((s) => runQueue({ store: s, provider: provider(fake) }, { ...fast, concurrency: 4 })),
    );
    expect(summaries.reduce((a, s) => a + s.done, 0)).toBe(150);
    expect(fake.duplicates()).toEqual([]);
    expect(keys.every((k) => fake.sentCount(k) === 1)).toBe(true);
    for (const s of others) await s.close();
    await store.close();
  });

  it('a stop while a budget reservation is being committed sends nothing, and leaves nothing reserved or counted as may be billed', async () => {
    const { fake, store } = await setup(1);
    const stop = new AbortController();
    const abort = new AbortController();
    // both stops come after the reservation is asked and before it is committed (SQLite commits
    // reservations of one turn together, a turn later)
    const stopsWhileReserving = new Proxy(store, {
      get(target, name) {
        if (name === 'reserve')
          return (r: Parameters<SqliteStore['reserve']>[0]) => {
            const reserved = target.reserve(r);
            stop.abort();
            abort.abort();
            return reserved;
          };
        const value = Reflect.get(target, name);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    await runQueue(
      { store: stopsWhileReserving, provider: provider(fake), stopSignal: stop.signal, abortSignal: abort.signal, runId: 'stopped' },
      { ...fast, budget: { runUsd: 10, totalUsd: null } },
    );
    expect(fake.received).toBe(0);
    expect(await store.committed('stopped')).toEqual({ run: 0, total: 0 });
    expect(await all(store.copier.dumpAttempts())).toEqual([]);
    expect((await jobsByState(store)).map((j) => j.state)).toEqual(['pending']);
    await store.close();
  });
});
