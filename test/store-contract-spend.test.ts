import { beforeEach, describe, expect, it } from 'vitest';
import { batchOwner } from '../src/store/batches.js';
import { copyStore } from '../src/store/copy.js';
import type { AttemptRecord, Store } from '../src/store/types.js';
import { NO_STATS, STORE_KINDS, T0, OWNER, claimOpts, row, rows, skipUnavailable } from './helpers/stores.js';

// The money ledger (`spend`) every store keeps: --budget reservations and their settlement.

const budget = (runBudget: number | null, totalBudget: number | null = null) => ({ runBudget, totalBudget, now: T0 });

async function started(store: Store, id = OWNER): Promise<void> {
  await store.startRun({ id, host: 'h', pid: 1, startedAt: T0, options: {} });
}

async function spendOf(store: Store, id = OWNER) {
  return (await store.status()).spend.find((r) => r.id === id)!.spend;
}

function tryOf(key: string, o: Partial<AttemptRecord>): AttemptRecord {
  return { key, runId: OWNER, attempt: 1, startedAt: T0, endedAt: T0 + 10, status: 200, outcome: 'done', error: null, usage: null, ...o };
}

/** A try whose answer was billed ($0.25) and rejected: not the JSON asked for. */
function rejected(key: string, outcome: 'retry' | 'failed'): AttemptRecord {
  return tryOf(key, { outcome, error: 'the answer is not JSON', usage: { promptTokens: 10, completionTokens: 2 }, costUsd: 0.25 });
}

/** The job answered with 10 tokens in and 2 out, its attempt carrying `money` (its cost and reservation). */
async function answered(store: Store, key: string, money: Pick<AttemptRecord, 'costUsd' | 'reservedUsd'>): Promise<void> {
  const usage = { promptTokens: 10, completionTokens: 2 };
  await store.complete(key, { owner: OWNER, output: 'x', response: '{}', usage, attempt: tryOf(key, { usage, ...money }) });
}

describe.each(STORE_KINDS)('store contract: spend [$name]', (kind) => {
  beforeEach((ctx) => skipUnavailable(kind, ctx));

  it('reserves a worst case only while it fits --budget, and says what is committed when it does not', async () => {
    const { store } = await kind.fresh();
    await started(store);
    expect(await store.reserve({ runId: OWNER, usd: 0.6, ...budget(1) })).toEqual({ ok: true });
    expect(await store.reserve({ runId: OWNER, usd: 0.4, ...budget(1) })).toEqual({ ok: true }); // exactly the budget fits
    expect(await store.reserve({ runId: OWNER, usd: 0.000000001, ...budget(1) })).toEqual({
      ok: false,
      scope: 'run',
      committedUsd: 1,
      othersOutUsd: 0,
    });
    expect(await store.committed(OWNER)).toEqual({ run: 1, total: 1 });
    await store.unreserve(OWNER, 0.4, T0);
    expect(await spendOf(store)).toMatchObject({ reservedUsd: 0.6, inFlight: 1, spentUsd: 0 });
    expect(await store.reserve({ runId: OWNER, usd: 0.3, ...budget(1) })).toEqual({ ok: true });
  });

  it('settles with the attempt row: the reservation goes, the real cost, or the worst case of a try that may be billed, arrives', async () => {
    const { store } = await kind.fresh();
    await started(store);
    await store.enqueue(rows(3), T0);
    const [a, b, c] = (await store.claim(claimOpts({ limit: 3 }))).jobs;
    for (let i = 0; i < 3; i++) await store.reserve({ runId: OWNER, usd: 0.5, ...budget(10) });
    await answered(store, a!.key, { costUsd: 0.123456789, reservedUsd: 0.5 });
    await store.recordAttempt(
      tryOf(b!.key, { status: null, outcome: 'retry', error: 'Timed out', costUsd: 0.5, mayBeBilled: true, reservedUsd: 0.5 }),
      { countAttempt: true, error: 'Timed out' },
    );
    await store.fail(
      c!.key,
      OWNER,
      'HTTP 400',
      tryOf(c!.key, { status: 400, outcome: 'failed', error: 'HTTP 400', costUsd: 0, reservedUsd: 0.5 }),
      T0 + 10,
    );
    expect(await spendOf(store)).toEqual({
      runId: OWNER,
      reservedUsd: 0,
      inFlight: 0,
      spentUsd: 0.123456789,
      mayBeBilledUsd: 0.5,
      mayBeBilledTries: 1,
      unpricedTries: 0,
    });
    expect(await store.committed(OWNER)).toEqual({ run: 0.623456789, total: 0.623456789 });
    const timedOut = (await store.item('doc-0001'))!.attempts[0]!;
    expect(timedOut).toMatchObject({ costUsd: 0.5, mayBeBilled: true });
  });

  it('a reservation of $0 (a free model under a budget) holds nothing: answered or given back, nothing is left in flight or may be billed', async () => {
    const { store } = await kind.fresh();
    await started(store);
    await store.enqueue(rows(2), T0);
    const [a] = (await store.claim(claimOpts({ limit: 1 }))).jobs;
    await store.reserve({ runId: OWNER, usd: 0, ...budget(1) });
    await store.reserve({ runId: OWNER, usd: 0, ...budget(1) });
    await answered(store, a!.key, { costUsd: 0, reservedUsd: 0 });
    await store.unreserve(OWNER, 0, T0 + 20);
    expect(await spendOf(store)).toMatchObject({ reservedUsd: 0, inFlight: 0, spentUsd: 0, mayBeBilledTries: 0 });
  });

  it("a batch's answers are the money of the run that collected it: its spend, and every run's --budget-total", async () => {
    const { store } = await kind.fresh();
    await started(store, 'lane');
    await store.enqueue(rows(2), T0);
    await store.batches.begin({ id: 's1', runId: 'lane', baseUrl: 'http://x/v1', now: T0 });
    const owner = batchOwner('s1');
    const held = (await store.claim(claimOpts({ owner, limit: 2 }))).jobs;
    const usage = { promptTokens: 10, completionTokens: 2 };
    for (const j of held) {
      // as the batch lane stores a line of the output file: the attempt's run is the submission
      const attempt = tryOf(j.key, { runId: owner, usage, costUsd: 0.25 });
      await store.complete(j.key, { owner, output: 'x', response: '{}', usage, attempt });
    }
    expect(await spendOf(store, 'lane')).toMatchObject({ spentUsd: 0.5, unpricedTries: 0 });
    await started(store, 'online');
    expect(await store.reserve({ runId: 'online', usd: 0.6, ...budget(null, 1) })).toMatchObject({ ok: false, scope: 'total' });
    expect(await store.reserve({ runId: 'online', usd: 0.4, ...budget(null, 1) })).toEqual({ ok: true });
  });

  it('--budget-total counts every run on the queue, and concurrent reservations never take more than it', async () => {
    const { store, openAnother } = await kind.fresh();
    const other = await openAnother();
    await started(store, 'run-1');
    await started(other, 'run-2');
    await store.reserve({ runId: 'run-1', usd: 1, ...budget(null, 4) });
    // 40 tries of 0.1 from each run at once, against the 3 left: exactly 30 fit, whoever wins them
    const tries = ['run-1', 'run-2'].flatMap((runId) =>
      Array.from({ length: 40 }, () => (runId === 'run-1' ? store : other).reserve({ runId, usd: 0.1, ...budget(null, 4) })),
    );
    const results = await Promise.all(tries);
    expect(results.filter((r) => r.ok)).toHaveLength(30);
    expect(results.find((r) => !r.ok)).toMatchObject({ scope: 'total' });
    expect((await store.committed('run-2')).total).toBeCloseTo(4, 9);
  });

  it('a run that ends with a reservation still out (its try never stored) leaves it committed, as may be billed, not in flight', async () => {
    const { store } = await kind.fresh();
    await started(store);
    await store.reserve({ runId: OWNER, usd: 0.25, ...budget(1) });
    await store.finishRun(OWNER, T0 + 100, 'error', NO_STATS);
    expect(await spendOf(store)).toMatchObject({ reservedUsd: 0, inFlight: 0, mayBeBilledUsd: 0.25, mayBeBilledTries: 1 });
    expect(await store.committed(OWNER)).toEqual({ run: 0.25, total: 0.25 });
  });

  it("a dead run's reservations stay committed, as may be billed, when it is reclaimed", async () => {
    const { store } = await kind.fresh();
    await started(store, 'run-dead');
    await store.reserve({ runId: 'run-dead', usd: 0.25, ...budget(null, 1) });
    await store.reserve({ runId: 'run-dead', usd: 0.25, ...budget(null, 1) });
    await store.reclaim(T0 + 100, ['run-dead']);
    expect(await spendOf(store, 'run-dead')).toMatchObject({ reservedUsd: 0, inFlight: 0, mayBeBilledUsd: 0.5, mayBeBilledTries: 2 });
    await started(store, 'run-next');
    // the dead run's money is no reservation that will settle: nothing to wait for
    expect(await store.reserve({ runId: 'run-next', usd: 0.6, ...budget(null, 1) })).toEqual({
      ok: false,
      scope: 'total',
      committedUsd: 0.5,
      othersOutUsd: 0,
    });
  });

  it('a refusal of --budget-total says how much of it other live runs hold for requests out now', async () => {
    const { store } = await kind.fresh();
    await started(store, 'run-a');
    await started(store, 'run-b');
    await started(store, 'run-gone');
    await store.reserve({ runId: 'run-a', usd: 0.5, ...budget(null, 1) });
    await store.reserve({ runId: 'run-gone', usd: 0.25, ...budget(null, 1) });
    await store.finishRun('run-gone', T0 + 1, 'finished', NO_STATS);
    await store.reserve({ runId: 'run-b', usd: 0.1, ...budget(null, 1) });
    expect(await store.reserve({ runId: 'run-b', usd: 0.2, ...budget(null, 1) })).toEqual({
      ok: false,
      scope: 'total',
      committedUsd: 0.85,
      // run-a's, not run-b's own, nor those of a run that ended
      othersOutUsd: 0.5,
    });
  });

  it("a job's cost is what all its answered tries cost: an answer it rejected (not the JSON asked for) counts, retried or failed", async () => {
    const { store } = await kind.fresh();
    await started(store);
    await store.enqueue(rows(3), T0);
    const [a, b, c] = (await store.claim(claimOpts({ limit: 3 }))).jobs;
    // a: rejected once, then kept
    await store.recordAttempt(rejected(a!.key, 'retry'), { countAttempt: true, error: 'the answer is not JSON' });
    await answered(store, a!.key, { costUsd: 0.5 });
    // b: rejected, then rejected again on its last attempt
    await store.recordAttempt(rejected(b!.key, 'retry'), { countAttempt: true, error: 'the answer is not JSON' });
    await store.fail(b!.key, OWNER, 'gave up after 2 attempts', rejected(b!.key, 'failed'), T0 + 10);
    // c: a timeout's worst case may be billed, and is counted apart; an error answer adds nothing
    await store.recordAttempt(tryOf(c!.key, { status: null, outcome: 'retry', error: 'Timed out', costUsd: 0.5, mayBeBilled: true }), {
      countAttempt: true,
      error: 'Timed out',
    });
    await store.fail(c!.key, OWNER, 'HTTP 400', tryOf(c!.key, { status: 400, outcome: 'failed', error: 'HTTP 400', costUsd: 0 }), T0 + 10);
    const cost = async (id: string) => (await store.item(id))!.job.costUsd;
    expect([await cost('doc-0000'), await cost('doc-0001'), await cost('doc-0002')]).toEqual([0.75, 0.5, null]);
    // what status sums, as the ledger counted what was spent
    const status = await store.status();
    expect(status.byModel.reduce((sum, m) => sum + m.storedUsd, 0)).toBeCloseTo(1.25, 9);
    expect(await spendOf(store)).toMatchObject({ spentUsd: 1.25, mayBeBilledUsd: 0.5 });
  });

  it("a mock answer taken back keeps in the job's cost what real runs' rejected answers cost, and drops the mock's", async () => {
    const { store } = await kind.fresh();
    await store.startRun({ id: OWNER, host: 'h', pid: 1, startedAt: T0, options: { provider: 'openai-compatible (x)' } });
    await store.enqueue(rows(2), T0);
    const [a] = (await store.claim(claimOpts({ limit: 1 }))).jobs;
    // a: a real run's answer rejected, billed, and the job failed; put back, then answered by a priced mock
    await store.fail(a!.key, OWNER, 'gave up after 1 attempt', rejected(a!.key, 'failed'), T0 + 10);
    await store.finishRun(OWNER, T0 + 20, 'drained', NO_STATS);
    expect(await store.retryFailed({}, T0 + 30)).toBe(1);
    await store.startRun({ id: 'mock', host: 'h', pid: 1, startedAt: T0 + 40, options: { provider: 'mock' } });
    const mocked = (await store.claim(claimOpts({ owner: 'mock', limit: 2, now: T0 + 40 }))).jobs;
    for (const j of mocked) {
      const usage = { promptTokens: 10, completionTokens: 2 };
      const attempt = tryOf(j.key, { runId: 'mock', usage, costUsd: 0.125 });
      await store.recordAttempt({ ...attempt, outcome: 'retry', error: 'the answer is not JSON' }, { countAttempt: true, error: 'x' });
      await store.complete(j.key, { owner: 'mock', output: 'stand-in', response: '{}', usage, attempt });
    }
    await store.finishRun('mock', T0 + 50, 'drained', NO_STATS);
    const cost = async (id: string) => (await store.item(id))!.job.costUsd;
    const stored = async () => (await store.status()).byModel.reduce((sum, m) => sum + m.storedUsd, 0);
    expect(await cost('doc-0000')).toBeCloseTo(0.5, 9);
    expect(await store.takeBackMockAnswers(T0 + 60, T0 + 60)).toBe(2);
    // the real run's billed answer stays, the mock's pretend money goes
    expect(await cost('doc-0000')).toBeCloseTo(0.25, 9);
    expect(await cost('doc-0001')).toBeNull();
    expect(await stored()).toBeCloseTo(0.25, 9);
    await store.startRun({ id: 'real', host: 'h', pid: 1, startedAt: T0 + 70, options: { provider: 'openai-compatible (x)' } });
    const again = (await store.claim(claimOpts({ owner: 'real', limit: 2, now: T0 + 70 }))).jobs;
    for (const j of again) {
      const usage = { promptTokens: 10, completionTokens: 2 };
      await store.complete(j.key, {
        owner: 'real',
        output: 'x',
        response: '{}',
        usage,
        attempt: tryOf(j.key, { runId: 'real', usage, costUsd: 0.5 }),
      });
    }
    expect(await cost('doc-0000')).toBeCloseTo(0.75, 9);
    expect(await stored()).toBeCloseTo(1.25, 9);
  });

  it('a mock answer taken back keeps the cost carried to its job from a request its item moved from', async () => {
    const { store } = await kind.fresh();
    await store.startRun({ id: OWNER, host: 'h', pid: 1, startedAt: T0, options: { provider: 'openai-compatible (x)' } });
    await store.enqueue([row('e', 'first text')], T0);
    const [a] = (await store.claim(claimOpts({ limit: 1 }))).jobs;
    await store.fail(a!.key, OWNER, 'gave up after 1 attempt', rejected(a!.key, 'failed'), T0 + 10);
    await store.finishRun(OWNER, T0 + 20, 'drained', NO_STATS);
    // the document changed: its failed job is dropped, what it was billed carried to the new one (no attempt rows of it there)
    await store.enqueue([row('e', 'second text')], T0 + 25);
    const cost = async () => (await store.item('e'))!.job.costUsd;
    const stored = async () => (await store.status()).byModel.reduce((sum, m) => sum + m.storedUsd, 0);
    expect(await cost()).toBeCloseTo(0.25, 9);
    await store.startRun({ id: 'mock', host: 'h', pid: 1, startedAt: T0 + 40, options: { provider: 'mock' } });
    const [j] = (await store.claim(claimOpts({ owner: 'mock', limit: 1, now: T0 + 40 }))).jobs;
    const usage = { promptTokens: 10, completionTokens: 2 };
    await store.complete(j!.key, {
      owner: 'mock',
      output: 'stand-in',
      response: '{}',
      usage,
      attempt: tryOf(j!.key, { runId: 'mock', usage, costUsd: 0.125 }),
    });
    await store.finishRun('mock', T0 + 50, 'drained', NO_STATS);
    expect(await cost()).toBeCloseTo(0.375, 9);
    expect(await store.takeBackMockAnswers(T0 + 60, T0 + 60)).toBe(1);
    expect(await cost()).toBeCloseTo(0.25, 9);
    expect(await stored()).toBeCloseTo(0.25, 9);
  });

  it("a job dropped unanswered (forget) keeps what its billed tries cost in the queue's cost, and a copy keeps it too", async () => {
    const { store } = await kind.fresh();
    await started(store);
    await store.enqueue(rows(3), T0);
    const [a, b, c] = (await store.claim(claimOpts({ limit: 3 }))).jobs;
    await answered(store, a!.key, { costUsd: 0.5 });
    // b: failed after two rejected answers; c: one rejected, then handed back, pending
    await store.recordAttempt(rejected(b!.key, 'retry'), { countAttempt: true, error: 'the answer is not JSON' });
    await store.fail(b!.key, OWNER, 'gave up after 2 attempts', rejected(b!.key, 'failed'), T0 + 10);
    await store.recordAttempt(rejected(c!.key, 'retry'), { countAttempt: true, error: 'the answer is not JSON' });
    await store.release(OWNER, { refund: false, now: T0 + 10 });
    const cost = async (s: Store) => (await s.status()).byModel.reduce((sum, m) => sum + m.storedUsd, 0);
    expect(await cost(store)).toBeCloseTo(1.25, 9);
    expect(await store.forgetItems({ ids: ['doc-0001', 'doc-0002'] }, { now: T0 + 20 })).toMatchObject({ droppedJobs: 2 });
    const after = await store.status();
    expect(after.counts).toMatchObject({ done: 1, failed: 0, pending: 0 });
    expect(after.total).toBe(1);
    expect(await cost(store)).toBeCloseTo(1.25, 9);
    // the same again: a second drop adds to it
    await store.enqueue(rows(4).slice(3), T0 + 30);
    const [d] = (await store.claim(claimOpts({ limit: 1 }))).jobs;
    await store.fail(d!.key, OWNER, 'gave up after 1 attempt', rejected(d!.key, 'failed'), T0 + 40);
    await store.forgetItems({ ids: ['doc-0003'] }, { now: T0 + 50 });
    expect(await cost(store)).toBeCloseTo(1.5, 9);
    // a job whose document an enqueue changed while it ran, failed after: dropped as it fails
    await store.enqueue([row('e', 'first text')], T0 + 51);
    const [e] = (await store.claim(claimOpts({ limit: 1 }))).jobs;
    await store.enqueue([row('e', 'second text')], T0 + 52);
    await store.fail(e!.key, OWNER, 'gave up after 1 attempt', rejected(e!.key, 'failed'), T0 + 53);
    expect(await cost(store)).toBeCloseTo(1.75, 9);
    await store.forgetItems({ ids: ['e'] }, { now: T0 + 54 });
    expect(await cost(store)).toBeCloseTo(1.75, 9);
    await store.finishRun(OWNER, T0 + 60, 'drained', NO_STATS);
    const { store: target } = await kind.fresh();
    await copyStore(store, target, { now: T0 + 70 });
    expect(await cost(target)).toBeCloseTo(1.75, 9);
    expect((await target.status()).total).toBe(1);
  });

  it('an answer of a model without a price is counted as such, not as $0', async () => {
    const { store } = await kind.fresh();
    await started(store);
    await store.enqueue(rows(1), T0);
    const [a] = (await store.claim(claimOpts())).jobs;
    await store.complete(a!.key, {
      owner: OWNER,
      output: 'x',
      response: '{}',
      usage: { promptTokens: 1, completionTokens: 1 },
      attempt: tryOf(a!.key, { usage: { promptTokens: 1, completionTokens: 1 }, costUsd: null }),
    });
    expect(await spendOf(store)).toMatchObject({ spentUsd: 0, unpricedTries: 1 });
    expect((await store.item('doc-0000'))!.job.costUsd).toBeNull();
  });
});
