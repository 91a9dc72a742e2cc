import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OpenAIProvider } from '../src/provider/openai.js';
import { runQueue, type RunDeps, type RunOptions } from '../src/scheduler/run-queue.js';
import { countsText, startText } from '../src/cli/progress/lines.js';
import type { ProgressSnapshot, SchedulerEventMap } from '../src/scheduler/events.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { NO_STATS, rows } from './helpers/stores.js';
import { requestFor, seedJobs } from './helpers/seed.js';
import { jobKey } from '../src/request.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';
import { reply, type FakeOpenAI } from './helpers/fake-openai.js';
import { localBoards } from '../src/scheduler/lanes.js';
import { MockProvider } from '../src/provider/mock.js';

/** A run of `store` against the fake, with its start and progress events; `atFirstJob` is called once, as its first job starts. */
async function watchedRun(
  store: SqliteStore,
  fake: FakeOpenAI,
  o: { deps?: Partial<RunDeps>; options: RunOptions; atFirstJob?: () => void },
) {
  let start: SchedulerEventMap['run:start'] | null = null;
  const progress: ProgressSnapshot[] = [];
  const warnings: string[] = [];
  let first = true;
  const summary = await runQueue(
    {
      store,
      provider: new OpenAIProvider({ baseUrl: fake.url, apiKey: 'sk-test', timeoutMs: 5000 }),
      ...o.deps,
      emit: (event, payload) => {
        if (event === 'run:start') start = payload as SchedulerEventMap['run:start'];
        if (event === 'job:start' && first) {
          first = false;
          o.atFirstJob?.();
        }
        if (event === 'progress') progress.push(payload as ProgressSnapshot);
        if (event === 'warning') warnings.push((payload as SchedulerEventMap['warning']).message);
      },
    },
    o.options,
  );
  await store.close();
  return { summary, start: start as SchedulerEventMap['run:start'] | null, progress, warnings };
}

/** Two runs at once on one queue of `jobs`, each with its own store, against one fake of 20 ms: each one's summary and progress. */
async function twoRuns(jobs: number, first: RunOptions, second: RunOptions = first) {
  const fake = await startFake({ latencyMs: 20 });
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  await seedJobs(store, jobs);
  const other = new SqliteStore(db);
  return Promise.all([watchedRun(store, fake, { options: first }), watchedRun(other, fake, { options: second })]);
}

// A run started right after another on this machine was killed: the killed run's jobs come back to
// it within seconds (its process is gone, its heartbeat still fresh). Its start said "nothing to do"
// and then answered them all; its progress never counted them.
describe("a run's count of what it has to do", () => {
  it('says the jobs a dying run on this host holds apart, and counts them once they come back to it', async () => {
    const fake = await startFake({ latencyMs: 5 });
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 6);
    const now = Date.now();
    // killed a moment ago: pid gone, heartbeat fresh, four jobs held with a long lease
    await store.startRun({ id: 'run-killed', host: 'h', pid: 4_190_101, startedAt: now, options: {} });
    await store.heartbeat('run-killed', now, now + 600_000, NO_STATS);
    expect((await store.claim({ owner: 'run-killed', limit: 4, now, leaseUntil: now + 600_000, maxAttempts: 5 })).jobs).toHaveLength(4);

    const { summary, start, progress } = await watchedRun(store, fake, {
      deps: { host: 'h', pid: 4_190_102, isAlive: (p) => p === 4_190_102 },
      options: { concurrency: 2, heartbeatMs: 100, progressMs: 20 },
    });
    expect(summary).toMatchObject({ reason: 'drained', done: 6 });
    // two pending to do, and the four of the dying run said apart: they may come back, or another run's may be among them
    expect(start).toMatchObject({ total: 2, dyingMayHold: 4 });
    expect(startText(start!, { db: 'q.db', provider: null })).toMatch(
      /^run \w{8} on q\.db: 2 jobs to do; up to 4 more held by a run that stopped on this machine, back within seconds$/,
    );
    // every progress snapshot counted at least what it had done
    expect(progress.length).toBeGreaterThan(0);
    for (const p of progress) expect(p.total).toBeGreaterThanOrEqual(p.done + p.failed);
    // and the four it waited for, from the start: its bar stood at 2/2 100% for seconds, then went back to 2/6
    const waiting = progress.filter((p) => p.done === 2);
    expect(waiting.length).toBeGreaterThan(0);
    for (const p of progress) expect(p.total).toBe(6);
  }, 20_000);

  it('says how many of its jobs it took back from a run known dead as it started (they count in its total)', async () => {
    const fake = await startFake({ latencyMs: 5 });
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 6);
    // killed a while ago: pid gone, heartbeat quiet, four jobs held with a long lease
    const then = Date.now() - 60_000;
    await store.startRun({ id: 'run-killed', host: 'h', pid: 4_190_101, startedAt: then, options: {} });
    await store.heartbeat('run-killed', then, then + 600_000, NO_STATS);
    expect((await store.claim({ owner: 'run-killed', limit: 4, now: then, leaseUntil: then + 600_000, maxAttempts: 5 })).jobs).toHaveLength(
      4,
    );

    const { summary, start } = await watchedRun(store, fake, {
      deps: { host: 'h', pid: 4_190_102, isAlive: (p) => p === 4_190_102 },
      options: { concurrency: 2, heartbeatMs: 100, progressMs: 20 },
    });
    expect(summary).toMatchObject({ reason: 'drained', done: 6 });
    expect(start).toMatchObject({ total: 6, takenBack: 4, dyingMayHold: 0 });
    expect(startText(start!, { db: 'q.db', provider: null })).toMatch(
      /^run \w{8} on q\.db: 6 jobs to do, 4 taken back from a run that stopped$/,
    );
  }, 20_000);

  it('counts the jobs found out of attempts beside --limit: they take none of it', async () => {
    const fake = await startFake({ latencyMs: 100 });
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    const keys = await seedJobs(store, 4);
    // three used every attempt before (a crash loop): a claim fails them, and they are no part of the limit
    store.db.prepare(`UPDATE jobs SET attempts = 5 WHERE key IN (?, ?, ?)`).run(keys[0], keys[1], keys[2]);
    const { summary, progress } = await watchedRun(store, fake, {
      options: { concurrency: 2, heartbeatMs: 100, progressMs: 10, limit: 3, maxAttempts: 5 },
    });
    expect(summary).toMatchObject({ done: 1, failed: 3 });
    for (const p of progress) expect(p.total, `${p.done} done, ${p.failed} failed`).toBeGreaterThanOrEqual(p.done + p.failed);
    // never 3 of 3 while the fourth was still out
    expect(progress.some((p) => p.failed === 3 && p.done === 0 && p.total === 3)).toBe(false);
  }, 20_000);

  it('grows with jobs enqueued while it works: a progress line never shows more done than to do', async () => {
    const fake = await startFake({ latencyMs: 50 });
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await store.enqueue(rows(2, { prefix: 'first' }), Date.now());
    const { summary, progress } = await watchedRun(store, fake, {
      options: { concurrency: 1, heartbeatMs: 100, progressMs: 10 },
      atFirstJob: () => void store.enqueue(rows(4, { prefix: 'later' }), Date.now()),
    });
    expect(summary).toMatchObject({ reason: 'drained', done: 6 });
    expect(progress.some((p) => p.done > 2)).toBe(true);
    for (const p of progress) expect(p.total, `${p.done} done`).toBeGreaterThanOrEqual(p.done + p.failed);
  }, 20_000);

  it('counts the jobs enqueued while it works from its next heartbeat, not only as it claims them', async () => {
    // a changed prompt enqueued mid-run: the bar stood at 99%, ETA 1s, for the half minute the new jobs took
    const fake = await startFake({ latencyMs: 50 });
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await store.enqueue(rows(2, { prefix: 'first' }), Date.now());
    const { summary, progress } = await watchedRun(store, fake, {
      options: { concurrency: 1, heartbeatMs: 100, progressMs: 10 },
      atFirstJob: () => void store.enqueue(rows(40, { prefix: 'later' }), Date.now()),
    });
    expect(summary).toMatchObject({ reason: 'drained', done: 42 });
    const early = progress.find((p) => p.total === 42);
    expect(early?.done, 'the total when it first counted all 42').toBeLessThan(10);
  }, 20_000);

  it('leaves out the jobs of a lane closed for the day: its total comes down once, and stays down', async () => {
    // the pending jobs of a model whose quota per day is spent are never this run's: each beat raised
    // the total by them again, each short claim brought it down (36, 37, 7, 37, 7...)
    const spentForTheDay = {
      error: {
        code: 429,
        message: 'You exceeded your current quota.',
        status: 'RESOURCE_EXHAUSTED',
        details: [
          {
            '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
            violations: [{ quotaId: 'GenerateRequestsPerDayPerProjectPerModel', quotaValue: '20' }],
          },
        ],
      },
    };
    const fake = await startFake({ latencyMs: 5 });
    fake.respond((r) => (r.json?.model === 'gemini-pro' ? reply.raw(429, spentForTheDay) : reply.ok({ latencyMs: 400 })));
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 30, { model: 'gemini-pro' });
    const flash = Array.from({ length: 6 }, (_, n) => {
      const request = requestFor(n, { model: 'gemini-flash' });
      return { itemId: `flash-${n}`, source: 'seed', meta: null, key: jobKey(request), request, model: 'gemini-flash', priority: 0 };
    });
    await store.enqueue(flash, Date.now());
    const { summary, progress } = await watchedRun(store, fake, { options: { concurrency: 2, heartbeatMs: 100, progressMs: 20 } });
    expect(summary).toMatchObject({ done: 6 });
    const down = progress.findIndex((p) => p.total < 20);
    expect(down, 'the total came down once the lane closed').toBeGreaterThan(-1);
    expect(
      progress
        .slice(down)
        .map((p) => p.total)
        .filter((t) => t >= 20),
    ).toEqual([]);
  }, 20_000);

  it('comes down to what it holds when runs sharing the queue took the rest', async () => {
    const fake = await startFake({ latencyMs: 5 });
    // the first request fails once: its job waits 1.5 s to be tried again while the queue has nothing left
    fake.respond((q) => (q.index === 1 ? reply.serverError() : undefined));
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await store.enqueue(rows(10, { prefix: 'doc' }), Date.now());
    const { summary, progress } = await watchedRun(store, fake, {
      options: { concurrency: 1, heartbeatMs: 100, progressMs: 20, retryDelayMs: 1500, maxRetryDelayMs: 1500 },
      // another run on the queue takes six as this one starts
      atFirstJob: () =>
        void store.claim({ owner: 'run-other', limit: 6, now: Date.now(), leaseUntil: Date.now() + 600_000, maxAttempts: 5 }),
    });
    expect(summary).toMatchObject({ reason: 'drained', done: 4 });
    // while it waited on its retry, three done: three of four, not of the ten counted at the start
    const waiting = progress.filter((p) => p.done === 3 && p.backingOff === 1);
    expect(waiting.length).toBeGreaterThan(0);
    for (const p of waiting) expect(p.total).toBe(4);
  }, 20_000);
  it("shows the queue's progress while another run works it too: every run's jobs finished and left, their pace together", async () => {
    const runs = await twoRuns(240, { concurrency: 2, heartbeatMs: 100, progressMs: 20 });
    expect(runs[0].summary.done + runs[1].summary.done).toBe(240);
    for (const { progress } of runs) {
      const shared = progress.filter((p) => p.shared !== null);
      expect(shared.length).toBeGreaterThan(0);
      // finished and left make the jobs the queue had to do as this run started, whichever read
      const sums = new Set(shared.map((p) => p.shared!.finished + p.shared!.left));
      expect(sums.size).toBe(1);
      expect([...sums][0]).toBeGreaterThan(200);
      expect([...sums][0]).toBeLessThanOrEqual(240);
      // two, or this one alone once the other ended (the bar stays the queue's)
      expect(shared.some((p) => p.shared!.runs === 2)).toBe(true);
      for (const p of shared) {
        expect([1, 2]).toContain(p.shared!.runs);
        expect(p.shared!.finished).toBeGreaterThanOrEqual(p.done + p.failed);
        // the pace of both runs: this one's and the other's, as its last heartbeat said (none at first)
        expect(p.shared!.jobsPerSecond).toBeGreaterThanOrEqual(p.jobsPerSecond);
        if (p.etaSeconds !== null && p.shared!.left > 0) expect(p.etaSeconds).toBeCloseTo(p.shared!.left / p.shared!.jobsPerSecond, 5);
      }
      expect(shared.some((p) => p.shared!.jobsPerSecond > p.jobsPerSecond)).toBe(true);
      // past half of the queue, while this run had done at most about half of it itself
      expect(shared.some((p) => p.shared!.finished > 120 && p.done <= 130)).toBe(true);
      // the last line, read afresh as the run ends: at most what the other run still held (twice its concurrency) is left
      expect(progress.at(-1)!.shared!.left).toBeLessThanOrEqual(4);
      const last = shared.filter((p) => p.shared!.runs === 2).at(-1)!;
      expect(countsText(last, last.total)).toMatch(new RegExp(`^${last.shared!.finished}/${[...sums][0]} [\\d.]+% · 2 runs · `));
    }
  }, 30_000);

  it('stays its own for a run with --limit beside another run: its work is its limit', async () => {
    const options = { concurrency: 2, heartbeatMs: 100, progressMs: 20 };
    const [limited, whole] = await twoRuns(120, { ...options, limit: 40 }, options);
    expect(limited.summary).toMatchObject({ reason: 'limit', done: 40 });
    expect(limited.progress.every((p) => p.shared === null)).toBe(true);
    expect(limited.progress.at(-1)).toMatchObject({ total: 40, done: 40 });
    // the other saw it, and stays the queue's once it ended
    expect(whole.progress.some((p) => p.shared?.runs === 2)).toBe(true);
    expect(whole.progress.at(-1)!.shared).toMatchObject({ runs: 1, left: 0 });
  }, 30_000);

  it('ends on the queue as it is, read afresh, not on a read a heartbeat old carried forward', async () => {
    // heartbeats at 0.5 and 1 s, then none before both end: the last read is a second or more old
    const runs = await twoRuns(300, { concurrency: 2, heartbeatMs: 60_000, progressMs: 20 });
    const last = runs.map((r) => r.progress.at(-1)!.shared!);
    // the run that ended second saw the queue done
    const later = last.find((s) => s.left === 0);
    expect(later).toBeDefined();
    for (const s of last) expect(s.left).toBeLessThanOrEqual(4);
  }, 30_000);
  it("shows this run's own progress while the queue's counts cannot be read, never a stale read carried on", async () => {
    const fake = await startFake({ latencyMs: 20 });
    const db = join(tempDir(), 'q.db');
    const seeded = new SqliteStore(db);
    await seedJobs(seeded, 300);
    const options = { concurrency: 2, heartbeatMs: 100, progressMs: 20 };
    let started!: () => void;
    const othersStarted = new Promise<void>((resolve) => (started = resolve));
    const healthy = watchedRun(seeded, fake, { options, atFirstJob: () => started() });
    await othersStarted;
    // this run sees the other at its start; every later read of the counts fails
    const broken = new SqliteStore(db);
    let failedAt: number | null = null;
    broken.stateCounts = () => {
      failedAt ??= Date.now();
      return Promise.reject(new Error('counts unreadable'));
    };
    const mine = await watchedRun(broken, fake, { options });
    await healthy;
    expect(mine.summary.reason).toBe('drained');
    expect(mine.progress.some((p) => p.shared !== null)).toBe(true);
    // from the first failed read on, its own count (the last, read as the run ends, aside)
    expect(failedAt).not.toBeNull();
    const afterFirstBeat = mine.progress.slice(0, -1).filter((p) => p.now > failedAt! + 20);
    expect(afterFirstBeat.length).toBeGreaterThan(0);
    for (const p of afterFirstBeat) expect(p.shared).toBeNull();
  }, 30_000);
});

describe('runs side by side with no pace between them', () => {
  /** Two runs at once on one queue of 160 against one fake of 20 ms, each with these deps. */
  async function side(deps: (n: number) => Partial<RunDeps>) {
    const fake = await startFake({ latencyMs: 20 });
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 160);
    const options = { concurrency: 2, heartbeatMs: 100, progressMs: 50 };
    return Promise.all([
      watchedRun(store, fake, { deps: deps(1), options }),
      watchedRun(new SqliteStore(db), fake, { deps: deps(2), options }),
    ]);
  }

  it('each paces at the whole limit: said once, with what to do', async () => {
    const runs = await side(() => ({}));
    for (const r of runs) expect(r.summary.reason).toBe('drained');
    const said = runs.flatMap((r) => r.warnings);
    expect(said.length).toBeGreaterThanOrEqual(1);
    for (const r of runs) expect(r.warnings.length).toBeLessThanOrEqual(1);
    expect(said[0]).toBe(
      "2 runs work this queue and share no pace (--redis): each paces at the provider's whole rate limit, " +
        'so with one API key they go over it together and meet 429s. For one pace between them, start each with the same --redis URL.',
    );
  });

  it('sharing one (--redis), or on the offline mock, nothing is said', async () => {
    const shared = await side(() => ({ boards: localBoards(Date.now), describe: { sharedPace: true } }));
    expect(shared.flatMap((r) => r.warnings)).toEqual([]);
    // one of them shares no pace: said
    const one = await side((n) => (n === 1 ? { boards: localBoards(Date.now), describe: { sharedPace: true } } : {}));
    expect(one.flatMap((r) => r.warnings).length).toBeGreaterThanOrEqual(1);
    const mock = await side(() => ({ provider: new MockProvider({ latencyMs: 20 }) }));
    for (const r of mock) expect(r.summary.reason).toBe('drained');
    expect(mock.flatMap((r) => r.warnings)).toEqual([]);
  });
});
