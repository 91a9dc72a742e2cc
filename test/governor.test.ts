import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MockProvider } from '../src/provider/mock.js';
import type { Provider } from '../src/provider/types.js';
import { runQueue, type RunOptions } from '../src/scheduler/run-queue.js';
import type { SchedulerEventMap } from '../src/scheduler/events.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { reply, type FakeOpenAI } from './helpers/fake-openai.js';
import { requestFor, seedJobs } from './helpers/seed.js';
import { jobKey } from '../src/request.js';
import { estimatePromptTokens, requestedCompletionTokens } from '../src/provider/tokens.js';
import { tempDir } from './helpers/tmp.js';
import { spawn } from 'node:child_process';
import { BIN, cliEnv, collect, runCli } from './helpers/cli.js';
import { startFake } from './helpers/start-fake.js';
import { all } from './helpers/store-reads.js';
import { fast, provider, setup } from './helpers/governor-setup.js';

/**
 * The rate governor end to end against the HTTP fake: lanes per model, limits learned from headers
 * and remembered, --timeout auto, --max-outage, a key refused for one job. Functional, not timed:
 * each would hang, loop or misbehave visibly if its rule broke.
 */
/** `count` jobs of `model`, items named `<model>-<n>` so several calls never share an item. */
async function seedModel(store: SqliteStore, model: string, count: number, word = model): Promise<string[]> {
  const rows = Array.from({ length: count }, (_, n) => {
    const request = requestFor(n, { model, text: `${word} ${n}` });
    return { itemId: `${model}-${word}-${n}`, source: 'seed', meta: null, key: jobKey(request), request, model, priority: 0 };
  });
  await store.enqueue(rows, Date.now());
  return rows.map((r) => r.key);
}

/** A run of the queue against the fake, with the times its requests left. */
async function runTimingStarts(fake: FakeOpenAI, store: SqliteStore, options: RunOptions) {
  const times: number[] = [];
  const emit = (e: string) => {
    if (e === 'job:start') times.push(Date.now());
  };
  const summary = await runQueue({ store, provider: provider(fake), baseUrl: fake.url, emit }, options);
  return { summary, times };
}

const OPENAI_600 = { 'x-ratelimit-limit-requests': '600', 'x-ratelimit-remaining-requests': '599', 'x-ratelimit-reset-requests': '100ms' };

describe('rate governor', () => {
  it('a paused lane holds neither the slots nor the claims of another model', async () => {
    const { fake, store } = await setup({ latencyMs: 2 });
    await seedModel(store, 'slow-model', 30);
    await seedModel(store, 'fast-model', 10);
    // every slow-model request is rate limited (1 s at a time) until the fast model is done, or
    // 20 s have passed: a slow lane that held the slots or the claims would finish first
    let limiting = true;
    const safety = setTimeout(() => (limiting = false), 20_000);
    fake.respond((r) => (r.json?.model === 'slow-model' && limiting ? reply.rateLimited(1000) : undefined));
    const modelOf = new Map((await all(store.copier.dumpJobs())).map((j) => [j.key, j.model]));
    const doneAt = new Map<string, number[]>();
    const t0 = Date.now();
    const summary = await runQueue(
      {
        store,
        provider: provider(fake),
        emit: (e, p) => {
          if (e !== 'job:done') return;
          const model = modelOf.get((p as SchedulerEventMap['job:done']).key)!;
          doneAt.set(model, [...(doneAt.get(model) ?? []), Date.now() - t0]);
          if (model === 'fast-model' && doneAt.get(model)!.length === 10) limiting = false;
        },
      },
      { ...fast, concurrency: 2 },
    );
    clearTimeout(safety);
    expect(summary).toMatchObject({ reason: 'drained', done: 40 });
    // the fast lane finished while the slow one was still paused
    expect(Math.max(...doneAt.get('fast-model')!)).toBeLessThan(Math.min(...doneAt.get('slow-model')!));
    await store.close();
  });

  it('slow lanes do not keep a fast model from being claimed', async () => {
    const { store } = await setup();
    // two models known to allow 20 a minute, and one with no limit, at concurrency 2
    for (const model of ['slow-a', 'slow-c']) {
      await store.saveLaneLimits({ baseUrl: 'test', model, rpm: 20, tpm: null, source: 'headers', at: Date.now() });
      await seedModel(store, model, 5);
    }
    await seedModel(store, 'fast', 5);
    const modelOf = new Map((await all(store.copier.dumpJobs())).map((j) => [j.key, j.model]));
    const t0 = Date.now();
    const fastDone: number[] = [];
    const stop = new AbortController();
    const run = runQueue(
      {
        store,
        provider: new MockProvider({ latencyMs: 5 }),
        baseUrl: 'test',
        stopSignal: stop.signal,
        emit: (e, p) => {
          if (e !== 'job:done') return;
          const model = modelOf.get((p as SchedulerEventMap['job:done']).key)!;
          if (model === 'fast' && fastDone.push(Date.now() - t0) === 5) stop.abort();
        },
      },
      { ...fast, concurrency: 2 },
    );
    await run;
    // with the room in hand held by the slow lanes' waiting jobs, the fast ones would wait ~7 s
    expect(fastDone).toHaveLength(5);
    expect(Math.max(...fastDone)).toBeLessThan(4000);
    await store.close();
  });

  // the token limit: what two requests a second weigh (each about 14 tokens of prompt and 64 asked for)
  const weight = (() => {
    const request = JSON.parse(requestFor(0));
    return estimatePromptTokens(request) + requestedCompletionTokens(request);
  })();
  it.each([
    { limit: 'requests', rpm: 120, tpm: null },
    { limit: 'tokens', rpm: null, tpm: 120 * weight },
  ])(
    'a lane paced at a known limit of $limit holds about two seconds of its sends, not a claim of the whole room',
    async ({ rpm, tpm }) => {
      const { store } = await setup();
      // 2 a second remembered, -c 16: claims filling the room in hand (32) would hold 16 s of work
      // that only waits, shown as running and out of reach of other runs
      await store.saveLaneLimits({ baseUrl: 'test', model: 'gpt-4o-mini', rpm, tpm, source: 'headers', at: Date.now() });
      await seedJobs(store, 60, { model: 'gpt-4o-mini' });
      const stop = new AbortController();
      const running: number[] = [];
      const watch = setInterval(() => void store.status().then((s) => running.push(s.counts.running)), 100);
      setTimeout(() => stop.abort(), 3000);
      const summary = await runQueue(
        { store, provider: new MockProvider({ latencyMs: 5 }), baseUrl: 'test', stopSignal: stop.signal },
        { ...fast, concurrency: 16 },
      ).finally(() => clearInterval(watch));
      // two seconds at 2 a second, and the one in flight
      expect(running.length).toBeGreaterThan(10);
      expect(Math.max(...running)).toBeLessThanOrEqual(5);
      // and the pace is kept busy: about 6 sent in 3 s
      expect(summary.done).toBeGreaterThanOrEqual(4);
      expect((await store.status()).counts.running).toBe(0);
      await store.close();
    },
  );

  it('a paced model beside one of unknown limit holds about two seconds of its sends; the other keeps the room', async () => {
    const { store } = await setup();
    // 2 a second remembered for `slow`; nothing known of `fast`, queued after it: one claim of the
    // whole room took slow's jobs first, and held 16 s of them waiting on its pace
    await store.saveLaneLimits({ baseUrl: 'test', model: 'slow', rpm: 120, tpm: null, source: 'headers', at: Date.now() });
    // one fast job first: the run's first claim then meets fast, and slow's lane is not open yet
    await seedModel(store, 'fast', 1, 'first');
    await seedModel(store, 'slow', 60);
    await seedModel(store, 'fast', 400);
    const stop = new AbortController();
    const slowRunning: number[] = [];
    const watch = setInterval(
      () => void store.status().then((s) => slowRunning.push(s.byModel.find((m) => m.model === 'slow')?.running ?? 0)),
      100,
    );
    setTimeout(() => stop.abort(), 3000);
    const summary = await runQueue(
      { store, provider: new MockProvider({ latencyMs: 5 }), baseUrl: 'test', stopSignal: stop.signal },
      { ...fast, concurrency: 16 },
    ).finally(() => clearInterval(watch));
    expect(slowRunning.length).toBeGreaterThan(10);
    expect(Math.max(...slowRunning)).toBeLessThanOrEqual(5);
    // and the model of unknown limit is sent at the run's concurrency meanwhile
    const done = (await store.status()).byModel;
    expect(done.find((m) => m.model === 'fast')?.done).toBe(401);
    expect(done.find((m) => m.model === 'slow')?.done).toBeGreaterThanOrEqual(4);
    expect(summary.failed).toBe(0);
    await store.close();
  });

  it('a request over the key\'s tokens per minute (OpenAI\'s 429 "Request too large") fails its job at once; the others are sent', async () => {
    const { fake, store } = await setup();
    const [big] = await seedModel(store, 'gpt-4o-mini', 6);
    fake.respond((r) => (jobKey(r.body) === big ? reply.requestTooLarge() : undefined));
    const summary = await runQueue({ store, provider: provider(fake) }, { ...fast, concurrency: 2 });
    expect(summary).toMatchObject({ reason: 'drained', done: 5, failed: 1 });
    expect(fake.sentCount(big!)).toBe(1);
    const status = await store.status();
    expect(status.failures).toEqual([{ error: expect.stringMatching(/^HTTP 429: Request too large/), count: 1 }]);
    await store.close();
  });

  it('a document holding a special token is counted as text, not a reason to stop', async () => {
    const { store } = await setup();
    await seedModel(store, 'gpt-4o-mini', 3, 'see <|endoftext|> and <|im_start|>');
    const summary = await runQueue({ store, provider: new MockProvider({ latencyMs: 1 }) }, { ...fast, tpm: 100_000 });
    expect(summary).toMatchObject({ reason: 'drained', done: 3 });
    await store.close();
  });

  it('learns the limit from the headers, remembers it per (base URL, model), and status shows it', async () => {
    const { fake, store, path } = await setup({ latencyMs: 1 });
    await seedJobs(store, 5, { model: 'gpt-4o-mini' });
    fake.respond(() => reply.ok({ headers: OPENAI_600 }));
    let lanes: SchedulerEventMap['progress']['lanes'] = [];
    await runQueue(
      {
        store,
        provider: provider(fake),
        baseUrl: fake.url,
        emit: (e, p) => {
          if (e === 'progress') lanes = (p as SchedulerEventMap['progress']).lanes;
        },
      },
      fast,
    );
    expect(lanes).toEqual([
      expect.objectContaining({ model: 'gpt-4o-mini', rpm: 600, tpm: null, learned: expect.objectContaining({ source: 'headers' }) }),
    ]);
    expect(await store.laneLimits()).toEqual([
      expect.objectContaining({ baseUrl: fake.url, model: 'gpt-4o-mini', rpm: 600, tpm: null, source: 'headers' }),
    ]);
    await store.close();

    const text = await runCli(['status', '--db', path]);
    expect(text.stdout).toMatch(/limits\s+gpt-4o-mini: 600 rpm, from headers \d+s ago/);
    const json = JSON.parse((await runCli(['status', '--db', path, '--json'])).stdout);
    expect(json.limits).toEqual([expect.objectContaining({ model: 'gpt-4o-mini', rpm: 600, source: 'headers' })]);
  });

  it('a cold lane sends one request first and paces the rest by its headers: no burst over the limit', async () => {
    // 16 slots, nothing known: without a first request alone, 16 would leave at once into a
    // provider allowing 10 a second.
    const { fake, store } = await setup({ latencyMs: 20, rpm: 600 });
    await seedJobs(store, 30);
    const { summary, times } = await runTimingStarts(fake, store, { ...fast, concurrency: 16 });
    expect(summary).toMatchObject({ reason: 'drained', done: 30 });
    // A burst of 16 into a first window allowing 10 meets 6 429s at least; paced, none (a loaded
    // machine's jitter may still cost one or two, which is the bench's business).
    expect(fake.rateLimited).toBeLessThanOrEqual(2);
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(20); // the second waited for the first answer
    await store.close();
  });

  it('with --rpm alone the first request still goes alone: the token limit its headers say paces the rest, no burst over it', async () => {
    // requests of about 90 tokens (prompt and max_tokens) against 6,000 tokens a minute, 100 in each
    // second: a burst at the --rpm pace (100 requests a second) meets 429s from the second request on
    const { fake, store } = await setup({ latencyMs: 20, tpm: 6000 });
    await seedJobs(store, 6);
    const { summary, times } = await runTimingStarts(fake, store, { ...fast, concurrency: 16, rpm: 6000 });
    expect(summary).toMatchObject({ reason: 'drained', done: 6 });
    expect(times[1]! - times[0]!).toBeGreaterThanOrEqual(20); // the second waited for the first answer
    expect(fake.rateLimited).toBeLessThanOrEqual(1);
    await store.close();
  });

  it('the offline mock has no limit to learn: its first requests leave together, not one alone', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 8);
    const times: number[] = [];
    const summary = await runQueue(
      {
        store,
        provider: new MockProvider({ latencyMs: 200, jitter: 0 }),
        emit: (e) => {
          if (e === 'job:start') times.push(Date.now());
        },
      },
      { ...fast, concurrency: 8 },
    );
    expect(summary).toMatchObject({ reason: 'drained', done: 8 });
    // held for the first answer, the second would start 200 ms after the first
    expect(times[7]! - times[0]!).toBeLessThan(150);
    await store.close();
  });

  it('the next run starts at the remembered pace instead of probing', async () => {
    const { fake, store } = await setup({ latencyMs: 1 });
    await store.saveLaneLimits({ baseUrl: fake.url, model: 'gpt-4o-mini', rpm: 120, tpm: null, source: 'headers', at: Date.now() });
    await seedJobs(store, 6, { model: 'gpt-4o-mini' });
    const times: number[] = [];
    await runQueue(
      {
        store,
        provider: provider(fake),
        baseUrl: fake.url,
        emit: (e) => {
          if (e === 'job:start') times.push(Date.now());
        },
      },
      { ...fast, concurrency: 6 },
    );
    // 120 rpm is 2 a second: six requests need over two seconds even with six slots
    expect(times[5]! - times[0]!).toBeGreaterThanOrEqual(2000);
    await store.close();
  });

  /** A library user's provider: it hands the run's signal to fetch, which needs a real AbortSignal. */
  const viaFetch = (fake: FakeOpenAI): Provider => ({
    name: 'fetch-based',
    async complete(requestJson, { signal }) {
      const res = await fetch(`${fake.url}/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: requestJson,
        signal,
      });
      const body = await res.text();
      const answer = JSON.parse(body);
      const usage = { promptTokens: answer.usage.prompt_tokens, completionTokens: answer.usage.completion_tokens };
      return { status: res.status, output: answer.choices[0].message.content, body, usage, rateLimit: null };
    },
  });

  it.each([
    { name: 'the OpenAI provider', make: (fake: FakeOpenAI) => provider(fake, 600_000) },
    { name: 'a provider built on fetch', make: viaFetch },
  ])('--timeout auto cuts a hung request of $name once the lane has answers, and retries it', async ({ make }) => {
    const { fake, store } = await setup({ latencyMs: 5 });
    const keys = await seedJobs(store, 40);
    let hung = false;
    fake.respond((r) => {
      if (r.key !== keys[0] || hung) return undefined;
      hung = true;
      return reply.hang();
    });
    const summary = await runQueue({ store, provider: make(fake) }, { ...fast, concurrency: 4, timeout: 'auto' });
    expect(summary).toMatchObject({ reason: 'drained', done: 40, failed: 0 });
    const { attempts } = (await store.item('doc-0'))!; // seedJobs: item doc-0 is job keys[0]
    expect(attempts.map((a) => a.outcome)).toEqual(['retry', 'done']);
    expect(attempts[0]!.error).toMatch(/Timed out after .* \(--timeout auto: .*p99 latency.*\).*may bill/);
    await store.close();
  });

  it('--timeout auto gives a large max_tokens no extra time when latency does not grow with tokens', async () => {
    const { fake, store } = await setup({ latencyMs: 5 });
    // answers of ~12 tokens, max_tokens 64: a proportional stretch would wait 64 / 16 x the floor
    const keys = await seedJobs(store, 200);
    const last = keys[199]!; // hangs once the lane has its answers
    let hung = false;
    fake.respond((r) => {
      if (r.key !== last || hung) return undefined;
      hung = true;
      return reply.hang();
    });
    const summary = await runQueue({ store, provider: provider(fake, 600_000) }, { ...fast, concurrency: 4, timeout: 'auto' });
    expect(summary).toMatchObject({ reason: 'drained', done: 200, failed: 0 });
    const cut = (await store.item('doc-199'))!.attempts[0]!.error!; // job `last`
    const limit = /the limit was ([\d.]+) (m?s)/.exec(cut);
    expect(Number(limit?.[1]) * (limit?.[2] === 's' ? 1000 : 1)).toBeLessThan(1500);
    await store.close();
  });

  it('--timeout auto still cuts a hung request when this process is busy all the time', { timeout: 60_000 }, async () => {
    const { fake, store } = await setup({ latencyMs: 1 });
    const keys = await seedJobs(store, 30);
    const last = keys[26]!; // hangs once the lane has its answers
    let hung = false;
    fake.respond((r) => {
      // 200 ms of synchronous work for every request: the watchdog's ticks are late one after another
      const until = performance.now() + 200;
      while (performance.now() < until);
      if (r.key !== last || hung) return undefined;
      hung = true;
      return reply.hang();
    });
    const summary = await runQueue({ store, provider: provider(fake, 600_000) }, { ...fast, concurrency: 2, timeout: 'auto' });
    expect(summary).toMatchObject({ reason: 'drained', done: 30, failed: 0 });
    const cut = (await store.item('doc-26'))!.attempts[0]!.error!; // job `last`
    expect(cut).toMatch(/Timed out after .* \(--timeout auto: .*p99 latency/);
    await store.close();
  });

  it('--timeout auto never cuts a long answer when latency grows with tokens', async () => {
    const { fake, store } = await setup();
    const keys = await seedJobs(store, 41, { maxTokens: 1000 });
    const long = keys[40]!; // last in line: the lane has its answers by then
    // 2 ms a token: answers of 10 to 60 tokens, then one of 750 (1.5 s), far over what was seen
    fake.respond((r) => {
      const tokens = r.key === long ? 750 : 10 + ((keys.indexOf(r.key) * 7) % 51);
      return reply.ok({ usage: { prompt_tokens: 10, completion_tokens: tokens }, latencyMs: 2 * tokens });
    });
    const summary = await runQueue({ store, provider: provider(fake, 600_000) }, { ...fast, concurrency: 4, timeout: 'auto' });
    expect(summary).toMatchObject({ reason: 'drained', done: 41, failed: 0 });
    expect((await store.item('doc-40'))!.attempts.map((a) => a.outcome)).toEqual(['done']); // job `long`
    await store.close();
  });

  it('ends the run when the provider stays unreachable past --max-outage; jobs stay pending', async () => {
    const { fake, store } = await setup();
    await seedJobs(store, 5);
    await fake.down();
    const warnings: string[] = [];
    const emit = <E extends keyof SchedulerEventMap>(event: E, payload: SchedulerEventMap[E]) => {
      if (event === 'warning') warnings.push((payload as SchedulerEventMap['warning']).message);
    };
    const summary = await runQueue({ store, provider: provider(fake), baseUrl: fake.url, emit }, { ...fast, maxOutageMs: 1500 });
    expect(summary.reason).toBe('fatal');
    expect(summary.fatal?.message).toMatch(/unreachable for \d+(\.\d+)?(s|m)[^(]*\(--max-outage\); the last try said: .*ECONNREFUSED/);
    // nothing ever answered there: most likely the wrong address, said once with what to do
    const nobody = warnings.filter((w) => w.startsWith('nothing answers at'));
    expect(nobody).toHaveLength(1);
    expect(nobody[0]).toMatch(
      new RegExp(
        `^nothing answers at ${fake.url.replace(/[.]/g, '\\.')} \\(.*ECONNREFUSED.*\\) and nothing has answered yet: .* give its address with --base-url\\.`,
      ),
    );
    const rows = await all(store.copier.dumpJobs());
    expect(rows.every((r) => r.state === 'pending' && r.attempts === 0)).toBe(true);
    await store.close();
  });

  it('a provider that answered, if only with refusals, then stops listening is not said to be at the wrong address', async () => {
    const { fake, store } = await setup();
    await seedJobs(store, 6);
    // two refusals (a 400 each: an answer all the same), then the server goes away
    fake.respond((r) => {
      if (r.index === 2) setTimeout(() => void fake.down(), 0);
      return reply.error(400, "Invalid value for 'temperature'.");
    });
    const warnings: string[] = [];
    const emit = <E extends keyof SchedulerEventMap>(event: E, payload: SchedulerEventMap[E]) => {
      if (event === 'warning') warnings.push((payload as SchedulerEventMap['warning']).message);
    };
    const summary = await runQueue(
      { store, provider: provider(fake), baseUrl: fake.url, emit },
      { ...fast, concurrency: 1, maxOutageMs: 1500 },
    );
    expect(summary.reason).toBe('fatal');
    expect(summary.fatal?.message).toMatch(/unreachable for .*ECONNREFUSED/);
    expect(summary.failed).toBeGreaterThanOrEqual(2);
    expect(warnings.filter((w) => w.startsWith('nothing answers'))).toEqual([]);
    await store.close();
  });

  it('a provider answering only 500s past --max-outage is said to be failing, not unreachable; while down, the pause says for how long and the ETA is unknown', async () => {
    const { fake, store } = await setup();
    await seedJobs(store, 20);
    // some answers first: a pace to reckon an ETA from, which says nothing while the provider is down
    fake.respond((r) => (r.index <= 5 ? undefined : reply.error(500, 'Internal Server Error', { type: 'server_error' })));
    const paused: SchedulerEventMap['paused'][] = [];
    const etas: (number | null)[] = [];
    // what status in another process reads of the run meanwhile: its heartbeat's stats
    const reads: Promise<unknown>[] = [];
    const warnings: string[] = [];
    const emit = <E extends keyof SchedulerEventMap>(event: E, payload: SchedulerEventMap[E]) => {
      if (event === 'warning') warnings.push((payload as SchedulerEventMap['warning']).message);
      if (event === 'paused') paused.push(payload as SchedulerEventMap['paused']);
      if (event === 'progress') {
        const p = payload as SchedulerEventMap['progress'];
        if (p.paused?.reason === 'outage') {
          etas.push(p.etaSeconds);
          reads.push(store.activeRuns().then((runs) => runs[0]?.stats?.paused));
        }
      }
    };
    const summary = await runQueue(
      { store, provider: provider(fake), baseUrl: fake.url, emit },
      { ...fast, concurrency: 2, maxOutageMs: 4500 },
    );
    expect(summary.reason).toBe('fatal');
    expect(summary.fatal?.message).toMatch(/failing for \d+(\.\d+)?(s|m)[^(]*\(--max-outage\); the last try said: HTTP 500/);
    expect(paused.length).toBeGreaterThan(1);
    // every pause of one outage counts from its start, and ends where --max-outage does
    const since = paused[0]!.downSinceMs!;
    for (const p of paused) expect([p.reason, p.downSinceMs, p.givesUpAtMs]).toEqual(['outage', since, since + 4500]);
    expect(await Promise.all(reads)).toContainEqual(
      expect.objectContaining({ reason: 'outage', downSince: since, givesUpAt: since + 4500 }),
    );
    expect(summary.done).toBe(5);
    // something answers there, failing: not the wrong address
    expect(warnings.filter((w) => w.startsWith('nothing answers'))).toEqual([]);
    expect(etas.length).toBeGreaterThan(0);
    expect(etas.every((eta) => eta === null)).toBe(true);
    await store.close();
  });

  it('a 403 after the key has worked fails that job alone, refused twice; three in a row stop the run and fail none', async () => {
    const { fake, store } = await setup({ latencyMs: 1 });
    const keys = await seedJobs(store, 8);
    fake.respond((r) => (r.key === keys[3] ? reply.error(403, 'This model is not available to your organization.') : undefined));
    const one = await runQueue({ store, provider: provider(fake) }, { ...fast, concurrency: 1 });
    expect(one).toMatchObject({ reason: 'drained', done: 7, failed: 1 });
    // tried once more, its attempt given back: the first refusal might have been a key being revoked
    expect(fake.requests.filter((r) => r.key === keys[3])).toHaveLength(2);

    // a key revoked mid-run, refused with no code that says so: the jobs refused stay pending for the mended key
    await seedModel(store, 'gpt-4o-mini', 10, 'later');
    fake.respond((r) => (r.body.includes('later') && !r.body.includes('later 0') ? reply.error(403, 'Forbidden') : undefined));
    const two = await runQueue({ store, provider: provider(fake) }, { ...fast, concurrency: 1 });
    expect(two.reason).toBe('fatal');
    expect(two.fatal?.reason).toBe('auth');
    expect(two.failed).toBe(0);
    expect((await store.status()).counts).toMatchObject({ done: 8, failed: 1, pending: 9, running: 0 });
    await store.close();
  });

  it('answers to requests sent before a key was revoked do not make its refusals look like one job each', async () => {
    const { fake, store } = await setup({ latencyMs: 1 });
    await seedJobs(store, 4);
    // the key works for the first request; the second, out before the key was revoked, is answered
    // slowly; every later one is refused
    fake.respond((r) => (r.index === 1 ? undefined : r.index === 2 ? reply.ok({ latencyMs: 300 }) : reply.error(403, 'Forbidden')));
    const summary = await runQueue(
      { store, provider: provider(fake) },
      { ...fast, concurrency: 2, retryDelayMs: 600, maxRetryDelayMs: 600 },
    );
    // that answer came between the refusals, and they were tried again after it: still the key, no job failed
    expect(summary).toMatchObject({ reason: 'fatal', done: 2, failed: 0 });
    expect((await store.status()).counts).toMatchObject({ done: 2, pending: 2, failed: 0 });
    await store.close();
  });

  it('a 401 invalid_api_key after the key has worked stops the run at once, no job failed', async () => {
    const { fake, store } = await setup({ latencyMs: 1 });
    await seedJobs(store, 6);
    let answered = 0;
    fake.respond(() => (answered++ < 2 ? undefined : reply.unauthorized()));
    const summary = await runQueue({ store, provider: provider(fake) }, { ...fast, concurrency: 1 });
    expect(summary).toMatchObject({ reason: 'fatal', done: 2, failed: 0 });
    // the first refusal stops it (one more may have gone out as it did): not three in a row
    expect(fake.received).toBeLessThanOrEqual(4);
    expect((await store.status()).counts).toMatchObject({ done: 2, pending: 4, failed: 0 });
    await store.close();
  });

  it("a provider saying its quota and wait only in a 429's body (Google's endpoint): paced at that quota from the first 429 on, remembered for the next run", async () => {
    // 600 a minute in 1-second windows, no header ever; a burst of 16 after the first answer meets
    // 429s whose QuotaFailure says 600 a minute. Read as a limit said, it paces the rest: without it,
    // the cuts of 429s taught nothing and the lane, at -c 16 with 1 ms answers, met 429s all along.
    const { fake, store } = await setup({ latencyMs: 1, rpm: 600, headers: 'google' });
    await seedModel(store, 'gemini-x', 60);
    const { summary } = await runTimingStarts(fake, store, { ...fast, concurrency: 16 });
    expect(summary).toMatchObject({ reason: 'drained', done: 60 });
    // remembered as a pace 429s taught (15 minutes): said only when refusing, a raised quota is never said to a run paced under it;
    // a loaded machine's jitter may cost a 429 after it, and the run end before the pace has climbed its last tenth back
    const [remembered, ...others] = await store.laneLimits();
    expect(others).toEqual([]);
    expect(remembered).toMatchObject({ source: '429s' });
    expect(remembered!.rpm).toBeGreaterThanOrEqual(540);
    expect(remembered!.rpm).toBeLessThanOrEqual(600);
    // the first burst's, and none after the pace was said (a loaded machine's jitter may cost a few)
    const firstBurst = fake.rateLimited;
    expect(firstBurst).toBeGreaterThan(0);
    expect(firstBurst).toBeLessThanOrEqual(16);
    // the next run starts at the pace remembered: no burst of 16 into a window of 10 (6 429s at least),
    // a loaded machine's jitter a 429 or two
    await seedModel(store, 'gemini-x', 30, 'again');
    await runTimingStarts(fake, store, { ...fast, concurrency: 16 });
    expect(fake.rateLimited - firstBurst).toBeLessThanOrEqual(3);
    await store.close();
  });

  it('429s without headers lower the pace below the cap', async () => {
    const { fake, store } = await setup({ latencyMs: 1, rpm: 600, headers: 'none' });
    await seedJobs(store, 60);
    let lanes: SchedulerEventMap['progress']['lanes'] = [];
    const summary = await runQueue(
      {
        store,
        provider: provider(fake),
        emit: (e, p) => {
          if (e === 'progress') lanes = (p as SchedulerEventMap['progress']).lanes;
        },
      },
      { ...fast, concurrency: 8, rpm: 1200 },
    );
    expect(summary).toMatchObject({ reason: 'drained', done: 60 });
    expect(summary.rateLimited).toBeGreaterThan(0);
    expect(lanes[0]!.rpm).toBeLessThan(1200);
    await store.close();
  });
});

describe('429s saying no limit from a provider whose answers say 600 rpm', () => {
  /** A run of `jobs` (at -c 8 unless said) against a fake enforcing `rpm` with OpenAI's headers, `refuse` deciding the headerless 429s. */
  async function runWith(rpm: number, jobs: number, refuse: (index: number, receivedAt: number) => boolean, concurrency = 8) {
    const { fake, store } = await setup({ latencyMs: 1, rpm });
    await seedJobs(store, jobs);
    fake.respond((r) => (refuse(r.index, r.receivedAt) ? reply.rateLimited(0) : undefined));
    const paced: number[] = [];
    const events: string[] = [];
    const summary = await runQueue(
      {
        store,
        provider: provider(fake),
        emit: (e, p) => {
          events.push(e);
          if (e === 'progress') paced.push((p as SchedulerEventMap['progress']).lanes[0]?.rpm ?? 0);
        },
      },
      { ...fast, concurrency, heartbeatMs: 100 },
    );
    // what status reads of the run afterwards
    const stored = (await store.status()).lastRun?.stats;
    await store.close();
    return { fake, summary, paced, events, stored };
  }

  it('now and then (an overloaded upstream): the pace stays at the limit said, no lane pause, each refused job tried again', async () => {
    const { fake, summary, paced, events, stored } = await runWith(600, 60, (index) => index % 20 === 19);
    // the three refused at random, and on a loaded machine perhaps one or two of the limit's (with its headers)
    expect(summary).toMatchObject({ reason: 'drained', done: 60, strayRateLimited: 3 });
    expect(stored).toMatchObject({ rateLimited: summary.rateLimited, strayRateLimited: 3 });
    expect(summary.rateLimited).toBeLessThanOrEqual(5);
    expect(fake.rateLimited).toBe(summary.rateLimited);
    // learned from the first answer's headers, never cut
    expect(paced.length).toBeGreaterThan(3);
    expect(paced.slice(1).every((rpm) => rpm === 600)).toBe(true);
    expect(events).not.toContain('paused');
  });

  it("on a cold lane's first request: the next goes alone too, no burst into the limit, and the pace headers say is kept", async () => {
    let first = true;
    const { fake, summary, paced } = await runWith(
      600,
      30,
      () => {
        const refuse = first;
        first = false;
        return refuse;
      },
      16,
    );
    expect(summary).toMatchObject({ reason: 'drained', done: 30 });
    // the whole concurrency at once into a window of 10 met 8 or more 429s more (a loaded machine's jitter may cost one or two)
    expect(fake.rateLimited).toBeLessThanOrEqual(3);
    expect(summary.strayRateLimited).toBe(0);
    expect(paced.at(-1)).toBe(600);
  });

  it('most of the time (a proxy allowing 20 a second in front): the pace is cut below what the headers say', async () => {
    const windows = new Map<number, number>();
    const proxy = (_index: number, at: number) => {
      const second = Math.floor(at / 1000);
      const n = windows.get(second) ?? 0;
      windows.set(second, n + 1);
      return n >= 20;
    };
    const { summary, paced } = await runWith(6000, 80, proxy);
    expect(summary).toMatchObject({ reason: 'drained', done: 80 });
    // the first few are taken for noise, until they are too many to be
    expect(summary.strayRateLimited).toBeLessThan(summary.rateLimited);
    expect(paced.at(-1)).toBeLessThan(6000);
  });
});

describe('EMFILE is local, not an outage', () => {
  it('lowers concurrency, says so once, and uses no attempts', async () => {
    const dir = tempDir();
    const fake = await startFake({ latencyMs: 300 });
    const db = join(dir, 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 120);
    await store.close();
    // 64 descriptors: node, its modules, SQLite and a few dozen sockets; 120 in flight cannot all open
    const child = spawn(
      'bash',
      [
        '-c',
        'ulimit -n 64 && exec "$0" "$@"',
        process.execPath,
        BIN,
        'run',
        '--db',
        db,
        '--base-url',
        fake.url,
        '--concurrency',
        '120',
        '--progress',
        'plain',
      ],
      { env: cliEnv({ LLMQ_API_KEY: 'sk-test' }), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const r = await collect(child, 60_000);
    expect(r.stderr).toMatch(/warning: Local limit: .*(EMFILE|too many open files).*concurrency lowered from 120 to \d+/i);
    expect(r.code).toBe(0);
    const check = new SqliteStore(db);
    const rows = await all(check.copier.dumpJobs());
    expect(rows.filter((x) => x.state === 'done')).toHaveLength(120);
    expect(rows.every((x) => x.attempts === 1)).toBe(true);
    await check.close();
  });
});
