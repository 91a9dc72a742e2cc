import { beforeEach, describe, expect, it } from 'vitest';
import type { Store } from '../src/store/types.js';
import { STORE_KINDS, T0, OWNER, claimOpts, exported, row, rows, skipUnavailable, NO_STATS } from './helpers/stores.js';

// What `status`, `show` and `export` read, for every store kind.

async function finish(store: Store, key: string, prompt: number, completion: number, endedAt = T0 + 100, costUsd?: number) {
  return store.complete(key, {
    owner: OWNER,
    output: `out ${key.slice(0, 6)}`,
    response: '{}',
    usage: { promptTokens: prompt, completionTokens: completion },
    attempt: {
      key,
      runId: OWNER,
      attempt: 1,
      startedAt: T0,
      endedAt,
      status: 200,
      outcome: 'done',
      error: null,
      usage: { promptTokens: prompt, completionTokens: completion },
      costUsd,
    },
  });
}

/** Claim up to `limit` jobs, answer every `nth` in claim order and put the others back pending: the keys answered. */
async function finishEvery(store: Store, nth: number, limit: number): Promise<Set<string>> {
  const { jobs } = await store.claim(claimOpts({ limit }));
  const done = new Set<string>();
  for (const [i, j] of jobs.entries())
    if (i % nth === 0) {
      await finish(store, j.key, 1, 1);
      done.add(j.key);
    }
  await store.release(OWNER, { refund: true, now: T0 });
  return done;
}

describe.each(STORE_KINDS)('store contract: reading [$name]', (kind) => {
  beforeEach((ctx) => skipUnavailable(kind, ctx));

  it('status counts states, items, tokens per model, failures, retrying, oldest pending and runs', async () => {
    const { store } = await kind.fresh();
    const empty = await store.status();
    expect(empty).toEqual({
      counts: { pending: 0, running: 0, done: 0, failed: 0 },
      total: 0,
      orphanedAnswers: 0,
      items: 0,
      tokens: { prompt: 0, completion: 0 },
      byModel: [],
      failures: [],
      retrying: 0,
      oldestPendingAt: null,
      activeRuns: [],
      lastRun: null,
      lanes: [],
      spend: [],
      rejected: [],
    });
    await store.enqueue([...rows(4, { prefix: 'a' }), row('shared', 'a text 0')], T0 + 10); // 'shared' reuses a-0000's job
    await store.enqueue(
      rows(3, { prefix: 'b' }).map((r) => row(r.itemId, `b ${r.itemId}`, { model: 'big-model' })),
      T0 + 20,
    );
    await store.startRun({ id: 'run-old', host: 'h1', pid: 1, startedAt: T0, options: {} });
    await store.finishRun('run-old', T0 + 5, 'finished', NO_STATS);
    await store.startRun({ id: OWNER, host: 'h2', pid: 2, startedAt: T0 + 30, options: { rpm: 60 } });
    // a: 2 done, 1 failed (HTTP 400), 1 failed (timeout); b: 1 done, 1 retrying (pending after a try), 1 pending
    const a = (await store.claim(claimOpts({ limit: 4 }))).jobs;
    await finish(store, a[0]!.key, 100, 10, T0 + 100, 0.001);
    await finish(store, a[1]!.key, 200, 20); // answered without a cost (as before llmq kept them): priced when read
    await store.fail(a[2]!.key, OWNER, 'HTTP 400', null, T0 + 1);
    await store.fail(a[3]!.key, OWNER, 'timeout', null, T0 + 1);
    const b = (await store.claim(claimOpts({ limit: 2 }))).jobs;
    await finish(store, b[0]!.key, 1000, 500, T0 + 100, 0.02);
    await store.release(OWNER, { refund: false, now: T0 + 2 });

    const s = await store.status();
    expect(s.counts).toEqual({ pending: 2, running: 0, done: 3, failed: 2 });
    expect(s.total).toBe(7);
    expect(s.items).toBe(8);
    expect(s.tokens).toEqual({ prompt: 1300, completion: 530 });
    expect(s.byModel).toEqual([
      {
        model: 'big-model',
        jobs: 3,
        done: 1,
        pending: 2,
        running: 0,
        prompt: 1000,
        completion: 500,
        donePrompt: 1000,
        doneCompletion: 500,
        storedUsd: 0.02,
        unpricedPrompt: 0,
        unpricedCompletion: 0,
        dropped: 0,
      },
      {
        model: 'gpt-test',
        jobs: 4,
        done: 2,
        pending: 0,
        running: 0,
        prompt: 300,
        completion: 30,
        donePrompt: 300,
        doneCompletion: 30,
        storedUsd: 0.001,
        unpricedPrompt: 200,
        unpricedCompletion: 20,
        dropped: 0,
      },
    ]);
    expect((await exported(store)).map((r) => [r.id, r.costUsd])).toEqual([
      ['a-0000', 0.001],
      ['a-0001', null],
      ['a-0002', null],
      ['a-0003', null],
      ['shared', 0.001],
      ['b-0000', 0.02],
      ['b-0001', null],
      ['b-0002', null],
    ]);
    const none = { reservedUsd: 0, inFlight: 0, mayBeBilledUsd: 0, mayBeBilledTries: 0, unpricedTries: 0 };
    expect(s.spend.map((r) => [r.id, r.spend])).toEqual([
      [OWNER, { runId: OWNER, ...none, spentUsd: 0.021 }],
      ['run-old', { runId: 'run-old', ...none, spentUsd: 0 }],
    ]);
    expect(s.failures).toEqual([
      { error: 'HTTP 400', count: 1 },
      { error: 'timeout', count: 1 },
    ]);
    expect(s.retrying).toBe(1);
    expect(s.oldestPendingAt).toBe(T0 + 20);
    expect(s.activeRuns.map((r) => [r.id, r.host, r.options])).toEqual([[OWNER, 'h2', { rpm: 60 }]]);
    expect(s.lastRun).toMatchObject({ id: OWNER, startedAt: T0 + 30, endedAt: null });
  });

  it("status's last run is the one that ended last, not the one started last", async () => {
    const { store } = await kind.fresh();
    const stats = { done: 5, failed: 0, retried: 0, requests: 5, rateLimited: 0, promptTokens: 0, completionTokens: 0, jobsPerSecond: 1 };
    // two runs side by side: the first started drains the queue after the second was stopped
    await store.startRun({ id: 'run-first', host: 'h', pid: 1, startedAt: T0, options: {} });
    await store.startRun({ id: 'run-second', host: 'h', pid: 2, startedAt: T0 + 10, options: {} });
    await store.finishRun('run-second', T0 + 20, 'signal', stats);
    await store.finishRun('run-first', T0 + 90, 'drained', stats);
    expect((await store.status()).lastRun).toMatchObject({ id: 'run-first', endedAt: T0 + 90, exitReason: 'drained' });
  });

  it('status groups failures by error, most common first, at most ten', async () => {
    const { store } = await kind.fresh();
    await store.enqueue(rows(14), T0);
    const { jobs } = await store.claim(claimOpts());
    const errors = ['E3', 'E3', 'E3', 'E2', 'E2', 'B', 'A', 'C', 'D', 'F', 'G', 'H', 'I', 'J'];
    for (const [i, j] of jobs.entries()) await store.fail(j.key, OWNER, errors[i]!, null, T0);
    const { failures } = await store.status();
    expect(failures).toEqual([
      { error: 'E3', count: 3 },
      { error: 'E2', count: 2 },
      ...['A', 'B', 'C', 'D', 'F', 'G', 'H', 'I'].map((error) => ({ error, count: 1 })),
    ]);
  });

  it('failedItems lists the items of failed jobs with exactly one error, oldest job first, up to the limit; retryFailed by that error', async () => {
    const { store } = await kind.fresh();
    await store.enqueue([...rows(6), row('twin', 'doc text 0')], T0); // 'twin' shares doc-0000's job
    const { jobs } = await store.claim(claimOpts());
    const errors = ['HTTP 400', 'timeout', 'HTTP 400', 'HTTP 400 and more', null, 'HTTP 400'];
    for (const [i, j] of jobs.entries()) {
      if (errors[i] !== null) await store.fail(j.key, OWNER, errors[i]!, null, T0);
    }
    const ids = async (error: string, limit = 50) => (await store.failedItems(error, limit)).map((r) => r.id);
    expect(await ids('HTTP 400')).toEqual([rows(6)[0]!.itemId, 'twin', rows(6)[2]!.itemId, rows(6)[5]!.itemId]);
    expect(await ids('HTTP 400', 2)).toEqual([rows(6)[0]!.itemId, 'twin']);
    expect(await ids('timeout')).toEqual([rows(6)[1]!.itemId]);
    expect(await ids('nothing like it')).toEqual([]);
    expect((await store.failedItems('timeout', 5))[0]).toEqual({
      id: rows(6)[1]!.itemId,
      source: expect.any(String),
      key: jobs[1]!.key,
      attempts: 1,
    });

    // retryFailed by exact reason leaves the longer one that contains it.
    expect(await store.retryFailed({ errorIs: 'HTTP 400' }, T0 + 1)).toBe(3);
    expect((await store.status()).failures).toEqual([
      { error: 'HTTP 400 and more', count: 1 },
      { error: 'timeout', count: 1 },
    ]);
  });

  it('item shows the item, its job and every attempt; null for an unknown id', async () => {
    const { store } = await kind.fresh();
    expect(await store.item('nope')).toBeNull();
    await store.enqueue([row('x', 'text', { meta: { lang: 'en' } })], T0);
    const { jobs } = await store.claim(claimOpts());
    const key = jobs[0]!.key;
    await store.recordAttempt(
      { key, runId: OWNER, attempt: 1, startedAt: T0, endedAt: T0 + 30, status: null, outcome: 'retry', error: 'ECONNRESET', usage: null },
      { countAttempt: true, error: 'ECONNRESET' },
    );
    await store.startRetry(key, OWNER, T0 + 40, T0 + 1000);
    await finish(store, key, 5, 6, T0 + 90);
    const it = (await store.item('x'))!;
    expect(it).toMatchObject({ id: 'x', source: 'x.txt', meta: { lang: 'en' } });
    expect(it.job).toMatchObject({
      key,
      state: 'done',
      attempts: 2,
      output: `out ${key.slice(0, 6)}`,
      usage: { promptTokens: 5, completionTokens: 6 },
    });
    expect(it.attempts.map((a) => [a.attempt, a.status, a.outcome, a.error, a.latencyMs])).toEqual([
      [1, null, 'retry', 'ECONNRESET', 30],
      [1, 200, 'done', null, 90],
    ]);
  });

  it('itemsByKeyPrefix: the items of jobs whose key starts with the prefix, by key then input order, up to the limit', async () => {
    const { store } = await kind.fresh();
    const keyed = (itemId: string, key: string) => ({ ...row(itemId, `text of ${itemId}`), key });
    const k1 = `abcdef00${'1'.repeat(56)}`;
    const k2 = `abcdef00${'2'.repeat(56)}`;
    const k3 = `abcdef0f${'3'.repeat(56)}`;
    await store.enqueue([keyed('x', k2), keyed('y', k1), keyed('z', k2), keyed('w', k3), row('other', 'other text')], T0);
    expect(await store.itemsByKeyPrefix('abcdef00', 10)).toEqual([
      { key: k1, itemId: 'y' },
      { key: k2, itemId: 'x' },
      { key: k2, itemId: 'z' },
    ]);
    expect(await store.itemsByKeyPrefix('abcdef00', 2)).toHaveLength(2);
    expect(await store.itemsByKeyPrefix('abcdef002', 10)).toEqual([
      { key: k2, itemId: 'x' },
      { key: k2, itemId: 'z' },
    ]);
    expect(await store.itemsByKeyPrefix('abcdef0f', 10)).toEqual([{ key: k3, itemId: 'w' }]);
    expect(await store.itemsByKeyPrefix(k3, 10)).toEqual([{ key: k3, itemId: 'w' }]);
    expect(await store.itemsByKeyPrefix('abcdef01', 10)).toEqual([]);
    // after a key: the next jobs with the prefix
    expect(await store.itemsByKeyPrefix('abcdef0', 10, k1)).toEqual([
      { key: k2, itemId: 'x' },
      { key: k2, itemId: 'z' },
      { key: k3, itemId: 'w' },
    ]);
    expect(await store.itemsByKeyPrefix('abcdef00', 1, k2)).toEqual([]);
  });

  it('exportPages yields items in input order with their job, filtered by state', async () => {
    const { store } = await kind.fresh();
    await store.enqueue([row('z', 'one'), row('a', 'two'), row('m', 'one')], T0);
    const { jobs } = await store.claim(claimOpts({ limit: 1 }));
    await finish(store, jobs[0]!.key, 3, 4, T0 + 77);
    const all = await exported(store);
    expect(all.map((r) => [r.id, r.state, r.output, r.attempts, r.latencyMs])).toEqual([
      ['z', 'done', `out ${jobs[0]!.key.slice(0, 6)}`, 1, 77],
      ['a', 'pending', null, 0, null],
      ['m', 'done', `out ${jobs[0]!.key.slice(0, 6)}`, 1, 77],
    ]);
    expect(all[0]).toMatchObject({
      source: 'z.txt',
      meta: null,
      key: jobs[0]!.key,
      model: 'gpt-test',
      response: '{}',
      error: null,
      usage: { promptTokens: 3, completionTokens: 4 },
    });
    expect((await exported(store, ['pending'])).map((r) => r.id)).toEqual(['a']);
    expect((await exported(store, ['done', 'failed'])).map((r) => r.id)).toEqual(['z', 'm']);
    expect((await exported(store, [])).length).toBe(3);
  });

  it('exportPages pages through more than a thousand rows, filtered or not, in order', async () => {
    const { store } = await kind.fresh();
    const all = rows(2345);
    for (let i = 0; i < all.length; i += 500) await store.enqueue(all.slice(i, i + 500), T0);
    // every seventh job done, so a filtered page spans unfiltered seq gaps
    const done = await finishEvery(store, 7, 3000);
    const out = await exported(store);
    expect(out.map((r) => r.id)).toEqual(all.map((r) => r.itemId));
    const onlyDone = await exported(store, ['done']);
    expect(onlyDone.map((r) => r.id)).toEqual(all.filter((r) => done.has(r.key)).map((r) => r.itemId));
    expect(onlyDone.length).toBe(335);
  });

  it('exportPages finds each item its job wherever the job is: moved to a newer one, shared, made in reverse order', async () => {
    const { store } = await kind.fresh();
    const first = rows(1500, { prefix: 'a' });
    for (let i = 0; i < first.length; i += 500) await store.enqueue(first.slice(i, i + 500), T0);
    // a block of items moved to new jobs, made last and in reverse order of the items
    const moved = first.slice(300, 1300).map((r, n) => row(r.itemId, `moved ${n}`));
    await store.enqueue([...moved].reverse(), T0);
    // new items sharing jobs with items pages apart, and one job shared by many
    const shared = Array.from({ length: 1200 }, (_, n) => row(`s-${n}`, n % 3 ? `a text ${(n * 7) % 1500}` : `moved ${n % 1000}`));
    const same = Array.from({ length: 30 }, (_, n) => row(`t-${n}`, 'one job for many'));
    await store.enqueue([...shared, ...same], T0);
    const keyOf = new Map([...first, ...moved, ...shared, ...same].map((r) => [r.itemId, r.key]));
    const ids = [...first, ...shared, ...same].map((r) => r.itemId);
    const done = await finishEvery(store, 5, 5000);
    const out = await exported(store);
    expect(out.map((r) => [r.id, r.key])).toEqual(ids.map((id) => [id, keyOf.get(id)]));
    expect(out.every((r) => r.state === (done.has(r.key) ? 'done' : 'pending'))).toBe(true);
    const onlyDone = await exported(store, ['done']);
    expect(onlyDone.map((r) => r.id)).toEqual(ids.filter((id) => done.has(keyOf.get(id)!)));

    // An export in blocks of item seqs (what a parallel export reads) reads the same rows, each once.
    // (seqs may have gaps: a PostgreSQL identity spent by a conflicting insert is not given back)
    const span = await store.itemSeqSpan();
    expect(span!.last - span!.first + 1).toBeGreaterThanOrEqual(ids.length);
    for (const states of [undefined, ['done' as const]]) {
      const inBlocks = [];
      for (let after = span!.first - 1; after < span!.last; after += 333) {
        for await (const page of store.exportPages({ states, items: { afterSeq: after, upToSeq: after + 333 } })) inBlocks.push(...page);
      }
      expect(inBlocks).toEqual(await exported(store, states));
    }
  });

  it('exportPages finds each item its job when pages start with an item sharing an older job, among runs of new ones', async () => {
    const { store } = await kind.fresh();
    // every third item shares the first item's job; the pages (of 250 or 1000 items) start on
    // shared and on new jobs, and a filtered export keeps the shared job's items or none of them
    const all = Array.from({ length: 3100 }, (_, n) => (n % 3 === 1 ? row(`d-${n}`, 'text 0') : row(`d-${n}`, `text ${n}`)));
    for (let i = 0; i < all.length; i += 700) await store.enqueue(all.slice(i, i + 700), T0);
    const done = await finishEvery(store, 4, 5000);
    expect((await exported(store)).map((r) => [r.id, r.key])).toEqual(all.map((r) => [r.itemId, r.key]));
    const onlyPending = await exported(store, ['pending']);
    expect(onlyPending.map((r) => r.id)).toEqual(all.filter((r) => !done.has(r.key)).map((r) => r.itemId));
    expect(onlyPending.every((r) => r.state === 'pending' && r.output === null)).toBe(true);
  });

  it('itemSeqSpan: null for a queue without items, else the first and last item in input order', async () => {
    const { store } = await kind.fresh();
    expect(await store.itemSeqSpan()).toBeNull();
    await store.enqueue(rows(10), T0);
    const span = await store.itemSeqSpan();
    expect(span!.last - span!.first).toBe(9);
    const firstOnly = [];
    for await (const page of store.exportPages({ items: { afterSeq: span!.first - 1, upToSeq: span!.first } })) firstOnly.push(...page);
    expect(firstOnly.map((r) => r.id)).toEqual([rows(10)[0]!.itemId]);
  });

  it("itemStates: for each id asked, in order, the state of its item's job, or null; in chunks of any size", async () => {
    const { store } = await kind.fresh();
    await store.enqueue([...rows(3), row('shares-doc-0000', 'doc text 0')], T0);
    const { jobs } = await store.claim(claimOpts({ limit: 2 }));
    await finish(store, jobs[0]!.key, 1, 1);
    expect(await store.itemStates([])).toEqual([]);
    expect(await store.itemStates(['doc-0002', 'nope', 'doc-0000', 'doc-0001', 'shares-doc-0000', 'doc-0002'])).toEqual([
      'pending',
      null,
      'done',
      'running',
      'done',
      'pending',
    ]);
    // past one query's worth of ids (ITEM_STATES_PER_QUERY), the later chunks are asked too, each in its place
    const many = [...Array.from({ length: 2500 }, (_, i) => `unknown-${i}`), 'doc-0002'];
    const states = await store.itemStates(many);
    expect(states).toHaveLength(2501);
    expect(states.filter((s) => s !== null)).toEqual(['pending']);
    expect(states[2500]).toBe('pending');
  });
  it("folderItems: a folder's walk's items (source = folder/id), in input order, a page after a seq; never a JSONL line's", async () => {
    const { store } = await kind.fresh();
    await store.enqueue(
      [
        row('a.txt', 'one', { source: 'notes/a.txt' }),
        row('x.txt', 'two', { source: 'other/x.txt' }),
        row('sub/b.txt', 'three', { source: 'notes/sub/b.txt' }),
        // an item of notes/sub walked alone: its id is not its path in notes
        row('c.txt', 'four', { source: 'notes/sub/c.txt' }),
        // JSONL lines inside the folder, one of them without an id (its source is its id)
        row('rec1', 'five', { source: 'notes/data.jsonl:1' }),
        row('notes/data.jsonl:2', 'six', { source: 'notes/data.jsonl:2' }),
        row('top.txt', 'seven', { source: 'top.txt' }),
        row('data.jsonl:3', 'eight', { source: 'data.jsonl:3' }),
        row('-:4', 'nine', { source: '-:4' }),
        row('d.txt', 'ten', { source: 'notes/d.txt' }),
      ],
      T0,
    );
    const ids = async (folder: string, limit: number, after?: number) => (await store.folderItems(folder, limit, after)).map((r) => r.id);
    expect(await ids('notes', 10)).toEqual(['a.txt', 'sub/b.txt', 'd.txt']);
    expect(await ids('notes/', 10)).toEqual(['a.txt', 'sub/b.txt', 'd.txt']);
    expect(await ids('notes/sub', 10)).toEqual(['c.txt']);
    // the current folder: items whose source is their id, no file:line among them
    expect(await ids('.', 10)).toEqual(['top.txt']);
    // pages by seq
    const first = await store.folderItems('notes', 2);
    expect(first.map((r) => r.id)).toEqual(['a.txt', 'sub/b.txt']);
    expect(await ids('notes', 2, first[1]!.seq)).toEqual(['d.txt']);
    expect(await ids('nothing', 10)).toEqual([]);
  });
  it("lineItemIds: the items named by their line in a JSONL file (id = source = file:N), in the index's order, a page after an id", async () => {
    const { store } = await kind.fresh();
    await store.enqueue(
      [
        row('m.jsonl:1', 'one', { source: 'm.jsonl:1' }),
        // a line with an id of its own, and one whose id happens to look like a line's
        row('b', 'two', { source: 'm.jsonl:2' }),
        row('m.jsonl:9', 'three', { source: 'm.jsonl:3' }),
        row('m.jsonl:12', 'four', { source: 'm.jsonl:12' }),
        // another file whose name starts the same, a file of that name in a folder, stdin's lines
        row('m.jsonl2:1', 'five', { source: 'm.jsonl2:1' }),
        row('m.jsonl:x', 'six', { source: 'm.jsonl:x' }),
        row('-:1', 'seven', { source: '-:1' }),
        row('sub/m.jsonl:4', 'eight', { source: 'sub/m.jsonl:4' }),
        row('m.jsonl:40', 'nine', { source: 'm.jsonl:40' }),
      ],
      T0,
    );
    const ids = (file: string, limit: number, after?: string) => store.lineItemIds(file, limit, after);
    // in the index's order: what each page starts after
    expect((await ids('m.jsonl', 10)).sort()).toEqual(['m.jsonl:1', 'm.jsonl:12', 'm.jsonl:40']);
    expect(await ids('sub/m.jsonl', 10)).toEqual(['sub/m.jsonl:4']);
    expect(await ids('-', 10)).toEqual(['-:1']);
    const first = await ids('m.jsonl', 2);
    expect(first).toHaveLength(2);
    const rest = await ids('m.jsonl', 2, first[1]);
    expect([...first, ...rest].sort()).toEqual(['m.jsonl:1', 'm.jsonl:12', 'm.jsonl:40']);
    expect(await ids('nothing.jsonl', 10)).toEqual([]);
  });
  it("itemsEndingIn: items in a subfolder by their file's name, in input order; the name taken as it is (no wildcards)", async () => {
    const { store } = await kind.fresh();
    await store.enqueue(
      [
        row('b/n4.txt', 'one', { source: 'notes/b/n4.txt' }),
        row('n4.txt', 'two', { source: 'notes/n4.txt' }),
        row('a/n4.txt', 'three', { source: 'notes/a/n4.txt' }),
        row('a/xn4.txt', 'four', { source: 'notes/a/xn4.txt' }),
        row('c/d/n4.txt', 'five', { source: 'notes/c/d/n4.txt' }),
        row('e/n_%.txt', 'six', { source: 'notes/e/n_%.txt' }),
      ],
      T0,
    );
    const ids = async (name: string, limit: number) => (await store.itemsEndingIn(name, limit)).map((r) => r.id);
    expect(await ids('n4.txt', 10)).toEqual(['b/n4.txt', 'a/n4.txt', 'c/d/n4.txt']);
    expect(await ids('n4.txt', 2)).toEqual(['b/n4.txt', 'a/n4.txt']);
    expect(await ids('d/n4.txt', 10)).toEqual(['c/d/n4.txt']);
    expect(await store.itemsEndingIn('n_%.txt', 10)).toEqual([{ id: 'e/n_%.txt', source: 'notes/e/n_%.txt' }]);
    // % and _ are themselves, not wildcards
    expect(await ids('n__.txt', 10)).toEqual([]);
    expect(await ids('%.txt', 10)).toEqual([]);
    expect(await ids('nothing.txt', 10)).toEqual([]);
  });
  it('stateCounts: the jobs in each state, as status counts them', async () => {
    const { store } = await kind.fresh();
    expect(await store.stateCounts()).toEqual({ pending: 0, running: 0, done: 0, failed: 0 });
    await store.enqueue(rows(5), T0);
    const { jobs } = await store.claim(claimOpts({ limit: 2 }));
    await finish(store, jobs[0]!.key, 1, 1);
    expect(await store.stateCounts()).toEqual({ pending: 3, running: 1, done: 1, failed: 0 });
    expect(await store.stateCounts()).toEqual((await store.status()).counts);
  });
});
