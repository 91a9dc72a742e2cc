import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runQueue } from '../src/scheduler/run-queue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { gatedProvider } from './helpers/gated-provider.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { waitFor } from './helpers/wait.js';

/** The mock with its first request held until `release`, answering 64 KiB (each answer needs new pages). */
const bigAnswers = () => gatedProvider(1, { padding: 64 * 1024 });

/** SQLite's own size limit makes every write that needs a new page fail with SQLITE_FULL, as a full disk does. */
function fillDisk(store: SqliteStore): void {
  const pages = store.db.pragma('page_count', { simple: true }) as number;
  store.db.pragma(`max_page_count = ${pages}`);
}

describe('a full disk under a run', () => {
  it('keeps the answer in hand until space is freed, takes no new work meanwhile, then stores it: nothing sent twice', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 3);
    const warnings: string[] = [];
    const { provider, sent, firstSent, release } = bigAnswers();
    const run = runQueue(
      { store, provider, emit: (event, payload) => event === 'warning' && warnings.push((payload as { message: string }).message) },
      { concurrency: 1, retryDelayMs: 10 },
    );
    await firstSent;
    fillDisk(store);
    release();
    await waitFor(() => warnings.length > 0, { what: 'the run to say the disk is full' });
    expect(warnings[0]).toMatch(/^no space left for the queue's database \(SQLITE_FULL\): the run keeps the answers it holds/);
    // a second try (every 2 s) fails as the first did: still waiting, nothing more sent, nothing stored
    await new Promise((r) => setTimeout(r, 2500));
    expect(sent).toHaveLength(1);
    expect((await store.status()).counts).toMatchObject({ done: 0, failed: 0 });
    expect(warnings).toHaveLength(1);

    store.db.pragma('max_page_count = 1073741823');
    expect(await run).toMatchObject({ reason: 'drained', done: 3, failed: 0 });
    expect(new Set(sent).size).toBe(3);
    expect(sent).toHaveLength(3);
    expect(warnings[1]).toBe('space again: what the run held is stored, and it goes on.');
    expect((await store.status()).counts).toEqual({ pending: 0, running: 0, done: 3, failed: 0 });
    await store.close();
  }, 15_000);

  it('gives the answer up when the run is made to quit at once, and leaves its job to be sent again', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 2);
    const warnings: string[] = [];
    const { provider, firstSent, release } = bigAnswers();
    const quit = new AbortController();
    const run = runQueue(
      {
        store,
        provider,
        abortSignal: quit.signal,
        emit: (event, payload) => event === 'warning' && warnings.push((payload as { message: string }).message),
      },
      { concurrency: 1, retryDelayMs: 10 },
    );
    await firstSent;
    fillDisk(store);
    release();
    await waitFor(() => warnings.length > 0, { what: 'the run to say the disk is full' });
    quit.abort();
    const ended = await run.then(
      (summary) => ({ summary, error: null }),
      (error: unknown) => ({ summary: null, error }),
    );
    expect(ended.summary?.done ?? 0).toBe(0);
    expect(warnings).toHaveLength(1);
    store.db.pragma('max_page_count = 1073741823');
    const counts = (await store.status()).counts;
    expect(counts.done).toBe(0);
    expect(counts.pending + counts.running).toBe(2);
    await store.close();
  }, 15_000);
});

describe('a full disk under a claim', () => {
  /**
   * The store with its claims failing as on a full disk while `full()` says so. SQLite's
   * max_page_count fails only writes that add pages, and a claim changes rows in place: the
   * driver's error is raised here, with its code, where nothing real reaches the case.
   */
  function claimsOnFullDisk(store: SqliteStore, full: () => boolean): void {
    const claim = store.claim.bind(store);
    store.claim = async (o) => {
      if (full()) throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
      return claim(o);
    };
  }

  it('waits, sending nothing, and goes on once space is back', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 3);
    let full = true;
    claimsOnFullDisk(store, () => full);
    const warnings: string[] = [];
    const { provider, sent, release } = gatedProvider(0);
    release();
    const run = runQueue(
      { store, provider, emit: (event, payload) => event === 'warning' && warnings.push((payload as { message: string }).message) },
      { concurrency: 1 },
    );
    await waitFor(() => warnings.length > 0, { what: 'the run to say the disk is full' });
    expect(warnings[0]).toMatch(/^no space left for the queue's database \(SQLITE_FULL\)/);
    expect(sent).toHaveLength(0);
    full = false;
    expect(await run).toMatchObject({ reason: 'drained', done: 3 });
    expect(warnings[1]).toBe('space again: what the run held is stored, and it goes on.');
    await store.close();
  }, 15_000);

  it('a stop during the wait ends the run as stopped, not as a store error', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 3);
    claimsOnFullDisk(store, () => true);
    const warnings: string[] = [];
    const stop = new AbortController();
    const run = runQueue(
      {
        store,
        provider: gatedProvider(0).provider,
        stopSignal: stop.signal,
        emit: (event, payload) => event === 'warning' && warnings.push((payload as { message: string }).message),
      },
      { concurrency: 1 },
    );
    await waitFor(() => warnings.length > 0, { what: 'the run to say the disk is full' });
    stop.abort();
    expect(await run).toMatchObject({ reason: 'signal', done: 0 });
    expect((await store.status()).counts).toMatchObject({ pending: 3, running: 0 });
    await store.close();
  }, 15_000);
});
