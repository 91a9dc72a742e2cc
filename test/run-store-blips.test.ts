import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { MockProvider } from '../src/provider/mock.js';
import { runQueue } from '../src/scheduler/run-queue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { isTransientStoreError } from '../src/store/transient.js';
import { LlmqError } from '../src/errors.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { gatedProvider } from './helpers/gated-provider.js';

describe('a store that fails while requests are out', () => {
  it('an answer that comes while another process holds the SQLite file past the busy timeout is stored once the file is free', async () => {
    const path = join(tempDir(), 'q.db');
    const store = new SqliteStore(path);
    await seedJobs(store, 3);
    // a second and a half of another process's write (a long enqueue, a retry-failed) outlasts this busy timeout
    store.db.pragma('busy_timeout = 200');
    const { provider, sent, firstSent, release } = gatedProvider();
    const warnings: string[] = [];
    const emit = (event: string, data: unknown) => {
      if (event === 'warning') warnings.push((data as { message: string }).message);
    };
    const run = runQueue({ store, provider, emit: emit as never }, { concurrency: 1, retryDelayMs: 10 });
    await firstSent;
    const other = new Database(path);
    other.prepare('BEGIN IMMEDIATE').run();
    release();
    await new Promise((r) => setTimeout(r, 1500));
    // said while it waits (the progress stood still, and nothing said why), once however many calls wait
    expect(warnings).toEqual([
      expect.stringMatching(
        /^the queue's database is locked \(SQLITE_BUSY\): waiting for it, up to 30s, then the run stops \(what it holds kept\); a program holding/,
      ),
    ]);
    other.prepare('COMMIT').run();
    other.close();
    expect(await run).toMatchObject({ reason: 'drained', done: 3, failed: 0 });
    expect(warnings.slice(1)).toEqual(["the queue's database answers again."]);
    expect(sent).toHaveLength(3);
    expect((await store.status()).counts).toEqual({ pending: 0, running: 0, done: 3, failed: 0 });
    await store.close();
  });

  it('a claim that fails for good stops the run only once the request out is answered and its answer stored', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 6);
    const broken = new LlmqError('disk I/O error');
    let claims = 0;
    // a failure no retry helps (a disk error); nothing real raises one on cue
    const failing = new Proxy(store, {
      get(target, property) {
        const value = Reflect.get(target, property, target);
        if (property === 'claim')
          return (...args: Parameters<SqliteStore['claim']>) => (++claims === 1 ? target.claim(...args) : Promise.reject(broken));
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const { provider, firstSent, release } = gatedProvider();
    // -c 2: the first request is held at the provider; the others of the first claim are answered
    // (the lane's limit is known: no first request alone), and the claim after them fails while the
    // first is still out
    await store.saveLaneLimits({ baseUrl: 'mock', model: 'gpt-4o-mini', rpm: 6000, tpm: null, source: 'headers', at: Date.now() });
    const run = runQueue({ store: failing, provider }, { concurrency: 2, retryDelayMs: 10 });
    await firstSent;
    while (claims < 2) await new Promise((r) => setTimeout(r, 5));
    let settled = false;
    run.catch(() => {}).finally(() => (settled = true));
    // it waits for the request out: ending now would hand its job back while it may still be answered
    await new Promise((r) => setTimeout(r, 300));
    expect(settled).toBe(false);
    expect((await store.status()).counts.running).toBeGreaterThanOrEqual(1);
    release();
    await expect(run).rejects.toBe(broken);
    // the answer paid for is kept; nothing is left running, the rest pending
    const counts = (await store.status()).counts;
    expect(counts).toMatchObject({ running: 0, failed: 0 });
    expect(counts.done).toBeGreaterThanOrEqual(2);
    expect(counts.pending).toBe(6 - counts.done);
    expect((await store.item('doc-0'))!.job.state).toBe('done');
    await store.close();
  });

  it('a busy store while the run looks whether it is done is asked again: the run ends drained', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 3);
    let reclaims = 0;
    const busy = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
    // the look for dead runs' jobs, once the queue seems drained, meets another process's long write
    const flaky = new Proxy(store, {
      get(target, property) {
        const value = Reflect.get(target, property, target);
        if (property === 'reclaim') {
          return (...args: Parameters<SqliteStore['reclaim']>) => (++reclaims === 2 ? Promise.reject(busy) : target.reclaim(...args));
        }
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const summary = await runQueue({ store: flaky, provider: new MockProvider({ latencyMs: 1 }) }, { concurrency: 1, retryDelayMs: 10 });
    expect(summary).toMatchObject({ reason: 'drained', done: 3 });
    expect(reclaims).toBeGreaterThanOrEqual(3);
    await store.close();
  });

  it('every call the run makes to work the queue is asked again after a busy store: each failing once, the run still ends right', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 12);
    const busy = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
    // on a timer, or best effort: a failure there is not asked again (the next beat is the heartbeat's
    // retry); stoppedRuns is no call to the queue, only what a wait notice says of the lock's holder
    const notAskedAgain = new Set(['heartbeat', 'saveLaneLimits', 'laneLimits', 'stoppedRuns']);
    const failedOnce = new Set<string>();
    const flaky = new Proxy(store, {
      get(target, property) {
        const value = Reflect.get(target, property, target);
        if (typeof value !== 'function') return value;
        if (typeof property !== 'string' || notAskedAgain.has(property)) return value.bind(target);
        return (...args: unknown[]) => {
          if (failedOnce.has(property)) return value.apply(target, args);
          failedOnce.add(property);
          return Promise.reject(busy);
        };
      },
    });
    // half the tries fail (a server error), two tries a job: some jobs are retried, some fail for good
    const provider = new MockProvider({ latencyMs: 1, failureRate: 0.5, seed: 3 });
    const summary = await runQueue(
      { store: flaky, provider },
      {
        concurrency: 2,
        maxAttempts: 2,
        retryDelayMs: 1,
        maxRetryDelayMs: 5,
        outage: { consecutive: 1000, windowFailures: 1000 },
      },
    );
    expect(summary.reason).toBe('drained');
    const counts = (await store.status()).counts;
    expect(counts).toMatchObject({ pending: 0, running: 0 });
    expect(counts.done + counts.failed).toBe(12);
    expect(counts.failed).toBeGreaterThan(0);
    expect(summary).toMatchObject({ done: counts.done, failed: counts.failed });
    expect([...failedOnce].sort()).toEqual(
      expect.arrayContaining(['claim', 'complete', 'fail', 'finishRun', 'recordAttempt', 'startRetry', 'startRun', 'status']),
    );
    await store.close();
  });

  it('a claim that committed but whose reply was lost (a connection reset) is handed back with its attempt, and its jobs are still done by the run', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 6);
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    let claims = 0;
    // PostgreSQL's connection reset after the claim's COMMIT: the jobs are leased to the run, which
    // never heard of them and asks again; nothing real drops a reply on cue
    const lossy = new Proxy(store, {
      get(target, property) {
        const value = Reflect.get(target, property, target);
        if (property === 'claim')
          return async (...args: Parameters<SqliteStore['claim']>) => {
            const got = await target.claim(...args);
            if (++claims === 1) throw reset;
            return got;
          };
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const summary = await runQueue({ store: lossy, provider: new MockProvider({ latencyMs: 1 }) }, { concurrency: 2, retryDelayMs: 10 });
    // not ended "drained" with the lost claim's jobs held by nobody, nor their attempts spent unsent
    expect(summary).toMatchObject({ reason: 'drained', done: 6, failed: 0 });
    expect((await store.status()).counts).toEqual({ pending: 0, running: 0, done: 6, failed: 0 });
    for (let n = 0; n < 6; n++) expect((await store.item(`doc-${n}`))!.job.attempts).toBe(1);
    await store.close();
  });

  it('tells failures that pass from those that do not', () => {
    const coded = (code: string) => Object.assign(new Error(code), { code });
    for (const code of ['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_LOCKED', '57P03', '08001', '40001', 'ECONNREFUSED']) {
      expect(isTransientStoreError(coded(code)), code).toBe(true);
    }
    expect(isTransientStoreError(new LlmqError('wrapped', { cause: coded('SQLITE_BUSY') }))).toBe(true);
    for (const code of ['SQLITE_FULL', 'SQLITE_CORRUPT', 'SQLITE_IOERR', '23505', 'ENOSPC']) {
      expect(isTransientStoreError(coded(code)), code).toBe(false);
    }
    // a connection lost under a statement may have committed it: asked again, an answer would be stored twice
    for (const code of ['ECONNRESET', '08006', '57P01']) expect(isTransientStoreError(coded(code)), code).toBe(false);
    expect(isTransientStoreError(new Error('Connection terminated unexpectedly'))).toBe(false);
    expect(isTransientStoreError(new Error('boom'))).toBe(false);
  });
});
