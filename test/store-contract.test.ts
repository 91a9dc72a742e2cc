import { beforeEach, describe, expect, it } from 'vitest';
import { STORE_KINDS, T0, OWNER, NO_STATS, claimOpts, row, rows, skipUnavailable, exported } from './helpers/stores.js';
import { UNSENT_DEATHS_FORGIVEN } from '../src/store/unsent.js';
import type { Store } from '../src/store/types.js';

/** Answer a job this test's run claimed, as a run would: paid for, stored. */
function answer(store: Store, key: string): Promise<boolean> {
  return store.complete(key, {
    owner: OWNER,
    output: 'paid for',
    response: '{}',
    usage: { promptTokens: 1, completionTokens: 1 },
    attempt: { key, runId: OWNER, attempt: 1, startedAt: T0, endedAt: T0 + 1, status: 200, outcome: 'done', error: null, usage: null },
  });
}

/** What status counts of the jobs: by state and in all over the jobs items need, and the answers no item needs. */
async function jobCounts(store: Store) {
  const s = await store.status();
  return { counts: s.counts, total: s.total, orphanedAnswers: s.orphanedAnswers };
}

// The store half of the invariants in docs/architecture.md, proved for every store kind by one suite.
// This file: enqueue (invariant 4) and claim (invariants 2 and 6). Lifecycle and reading have their own files.
describe.each(STORE_KINDS)('store contract: enqueue and claim [$name]', (kind) => {
  beforeEach((ctx) => skipUnavailable(kind, ctx));

  describe('enqueue', () => {
    it('is idempotent: the same rows twice create no new job and no new item', async () => {
      const { store } = await kind.fresh();
      const batch = rows(5);
      expect(await store.enqueue(batch, T0)).toEqual({
        newJobs: 5,
        newItems: 5,
        movedItems: 0,
        unchanged: 0,
        droppedJobs: 0,
        orphanedAnswers: 0,
        reprioritized: 0,
      });
      expect(await store.enqueue(batch, T0 + 1)).toEqual({
        newJobs: 0,
        newItems: 0,
        movedItems: 0,
        unchanged: 5,
        droppedJobs: 0,
        orphanedAnswers: 0,
        reprioritized: 0,
      });
      const s = await store.status();
      expect(s.total).toBe(5);
      expect(s.items).toBe(5);
    });

    it('moves the item of a changed document to the new job and drops the old one, never sent', async () => {
      const { store } = await kind.fresh();
      await store.enqueue([row('a', 'first text'), row('b', 'other')], T0);
      const changed = row('a', 'second text', { meta: { tag: 'v2' }, source: 'moved/a.txt' });
      expect(await store.enqueue([changed], T0 + 1)).toEqual({
        newJobs: 1,
        newItems: 0,
        movedItems: 1,
        unchanged: 0,
        droppedJobs: 1,
        orphanedAnswers: 0,
        reprioritized: 0,
        // a.txt then moved/a.txt: said, in case these are two documents under one id
        fromAnotherFile: { count: 1, first: { id: 'a', was: 'a.txt', now: 'moved/a.txt' } },
        // the requests before and after, the old read before it was dropped: the enqueue says what changed
        firstMoved: { id: 'a', was: row('a', 'first text').request, now: changed.request },
      });
      const a = await store.item('a');
      expect(a!.job.key).toBe(changed.key);
      expect(a!.source).toBe('moved/a.txt');
      expect(a!.meta).toEqual({ tag: 'v2' });
      const s = await store.status();
      expect(s.total).toBe(2);
      expect(s.items).toBe(2);
      // the old request is never claimed: only the two live jobs come out
      const claimed = await store.claim(claimOpts({ limit: 10 }));
      expect(claimed.jobs.map((j) => j.key).sort()).toEqual([changed.key, row('b', 'other').key].sort());
    });

    it('says which item moved first and the requests of the job it left and the one it has now', async () => {
      const { store } = await kind.fresh();
      await store.enqueue([row('a', 'first'), row('b', 'same')], T0);
      // behind a new item and an unchanged one: the first moved is a, third in the batch
      const r = await store.enqueue([row('n', 'new'), row('b', 'same'), row('a', 'second'), row('c', 'also new')], T0 + 1);
      expect(r.firstMoved).toEqual({ id: 'a', was: row('a', 'first').request, now: row('a', 'second').request });
      expect((await store.enqueue([row('a', 'second')], T0 + 2)).firstMoved ?? null).toBeNull(); // nothing moved
    });

    it('names the items whose document now comes from another file, not a JSONL line that moved within its file', async () => {
      const { store } = await kind.fresh();
      await store.enqueue(
        [row('r', 'english', { source: 'en/r.md' }), row('j', 'v1', { source: 'data.jsonl:3' }), row('k', 'v1 k', { source: 'x/k.md' })],
        T0,
      );
      const again = [
        row('r', 'french', { source: 'fr/r.md' }),
        row('j', 'v2', { source: 'data.jsonl:4' }),
        row('k', 'v2 k', { source: 'y/k.md' }),
      ];
      const result = await store.enqueue(again, T0 + 1);
      expect(result.movedItems).toBe(3);
      expect(result.fromAnotherFile).toEqual({ count: 2, first: { id: 'r', was: 'en/r.md', now: 'fr/r.md' } });
      const within = await store.enqueue([row('j', 'v3', { source: 'data.jsonl:9' })], T0 + 2);
      expect(within.movedItems).toBe(1);
      expect(within.fromAnotherFile ?? null).toBeNull();
    });

    it('names the items whose document, unchanged, now comes from another file (a folder renamed or copied), not a line moved within its file', async () => {
      const { store } = await kind.fresh();
      await store.enqueue(
        [
          row('r', 'text r', { source: 'in/r.md' }),
          row('j', 'text j', { source: 'data.jsonl:3' }),
          row('k', 'text k', { source: 'in/k.md' }),
        ],
        T0,
      );
      const copied = await store.enqueue(
        [
          row('r', 'text r', { source: 'copy/r.md' }),
          row('j', 'text j', { source: 'data.jsonl:4' }),
          row('k', 'text k', { source: 'copy/k.md' }),
        ],
        T0 + 1,
      );
      expect(copied).toMatchObject({ unchanged: 3, movedItems: 0, newJobs: 0 });
      expect(copied.sourceRenamed).toEqual({ count: 2, first: { id: 'r', was: 'in/r.md', now: 'copy/r.md' } });
      expect(copied.fromAnotherFile ?? null).toBeNull();
      expect((await store.item('r'))!.source).toBe('copy/r.md');
      // from a third place (PostgreSQL reads a batch of unchanged rows apart first this time: the other statement)
      const again = await store.enqueue([row('r', 'text r', { source: 'third/r.md' })], T0 + 2);
      expect(again.sourceRenamed).toEqual({ count: 1, first: { id: 'r', was: 'copy/r.md', now: 'third/r.md' } });
      // from the same place again: nothing to say
      expect((await store.enqueue([row('r', 'text r', { source: 'third/r.md' })], T0 + 3)).sourceRenamed ?? null).toBeNull();
    });

    it('keeps an old job that is done, or still needed by another item', async () => {
      const { store } = await kind.fresh();
      await store.enqueue([row('a', 'shared'), row('b', 'shared'), row('c', 'answered')], T0);
      const { jobs } = await store.claim(claimOpts({ limit: 10 }));
      const answered = jobs.find((j) => j.key === row('c', 'answered').key)!;
      await answer(store, answered.key);
      await store.release(OWNER, { refund: true, now: T0 + 2 });
      const r = await store.enqueue([row('a', 'changed'), row('c', 'changed too')], T0 + 3);
      // c's answer stays in the queue, but no item points at it now: said, as c will be sent again
      expect(r).toEqual({
        newJobs: 2,
        newItems: 0,
        movedItems: 2,
        unchanged: 0,
        droppedJobs: 0,
        orphanedAnswers: 1,
        reprioritized: 0,
        firstMoved: { id: 'a', was: row('a', 'shared').request, now: row('a', 'changed').request },
      });
      const s = await store.status();
      // the jobs items need: shared (still b's) and the two new ones; the kept answer is counted apart
      expect({ total: s.total, done: s.counts.done, orphanedAnswers: s.orphanedAnswers }).toEqual({
        total: 3,
        done: 0,
        orphanedAnswers: 1,
      });
      // c's old text again: its item points at the answered job, needed and done once more, nothing sent
      expect(await store.enqueue([row('c', 'answered')], T0 + 4)).toMatchObject({ newJobs: 0, movedItems: 1 });
      const again = await store.status();
      expect({ done: again.counts.done, orphanedAnswers: again.orphanedAnswers }).toEqual({ done: 1, orphanedAnswers: 0 });
    });

    it('takes an answer back when an item returns to it later in a batch that names the item twice', async () => {
      const { store } = await kind.fresh();
      await store.enqueue([row('a', 'first')], T0);
      const { jobs } = await store.claim(claimOpts({ limit: 1 }));
      await answer(store, jobs[0]!.key);
      expect(await store.enqueue([row('a', 'second')], T0 + 1)).toMatchObject({ orphanedAnswers: 1 });
      expect((await store.status()).orphanedAnswers).toBe(1);
      // a third text, then the first again, in one batch: the item ends where its answer is
      expect(await store.enqueue([row('a', 'third'), row('a', 'first')], T0 + 2)).toMatchObject({ orphanedAnswers: 0 });
      expect(await jobCounts(store)).toEqual({ counts: { pending: 0, running: 0, done: 1, failed: 0 }, total: 1, orphanedAnswers: 0 });
    });

    it('counts a job being answered when its item moved away as an orphaned answer once answered', async () => {
      const { store } = await kind.fresh();
      await store.enqueue([row('a', 'one'), row('b', 'two')], T0);
      const { jobs } = await store.claim(claimOpts({ limit: 10 }));
      expect(await store.enqueue([row('a', 'one, edited')], T0 + 1)).toMatchObject({ orphanedAnswers: 1 });
      // still out: running, as requests the provider may yet answer
      expect((await store.status()).counts).toMatchObject({ running: 2, pending: 1, done: 0 });
      for (const job of jobs) await answer(store, job.key);
      expect(await jobCounts(store)).toEqual({ counts: { pending: 1, running: 0, done: 1, failed: 0 }, total: 2, orphanedAnswers: 1 });
    });

    it('counts an answered or running job as orphaned only if no item points at it once the batch is in', async () => {
      const { store } = await kind.fresh();
      await store.enqueue([row('a', 'one'), row('b', 'two'), row('c', 'three')], T0);
      const { jobs } = await store.claim(claimOpts({ limit: 10 }));
      for (const job of jobs.filter((j) => j.key !== row('c', 'three').key)) await answer(store, job.key);
      // a and b swap texts: each answer is still some item's, nothing will be sent again
      expect(await store.enqueue([row('a', 'two'), row('b', 'one')], T0 + 2)).toMatchObject({
        newJobs: 0,
        movedItems: 2,
        orphanedAnswers: 0,
        reprioritized: 0,
      });
      // c's job is running (claimed, not answered yet): its answer is on its way to a job no item needs
      expect(await store.enqueue([row('c', 'three, edited')], T0 + 3)).toMatchObject({ newJobs: 1, movedItems: 1, orphanedAnswers: 1 });
    });

    it('lets identical requests share one job', async () => {
      const { store } = await kind.fresh();
      const result = await store.enqueue([row('a', 'same'), row('b', 'same'), row('c', 'different')], T0);
      expect(result).toEqual({
        newJobs: 2,
        newItems: 3,
        movedItems: 0,
        unchanged: 0,
        droppedJobs: 0,
        orphanedAnswers: 0,
        reprioritized: 0,
      });
      expect((await store.item('a'))!.job.key).toBe((await store.item('b'))!.job.key);
      const out = await exported(store);
      expect(out.map((r) => r.id)).toEqual(['a', 'b', 'c']);
    });

    it('treats an item repeated within one batch like two enqueues in a row', async () => {
      const { store } = await kind.fresh();
      const result = await store.enqueue([row('a', 'one'), row('a', 'one'), row('a', 'two'), row('b', 'x')], T0);
      expect(result).toEqual({
        newJobs: 3,
        newItems: 2,
        movedItems: 1,
        unchanged: 1,
        droppedJobs: 1,
        orphanedAnswers: 0,
        reprioritized: 0,
        // the job it left was made by this batch, and dropped by it: its request is still read
        firstMoved: { id: 'a', was: row('a', 'one').request, now: row('a', 'two').request },
      });
      expect((await store.item('a'))!.job.key).toBe(row('a', 'two').key);
    });

    it('stores meta, source, model and priority as given', async () => {
      const { store } = await kind.fresh();
      await store.enqueue([row('a', 't', { meta: { n: 1, s: 'é"\\' }, priority: 7, model: 'm2', source: 'in.jsonl:3' })], T0);
      const a = (await store.item('a'))!;
      expect(a).toMatchObject({ id: 'a', source: 'in.jsonl:3', meta: { n: 1, s: 'é"\\' } });
      expect(a.job).toMatchObject({ model: 'm2', priority: 7, state: 'pending', attempts: 0, createdAt: T0, updatedAt: T0 });
      expect(a.job.request).toBe(row('a', 't', { model: 'm2' }).request);
    });

    it('with setsPriority, waiting and failed jobs that exist take the priority asked for; a started one keeps its own', async () => {
      const { store } = await kind.fresh();
      await store.enqueue([row('f', 'six', { priority: 1 })], T0);
      await store.enqueue([row('a', 'one', { priority: 5 }), row('b', 'two', { priority: 5 }), row('c', 'three', { priority: 5 })], T0);
      // f fails (retry-failed would send it again at its priority); a is taken by a run: it is not waiting any more
      const [f] = (await store.claim(claimOpts({ limit: 1 }))).jobs;
      await store.fail(f!.key, OWNER, 'HTTP 400', null, T0);
      const [a] = (await store.claim(claimOpts({ limit: 1 }))).jobs;
      expect([f!.key, a!.key]).toEqual([row('f', 'six').key, row('a', 'one').key]);
      const urgent = (id: string, text: string) => ({ ...row(id, text, { priority: -10 }), setsPriority: true });
      // a job already queued under another item (d shares b's request) takes it too
      const again = await store.enqueue(
        [urgent('a', 'one'), urgent('d', 'two'), urgent('c', 'three'), urgent('e', 'five'), urgent('f', 'six')],
        T0 + 1,
      );
      expect(again).toMatchObject({ newJobs: 1, newItems: 2, unchanged: 3, reprioritized: 3 });
      const priorities = async () =>
        Object.fromEntries(await Promise.all(['a', 'b', 'c', 'e', 'f'].map(async (id) => [id, (await store.item(id))!.job.priority])));
      expect(await priorities()).toEqual({ a: 5, b: -10, c: -10, e: -10, f: -10 });
      // the same rows without setsPriority (the default of --priority) leave every job as it is
      const plain = await store.enqueue([row('c', 'three', { priority: 0 }), row('f', 'six', { priority: 0 })], T0 + 2);
      expect(plain.reprioritized).toBe(0);
      expect(await priorities()).toEqual({ a: 5, b: -10, c: -10, e: -10, f: -10 });
      // and a claim now takes the urgent ones first
      const next = await store.claim(claimOpts({ limit: 1, now: T0 + 3 }));
      expect(next.jobs[0]!.priority).toBe(-10);
    });

    it('with setsPriority, a job that items outside the call need too only moves forward; refused rows change nothing', async () => {
      const { store } = await kind.fresh();
      const asked = (r: ReturnType<typeof row>) => ({ ...r, setsPriority: true });
      // u's job is urgent; b shares it, from another input at a low priority: the job stays urgent
      await store.enqueue([asked(row('u', 'shared', { priority: -10 }))], T0);
      const low = await store.enqueue([asked(row('b', 'shared', { priority: 10 }))], T0 + 1);
      expect(low.reprioritized).toBe(0);
      expect((await store.item('u'))!.job.priority).toBe(-10);
      // forward it goes, whoever asks
      expect((await store.enqueue([asked(row('b', 'shared', { priority: -20 }))], T0 + 2)).reprioritized).toBe(1);
      expect((await store.item('u'))!.job.priority).toBe(-20);
      // and back only when every item of the job is among the rows asking
      const both = await store.enqueue([asked(row('u', 'shared', { priority: 5 })), asked(row('b', 'shared', { priority: 5 }))], T0 + 3);
      expect(both.reprioritized).toBe(1);
      expect((await store.item('u'))!.job.priority).toBe(5);
      // stream lines whose numbers now hold other documents are refused (kept): their jobs keep their priority
      const line = (id: string, text: string, priority: number) => ({ ...row(id, text, { priority, source: id }), positional: true });
      await store.enqueue([line('-:1', 'alpha', 5), line('-:2', 'beta', 5)], T0 + 4);
      const shifted = await store.enqueue([asked(line('-:1', 'beta', -10)), asked(line('-:2', 'alpha', -10))], T0 + 5);
      expect(shifted).toMatchObject({ reprioritized: 0, keptItems: ['-:1', '-:2'] });
      expect([(await store.item('-:1'))!.job.priority, (await store.item('-:2'))!.job.priority]).toEqual([5, 5]);
    });

    it('accepts an empty batch', async () => {
      const { store } = await kind.fresh();
      expect(await store.enqueue([], T0)).toEqual({
        newJobs: 0,
        newItems: 0,
        movedItems: 0,
        unchanged: 0,
        droppedJobs: 0,
        orphanedAnswers: 0,
        reprioritized: 0,
      });
    });
  });

  describe('claim', () => {
    it('takes jobs by priority, then FIFO, in batches never beyond the limit', async () => {
      const { store } = await kind.fresh();
      await store.enqueue(rows(4, { prefix: 'low', priority: 5 }), T0);
      await store.enqueue(rows(3, { prefix: 'high', priority: -1 }), T0);
      await store.enqueue(rows(3, { prefix: 'mid', priority: 0 }), T0);
      const order: string[] = [];
      for (;;) {
        const { jobs } = await store.claim(claimOpts({ limit: 4 }));
        expect(jobs.length).toBeLessThanOrEqual(4);
        if (!jobs.length) break;
        for (const j of jobs) order.push(JSON.parse(j.request).messages[0].content);
      }
      expect(order).toEqual([
        'high text 0',
        'high text 1',
        'high text 2',
        'mid text 0',
        'mid text 1',
        'mid text 2',
        'low text 0',
        'low text 1',
        'low text 2',
        'low text 3',
      ]);
    });

    it("skipping full lanes, takes the other models' jobs by priority, then FIFO, and still fails used-up ones", async () => {
      const { store } = await kind.fresh();
      // the full lane's jobs come first in the queue: the claim must look past them
      await store.enqueue(
        Array.from({ length: 5 }, (_, i) => row(`full-${i}`, `full ${i}`, { model: 'full' })),
        T0,
      );
      await store.enqueue(
        [
          row('b-0', 'b 0', { model: 'b' }),
          row('c-0', 'c 0', { model: 'c', priority: -1 }),
          row('b-1', 'b 1', { model: 'b' }),
          row('c-1', 'c 1', { model: 'c', priority: 3 }),
          row('b-2', 'b 2', { model: 'b', priority: -1 }),
        ],
        T0,
      );
      const texts = (jobs: { request: string }[]) => jobs.map((j) => JSON.parse(j.request).messages[0].content as string);
      const first = await store.claim({ ...claimOpts({ limit: 3 }), skipModels: ['full'] });
      expect(texts(first.jobs)).toEqual(['c 0', 'b 2', 'b 0']);
      expect(texts((await store.claim({ ...claimOpts({ limit: 10 }), skipModels: ['full', 'c'] })).jobs)).toEqual(['b 1']);
      expect((await store.claim({ ...claimOpts({ limit: 10 }), skipModels: ['full', 'b', 'c'] })).jobs).toEqual([]);
      // a crash loop is failed by this claim too (attempts already at the maximum)
      await store.release(OWNER, { refund: false, now: T0 + 1 });
      const again = await store.claim({ ...claimOpts({ limit: 10, maxAttempts: 1 }), skipModels: ['full'] });
      expect(texts(again.jobs)).toEqual(['c 1']);
      expect(again.exhausted).toBe(4);
      expect((await store.status()).counts).toMatchObject({ pending: 5, running: 1, failed: 4 });
    });

    it('raises attempts, sets running and the lease in the same step', async () => {
      const { store } = await kind.fresh();
      const [r] = rows(1);
      await store.enqueue([r!], T0);
      const { jobs, exhausted } = await store.claim(claimOpts({ now: T0 + 5, leaseUntil: T0 + 30_000 }));
      expect(exhausted).toBe(0);
      expect(jobs).toEqual([{ key: r!.key, request: r!.request, model: 'gpt-test', priority: 0, attempts: 1, failsOnItsOwn: false }]);
      const job = (await store.item(r!.itemId))!.job;
      expect(job).toMatchObject({ state: 'running', attempts: 1, leaseOwner: OWNER, leaseExpiresAt: T0 + 30_000, updatedAt: T0 + 5 });
      // a running job is not claimed twice
      expect((await store.claim(claimOpts({ owner: 'run-b' }))).jobs).toEqual([]);
    });

    it('does not take jobs whose run_after is in the future, and reports the earliest', async () => {
      const { store } = await kind.fresh();
      expect(await store.nextPendingAt()).toBeNull();
      const [r] = rows(1);
      // nothing in the state machine sets run_after yet; a loaded row stands in for a backed-off job
      await store.copier.loadJobs([
        {
          key: r!.key,
          request: r!.request,
          model: r!.model,
          state: 'pending',
          priority: 0,
          attempts: 1,
          runAfter: T0 + 1000,
          leaseOwner: null,
          leaseExpiresAt: null,
          output: null,
          response: null,
          usage: null,
          error: 'HTTP 429',
          createdAt: T0,
          updatedAt: T0,
          finishedAt: null,
        },
      ]);
      expect(await store.nextPendingAt()).toBe(T0 + 1000);
      expect((await store.claim(claimOpts({ now: T0 + 999 }))).jobs).toEqual([]);
      expect((await store.claim(claimOpts({ now: T0 + 1000 }))).jobs.map((j) => j.attempts)).toEqual([2]);
      expect(await store.nextPendingAt()).toBeNull();
    });

    it('fails a job whose attempts are used up, with a "gave up after" reason, during the claim', async () => {
      const { store } = await kind.fresh();
      const [r] = rows(1);
      await store.enqueue([r!], T0);
      // a run that crashes on the document every time: claimed, never finished, lease expires
      for (let i = 1; i <= 2; i++) {
        expect((await store.claim(claimOpts({ now: T0 + i * 100, leaseUntil: T0 + i * 100 + 10, maxAttempts: 2 }))).jobs).toHaveLength(1);
        expect(await store.reclaim(T0 + i * 100 + 50, [])).toBe(1);
      }
      const result = await store.claim(claimOpts({ now: T0 + 1000, maxAttempts: 2 }));
      expect(result).toEqual({ jobs: [], exhausted: 1 });
      const job = (await store.item(r!.itemId))!.job;
      expect(job).toMatchObject({ state: 'failed', attempts: 2, leaseOwner: null, finishedAt: T0 + 1000 });
      expect(job.error).toBe('gave up after 2 attempts: the run working on it died');
    });

    it('keeps the last error in the "gave up after" reason', async () => {
      const { store } = await kind.fresh();
      const [r] = rows(1);
      await store.enqueue([r!], T0);
      const { jobs } = await store.claim(claimOpts({ maxAttempts: 1 }));
      await store.recordAttempt(
        {
          key: jobs[0]!.key,
          runId: OWNER,
          attempt: 1,
          startedAt: T0,
          endedAt: T0 + 5,
          status: 503,
          outcome: 'retry',
          error: 'HTTP 503',
          usage: null,
        },
        { countAttempt: true, error: 'HTTP 503' },
      );
      await store.release(OWNER, { refund: false, now: T0 + 6 });
      expect(await store.claim(claimOpts({ now: T0 + 7, maxAttempts: 1 }))).toEqual({ jobs: [], exhausted: 1 });
      expect((await store.item(r!.itemId))!.job.error).toBe('gave up after 1 attempt; last error: HTTP 503');
    });

    it('says the run died when the last attempt was its, with the last error of a try that counted none', async () => {
      // a try during an outage (not counted), then a retry started and its run killed before it went:
      // "last error: Network error" alone hid why, and retry-failed --error "run working on it died" missed it
      const { store } = await kind.fresh();
      const [r] = rows(1);
      await store.enqueue([r!], T0);
      const { jobs } = await store.claim(claimOpts({ maxAttempts: 1 }));
      const key = jobs[0]!.key;
      const error = 'Network error: connect ECONNREFUSED 127.0.0.1:9';
      await store.recordAttempt(
        { key, runId: OWNER, attempt: 1, startedAt: T0, endedAt: T0 + 5, status: null, outcome: 'not_counted', error, usage: null },
        { countAttempt: false, error },
      );
      expect(await store.startRetry(key, OWNER, T0 + 6, T0 + 60_000)).toBe(1);
      expect(await store.reclaim(T0 + 7, [OWNER])).toBe(1);
      expect(await store.claim(claimOpts({ now: T0 + 8, maxAttempts: 1 }))).toEqual({ jobs: [], exhausted: 1 });
      expect((await store.item(r!.itemId))!.job.error).toBe(`gave up after 1 attempt: the run working on it died (last error: ${error})`);
    });

    it("gives a dead run's jobs back the attempt of a try its last heartbeat had not sent, up to UNSENT_DEATHS_FORGIVEN times", async () => {
      // a run killed again and again (a cron job under timeout -s KILL) failed documents it never sent;
      // the one that went out each time (and may be what kills the process) still uses up its attempts
      const { store } = await kind.fresh();
      const [sent, held] = rows(2);
      await store.enqueue([sent!, held!], T0);
      const claimAll = async (owner: string, now: number) => {
        await store.startRun({ id: owner, host: 'elsewhere', pid: 1, startedAt: now, options: {} });
        return store.claim(claimOpts({ owner, now, maxAttempts: 3 }));
      };
      const heldAttempts: number[] = [];
      for (let death = 1; death <= UNSENT_DEATHS_FORGIVEN + 1; death++) {
        const owner = `run-${death}`;
        const now = T0 + death * 1000;
        const { jobs, exhausted } = await claimAll(owner, now);
        expect(exhausted).toBe(death === 4 ? 1 : 0);
        heldAttempts.push(jobs.find((j) => j.key === held!.key)!.attempts);
        await store.heartbeat(owner, now + 10, now + 60_000, NO_STATS, [held!.key]);
        await store.reclaim(now + 20, [owner]);
      }
      expect(heldAttempts).toEqual(Array(UNSENT_DEATHS_FORGIVEN + 1).fill(1));
      const sentJob = (await store.item(sent!.itemId))!.job;
      expect(sentJob).toMatchObject({ state: 'failed', attempts: 3 });
      expect(sentJob.error).toBe('gave up after 3 attempts: the run working on it died');
      // the last death is past the bound: that attempt stays used
      expect((await claimAll('run-last', T0 + 100_000)).jobs.map((j) => j.attempts)).toEqual([2]);
    });

    it("gives a dead run's jobs claimed after its last heartbeat their attempt back: no list had said them yet", async () => {
      // a run claims every few hundred milliseconds and beats every 2 s: killed between two beats, it
      // held what it had claimed meanwhile, unlisted; twelve such kills failed jobs that went out once
      const { store } = await kind.fresh();
      const [early, late] = rows(2);
      await store.enqueue([early!], T0);
      await store.startRun({ id: OWNER, host: 'elsewhere', pid: 1, startedAt: T0, options: {} });
      await store.claim(claimOpts({ now: T0 + 10, maxAttempts: 3 }));
      // the beat says nothing held unsent: `early` went out
      await store.heartbeat(OWNER, T0 + 2000, T0 + 60_000, NO_STATS, []);
      await store.enqueue([late!], T0 + 2100);
      const { jobs } = await store.claim(claimOpts({ now: T0 + 2200, maxAttempts: 3 }));
      expect(jobs.map((j) => [j.key, j.attempts])).toEqual([[late!.key, 1]]);
      // killed at T0 + 3000, before the next beat
      await store.reclaim(T0 + 10_000, [OWNER]);
      const attempts = async (r: typeof early) => (await store.item(r!.itemId))!.job.attempts;
      expect([await attempts(early), await attempts(late)]).toEqual([1, 0]);
    });

    it('fails a document that kills each run before its first heartbeat at --max-attempts: no death of a run that never beat is given back', async () => {
      // each run claims it at its start and dies before it beats (invariant 2): the claims since a run's
      // last heartbeat are given back only once it has beaten
      const { store } = await kind.fresh();
      const [poison] = rows(1);
      await store.enqueue([poison!], T0);
      let exhausted = 0;
      let runs = 0;
      for (; exhausted === 0 && runs < UNSENT_DEATHS_FORGIVEN + 5; runs++) {
        const owner = `run-${runs}`;
        const now = T0 + runs * 1000;
        await store.startRun({ id: owner, host: 'elsewhere', pid: 1, startedAt: now, options: {} });
        exhausted = (await store.claim(claimOpts({ owner, now: now + 10, maxAttempts: 2 }))).exhausted;
        await store.reclaim(now + 500, [owner]);
      }
      expect(runs).toBe(3);
      expect((await store.item(poison!.itemId))!.job.error).toBe('gave up after 2 attempts: the run working on it died');
    });

    it("keeps the attempt of a dead run's try that went out before its last heartbeat and failed after it", async () => {
      // a recorded try is no claim: the 500 went out (and may be billed), the 429 gave its own attempt back already
      const { store } = await kind.fresh();
      const [failedLate, limitedLate] = rows(2);
      await store.enqueue([failedLate!, limitedLate!], T0);
      await store.startRun({ id: OWNER, host: 'elsewhere', pid: 1, startedAt: T0, options: {} });
      await store.claim(claimOpts({ now: T0 + 10, maxAttempts: 5 }));
      const tried = (key: string, attempt: number, status: number, counted: boolean, at: number) =>
        store.recordAttempt(
          {
            key,
            runId: OWNER,
            attempt,
            startedAt: at - 100,
            endedAt: at,
            status,
            outcome: counted ? 'retry' : 'not_counted',
            error: `HTTP ${status}`,
            usage: null,
          },
          { countAttempt: counted, error: `HTTP ${status}` },
        );
      // limitedLate: a counted 500, its retry started, all before the beat
      await tried(limitedLate!.key, 1, 500, true, T0 + 500);
      expect(await store.startRetry(limitedLate!.key, OWNER, T0 + 1500, T0 + 60_000)).toBe(2);
      await store.heartbeat(OWNER, T0 + 2000, T0 + 60_000, NO_STATS, []);
      // after the beat: failedLate's first try fails (counted), limitedLate's retry meets a 429 (not counted)
      await tried(failedLate!.key, 1, 500, true, T0 + 2500);
      await tried(limitedLate!.key, 2, 429, false, T0 + 2600);
      await store.reclaim(T0 + 10_000, [OWNER]);
      const attempts = async (r: typeof failedLate) => (await store.item(r!.itemId))!.job.attempts;
      expect([await attempts(failedLate), await attempts(limitedLate)]).toEqual([1, 1]);
    });

    it('a claim says which jobs fail on their own: tries counted on errors an outage also gives three times, or failed on one', async () => {
      const { store } = await kind.fresh();
      const [a, b, c, d, e] = rows(5);
      await store.enqueue([a!, b!, c!, d!, e!], T0);
      let now = T0;
      // claimed again after what they went through so far: what the claim says of each, in claim order
      const claimed = async () => {
        await store.release(OWNER, { refund: false, now: ++now });
        return (await store.claim(claimOpts({ now: ++now, maxAttempts: 9 }))).jobs.map((j) => j.failsOnItsOwn);
      };
      expect((await store.claim(claimOpts({ maxAttempts: 9 }))).jobs.map((j) => j.failsOnItsOwn)).toEqual([
        false,
        false,
        false,
        false,
        false,
      ]);
      const tried = (key: string, attempt: number, status: number | null, outcome: 'retry' | 'failed' | 'not_counted', answered = false) =>
        store.recordAttempt(
          {
            key,
            runId: OWNER,
            attempt,
            startedAt: T0,
            endedAt: T0 + 5,
            status,
            outcome,
            error: `HTTP ${status}`,
            usage: answered ? { promptTokens: 10, completionTokens: 64 } : null,
          },
          { countAttempt: outcome !== 'not_counted', error: `HTTP ${status}` },
        );
      // a: outage-like tries, but only two counted (not_counted ones are an open outage's)
      for (const [i, outcome] of (['retry', 'not_counted', 'not_counted', 'retry'] as const).entries())
        await tried(a!.key, i + 1, 500, outcome);
      // b: a 400 and 429s are no outage's errors
      await tried(b!.key, 1, 429, 'retry');
      await tried(b!.key, 2, 429, 'retry');
      await tried(b!.key, 3, 400, 'failed');
      // c: failed on a reset (no status)
      await tried(c!.key, 1, null, 'failed');
      // d: failed on an answer cut off at max_tokens (a 200 with its usage): the request's own, sent again with room
      await tried(d!.key, 1, 200, 'failed', true);
      // e: failed on a 200 whose body was no completion (no usage)
      await tried(e!.key, 1, 200, 'failed');
      expect(await claimed()).toEqual([false, false, true, false, true]);
      await tried(a!.key, 5, 503, 'retry');
      expect(await claimed()).toEqual([true, false, true, false, true]);
    });

    it('gives the attempt back the same way when the lease of a run that had not sent the job ran out', async () => {
      // a run on another machine gone quiet: its jobs come back when their leases run out
      const { store } = await kind.fresh();
      const [sent, held] = rows(2);
      await store.enqueue([sent!, held!], T0);
      await store.startRun({ id: 'quiet', host: 'elsewhere', pid: 1, startedAt: T0, options: {} });
      await store.claim(claimOpts({ owner: 'quiet', leaseUntil: T0 + 100 }));
      await store.heartbeat('quiet', T0 + 10, T0 + 100, NO_STATS, [held!.key]);
      expect(await store.reclaim(T0 + 200, [])).toBe(2);
      const attempts = async (r: typeof sent) => (await store.item(r!.itemId))!.job.attempts;
      expect([await attempts(sent), await attempts(held)]).toEqual([1, 0]);
    });

    // skipping a full lane takes another path (per model); both must hold invariant 6
    it.each([
      { path: 'in claim order', skipModels: [] },
      { path: 'around full lanes', skipModels: ['a-full-lane'] },
    ])('never hands the same job to two stores claiming at once ($path)', async ({ skipModels }) => {
      const fx = await kind.fresh();
      const other = await fx.openAnother();
      const all = rows(300);
      await fx.store.enqueue(all, T0);
      const taken: string[][] = [[], []];
      const work = [fx.store, other].map(async (s, i) => {
        for (;;) {
          const { jobs } = await s.claim({ ...claimOpts({ owner: `run-${i}`, limit: 7 }), skipModels });
          if (!jobs.length) return;
          taken[i]!.push(...jobs.map((j) => j.key));
          // yield so the two loops interleave even where the driver is synchronous
          await new Promise((r) => setImmediate(r));
        }
      });
      await Promise.all(work);
      const union = [...taken[0]!, ...taken[1]!];
      expect(new Set(union).size).toBe(union.length);
      expect(union.sort()).toEqual(all.map((r) => r.key).sort());
      expect(taken[0]!.length).toBeGreaterThan(0);
      expect(taken[1]!.length).toBeGreaterThan(0);
    });
  });
});
