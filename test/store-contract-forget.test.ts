import { beforeEach, describe, expect, it } from 'vitest';
import { STORE_KINDS, T0, OWNER, NO_STATS, answerJob, claimOpts, exported, row, skipUnavailable } from './helpers/stores.js';

// Store.forgetItems, for every store kind: items go; a job no item needs is dropped unsent, or kept when paid for.

describe.each(STORE_KINDS)('store contract: forgetting items [$name]', (kind) => {
  beforeEach((ctx) => skipUnavailable(kind, ctx));

  it('by source: an item enqueued again unchanged from a renamed file is of the new file, and forgetting the old name leaves it', async () => {
    const { store: first, openAnother } = await kind.fresh();
    await first.enqueue([row('a', 'one', { source: 'data.jsonl:1', meta: { tag: 'x' } }), row('b', 'two', { source: 'data.jsonl:2' })], T0);
    // the file renamed, a line added, a field fixed: the requests are the same; enqueued by another
    // process, which looks first at which rows changed (PostgreSQL sends only ids and keys then)
    const store = await openAnother();
    const again = await store.enqueue(
      [
        row('a', 'one', { source: 'data-v2.jsonl:1', meta: { tag: 'y' } }),
        row('b', 'two', { source: 'data-v2.jsonl:2' }),
        row('c', 'three', { source: 'data-v2.jsonl:3' }),
      ],
      T0 + 1,
    );
    expect(again).toMatchObject({ newItems: 1, unchanged: 2, movedItems: 0, newJobs: 1 });
    expect(await store.item('a')).toMatchObject({ source: 'data-v2.jsonl:1', meta: { tag: 'y' } });
    expect(await store.forgetItems({ source: 'data.jsonl' }, { now: T0 + 2 })).toMatchObject({ items: 0, droppedJobs: 0 });
    expect((await exported(store)).map((r) => [r.id, r.source])).toEqual([
      ['a', 'data-v2.jsonl:1'],
      ['b', 'data-v2.jsonl:2'],
      ['c', 'data-v2.jsonl:3'],
    ]);
  });

  it('by id: an unsent job no item needs is dropped, a shared one stays, an answered one is kept out of done; unknown ids said', async () => {
    const { store } = await kind.fresh();
    await store.enqueue([row('pending', 'p'), row('answered', 'a'), row('shared-1', 's'), row('shared-2', 's'), row('keep', 'k')], T0);
    const answered = (await exported(store)).find((r) => r.id === 'answered')!.key;
    const [claimed] = (await store.claim({ ...claimOpts({ limit: 100 }) })).jobs.filter((j) => j.key === answered);
    await answerJob(store, claimed!.key);
    await store.release(OWNER, { refund: true, now: T0 });

    const dry = await store.forgetItems({ ids: ['pending', 'answered', 'shared-1', 'nope', 'nope'] }, { now: T0, dryRun: true });
    expect(dry).toEqual({ items: 3, ids: ['answered', 'pending', 'shared-1'], droppedJobs: 1, orphanedAnswers: 1, unknownIds: ['nope'] });
    expect((await exported(store)).map((r) => r.id)).toEqual(['pending', 'answered', 'shared-1', 'shared-2', 'keep']);

    expect(await store.forgetItems({ ids: ['pending', 'answered', 'shared-1', 'nope', 'pending'] }, { now: T0 })).toEqual({
      items: 3,
      ids: ['answered', 'pending', 'shared-1'],
      droppedJobs: 1,
      orphanedAnswers: 1,
      unknownIds: ['nope'],
    });
    expect((await exported(store)).map((r) => [r.id, r.state])).toEqual([
      ['shared-2', 'pending'],
      ['keep', 'pending'],
    ]);
    const s = await store.status();
    // the dropped job is gone from the counts; the answer is kept, and counted apart from done
    expect(s.counts).toMatchObject({ pending: 2, done: 0 });
    expect(s.items).toBe(2);
    // the forgotten document is never sent: a claim finds only the jobs items need
    const sent = (await store.claim(claimOpts({ limit: 100, owner: 'run-b' }))).jobs.map((j) => j.key);
    expect(new Set(sent)).toEqual(new Set((await exported(store)).map((r) => r.key)));
  });

  it("a run's heartbeat says which jobs it holds no item needs any more (forgotten, or moved by an enqueue); handed back, they are dropped", async () => {
    const { store } = await kind.fresh();
    await store.enqueue([row('gone', 'g'), row('moved', 'm'), row('kept', 'k')], T0);
    const held = (await store.claim(claimOpts({ limit: 10 }))).jobs;
    expect(held).toHaveLength(3);
    const stats = NO_STATS;
    expect(await store.heartbeat(OWNER, T0 + 1, T0 + 60_000, stats)).toEqual([]);
    await store.forgetItems({ ids: ['gone'] }, { now: T0 + 2 });
    await store.enqueue([row('moved', 'm, fixed')], T0 + 3);
    const keyOf = (id: 'gone' | 'moved') => row(id, id === 'gone' ? 'g' : 'm').key;
    expect([...(await store.heartbeat(OWNER, T0 + 4, T0 + 60_000, stats))].sort()).toEqual([keyOf('gone'), keyOf('moved')].sort());
    // another run's heartbeat says nothing of them
    expect(await store.heartbeat('another-run', T0 + 4, T0 + 60_000, stats)).toEqual([]);
    await store.release(OWNER, { refund: true, now: T0 + 5, keys: [keyOf('gone'), keyOf('moved')] });
    expect((await exported(store)).map((r) => [r.id, r.state])).toEqual([
      ['moved', 'pending'],
      ['kept', 'running'],
    ]);
    expect((await store.status()).counts).toMatchObject({ pending: 1, running: 1 });
  });

  it('by source: a file, a JSONL file’s lines, every file under a folder, and nothing that only starts alike', async () => {
    const { store } = await kind.fresh();
    await store.enqueue(
      [
        row('x.txt', 'x', { source: 'docs/x.txt' }),
        row('sub/y.txt', 'y', { source: 'docs/sub/y.txt' }),
        row('z.txt', 'z', { source: 'docsmore/z.txt' }),
        row('r1', 'r1', { source: 'data.jsonl:1' }),
        row('data.jsonl:2', 'r2', { source: 'data.jsonl:2' }),
        row('r3', 'r3', { source: 'data.jsonl.bak:1' }),
        row('report:v2.txt', 'v2', { source: 'data.jsonl:v2.txt' }),
        row('solo.txt', 'solo', { source: 'solo.txt' }),
      ],
      T0,
    );
    // the ids of what a source named, sorted (a dry run lists them)
    expect(await store.forgetItems({ source: 'docs' }, { now: T0, dryRun: true })).toMatchObject({ items: 2, ids: ['sub/y.txt', 'x.txt'] });
    expect(await store.forgetItems({ source: 'docs' }, { now: T0 })).toMatchObject({
      items: 2,
      ids: ['sub/y.txt', 'x.txt'],
      droppedJobs: 2,
    });
    expect(await store.forgetItems({ source: 'data.jsonl' }, { now: T0 })).toMatchObject({
      items: 2,
      ids: ['data.jsonl:2', 'r1'],
      droppedJobs: 2,
    });
    expect(await store.forgetItems({ source: 'solo.txt' }, { now: T0 })).toMatchObject({ items: 1, droppedJobs: 1 });
    expect(await store.forgetItems({ source: 'nowhere' }, { now: T0 })).toEqual({
      items: 0,
      ids: [],
      droppedJobs: 0,
      orphanedAnswers: 0,
      unknownIds: [],
    });
    expect((await exported(store)).map((r) => r.id)).toEqual(['z.txt', 'r3', 'report:v2.txt']);
    expect((await store.status()).counts.pending).toBe(3);
  });
});
