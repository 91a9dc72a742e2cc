import { beforeEach, describe, expect, it } from 'vitest';
import { batchOwner } from '../src/store/batches.js';
import type { PostgresStore } from '../src/store/postgres/store.js';
import { resendFailedWithMaxTokens, withMaxTokens } from '../src/ingest/resend-failed.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { jobKey } from '../src/request.js';
import type { AttemptRecord, Completion, Store } from '../src/store/types.js';
import { STORE_KINDS, T0, OWNER, claimOpts, row, rows, skipUnavailable } from './helpers/stores.js';

// The store half of invariants 1-3 and 5 (docs/architecture.md): what happens to a claimed job, for
// every store kind.

const STATS = { done: 0, failed: 0, retried: 0, requests: 0, rateLimited: 0, promptTokens: 0, completionTokens: 0, jobsPerSecond: 0 };

function attempt(key: string, o: Partial<AttemptRecord> = {}): AttemptRecord {
  return { key, runId: OWNER, attempt: 1, startedAt: T0, endedAt: T0 + 250, status: 200, outcome: 'done', error: null, usage: null, ...o };
}

function completion(key: string, output = 'the answer', owner = OWNER): Completion {
  return {
    owner,
    output,
    response: JSON.stringify({ choices: [{ message: { content: output } }] }),
    usage: { promptTokens: 11, completionTokens: 7 },
    attempt: attempt(key, { runId: owner, usage: { promptTokens: 11, completionTokens: 7 } }),
  };
}

async function job(store: Store, itemId: string) {
  return (await store.item(itemId))!.job;
}

async function claimedOne(store: Store, o: Parameters<typeof claimOpts>[0] = {}) {
  const [r] = rows(1);
  await store.enqueue([r!], T0);
  const { jobs } = await store.claim(claimOpts(o));
  return { id: r!.itemId, key: jobs[0]!.key };
}

describe('withMaxTokens: a request with its completion limit changed', () => {
  it("changes that field alone, byte for byte elsewhere (a schema keeps its order); adds the model's own when there is none", () => {
    const schema = '{"type":"object","properties":{"reasoning":{"type":"string"},"answer":{"type":"string"}}}';
    const templated = `{"max_tokens":512,"messages":[{"content":"x","role":"user"}],"model":"m","response_format":{"json_schema":{"name":"t","schema":${schema},"strict":true},"type":"json_schema"}}`;
    expect(withMaxTokens(templated, 'm', 2048)).toBe(templated.replace('"max_tokens":512', '"max_tokens":2048'));
    const reasoning = '{"max_completion_tokens":100,"messages":[],"model":"o4-mini"}';
    expect(withMaxTokens(reasoning, 'o4-mini', 300)).toBe('{"max_completion_tokens":300,"messages":[],"model":"o4-mini"}');
    expect(withMaxTokens('{"messages":[],"model":"o4-mini"}', 'o4-mini', 300)).toBe(
      '{"max_completion_tokens":300,"messages":[],"model":"o4-mini"}',
    );
    expect(withMaxTokens('{"messages":[],"model":"m"}', 'm', 300)).toBe('{"max_tokens":300,"messages":[],"model":"m"}');
    // the same text inside an earlier field is not the field: the whole request written again
    expect(withMaxTokens('{"a":{"max_tokens":50},"max_tokens":50,"model":"m"}', 'm', 60)).toBe(
      '{"a":{"max_tokens":50},"max_tokens":60,"model":"m"}',
    );
  });
});

describe.each(STORE_KINDS)('store contract: job lifecycle [$name]', (kind) => {
  beforeEach((ctx) => skipUnavailable(kind, ctx));

  it('an item moved or added onto a job that failed is counted (joinedFailed): it stays failed with it', async () => {
    const { store } = await kind.fresh();
    await store.enqueue([row('a', 'same'), row('b', 'same')], T0);
    const [failed] = (await store.claim(claimOpts())).jobs;
    await store.fail(failed!.key, OWNER, 'HTTP 400: bad request', null, T0 + 1);
    expect(await store.enqueue([row('a', 'changed')], T0 + 2)).not.toHaveProperty('joinedFailed');
    // a changed back, c a new file of the same text, d another: two items on the failed job
    expect(await store.enqueue([row('a', 'same'), row('c', 'same'), row('d', 'other')], T0 + 3)).toMatchObject({
      joinedFailed: 2,
      movedItems: 1,
      newItems: 2,
      newJobs: 1,
      droppedJobs: 1,
    });
    expect((await store.status()).counts).toMatchObject({ failed: 1, pending: 1 });
    expect(await store.enqueue([row('a', 'same'), row('c', 'same')], T0 + 4)).not.toHaveProperty('joinedFailed');
  });

  it('complete stores the answer and marks done in one step; a done job is never claimed or reopened', async () => {
    const { store } = await kind.fresh();
    const { id, key } = await claimedOne(store);
    expect(await store.complete(key, completion(key))).toBe(true);
    const done = await job(store, id);
    expect(done).toMatchObject({
      state: 'done',
      output: 'the answer',
      usage: { promptTokens: 11, completionTokens: 7 },
      error: null,
      leaseOwner: null,
      leaseExpiresAt: null,
      finishedAt: T0 + 250,
      attempts: 1,
    });
    expect(JSON.parse(done.response!)).toEqual({ choices: [{ message: { content: 'the answer' } }] });
    // every way a job could be sent again leaves it alone
    expect((await store.claim(claimOpts({ now: T0 + 10 ** 9 }))).jobs).toEqual([]);
    expect(await store.reclaim(T0 + 10 ** 9, [OWNER])).toBe(0);
    expect(await store.release(OWNER, { refund: true, now: T0 + 1 })).toBe(0);
    expect(await store.retryFailed({}, T0 + 2)).toBe(0);
    await store.fail(key, OWNER, 'late failure', null, T0 + 3);
    expect(await store.startRetry(key, OWNER, T0 + 4, T0 + 5)).toBeNull();
    await store.recordAttempt(attempt(key, { outcome: 'not_counted', status: 429 }), { countAttempt: false, error: 'HTTP 429' });
    // a second answer (another run whose lease had expired) does not replace the first
    expect(await store.complete(key, completion(key, 'another answer', 'run-b'))).toBe(false);
    expect(await job(store, id)).toEqual(done);
    expect((await store.status()).counts).toEqual({ pending: 0, running: 0, done: 1, failed: 0 });
  });

  it("the mock provider's answers are taken back once for a real run: online and batch, ended or quiet, never a live one's", async () => {
    const { store } = await kind.fresh();
    const started = (id: string, provider: string) => store.startRun({ id, host: 'h', pid: 1, startedAt: T0, options: { provider } });
    await store.enqueue(rows(5), T0);
    const answer = async (owner: string, limit: number) => {
      const { jobs } = await store.claim(claimOpts({ owner, limit }));
      for (const j of jobs) await store.complete(j.key, completion(j.key, 'stand-in', owner));
      return jobs.map((j) => j.key);
    };
    await started('mock-ended', 'mock');
    const mocked = await answer('mock-ended', 2);
    await store.finishRun('mock-ended', T0 + 1000, 'drained', STATS);
    await started('mock-batch', 'mock');
    await store.batches.begin({ id: 's1', runId: 'mock-batch', baseUrl: 'mock://', now: T0 });
    const batched = await answer(batchOwner('s1'), 1);
    await store.finishRun('mock-batch', T0 + 1000, 'drained', STATS);
    await started('real', 'openai-compatible (https://api.openai.com/v1)');
    const real = await answer('real', 1);
    await started('mock-live', 'mock');
    const live = await answer('mock-live', 1);
    await store.heartbeat('mock-live', T0 + 5000, T0 + 65_000, STATS);

    // what an estimate for a real run counts: the same jobs, at no attempts
    const toRun: Array<{ key: string; attempts: number; mockAnswered?: boolean }> = [];
    for await (const j of store.jobsToRun(T0 + 6000, { mockAnswersBefore: T0 + 4000 })) toRun.push(j);
    expect(toRun.map((j) => j.key).sort()).toEqual([...mocked, ...batched].sort());
    expect(toRun.every((j) => j.attempts === 0 && j.mockAnswered === true)).toBe(true); // said so: status counts them done
    expect(await store.takeBackMockAnswers(T0 + 6000, T0 + 4000)).toBe(3);
    // pending again, and only those: the real run's answer and the live mock run's stay
    const again = (await store.claim(claimOpts({ owner: 'again', limit: 10, now: T0 + 7000 }))).jobs.map((j) => j.key);
    expect(again.sort()).toEqual([...mocked, ...batched].sort());
    expect(again).not.toContain(real[0]);
    expect(again).not.toContain(live[0]);
    expect((await store.status()).counts).toMatchObject({ done: 2, pending: 0, running: 3 });
    // once per mock run: answered now by a real run, a job is not taken back by the next real run
    await store.complete(mocked[0]!, completion(mocked[0]!, 'the real answer', 'again'));
    expect(await store.takeBackMockAnswers(T0 + 8000, T0 + 4000)).toBe(0);
    expect((await store.status()).counts.done).toBe(3);
  });

  it("a job a real run answered is never taken back, nor one no item needs; the mock runs' pretend money goes", async () => {
    const { store } = await kind.fresh();
    const started = (id: string, provider: string) => store.startRun({ id, host: 'h', pid: 1, startedAt: T0, options: { provider } });
    const [kept, late, orphan] = rows(3);
    await store.enqueue([kept!, late!, orphan!], T0);
    await started('mock', 'mock');
    const held = (await store.claim(claimOpts({ owner: 'mock', limit: 3 }))).jobs.map((j) => j.key);
    await store.reserve({ runId: 'mock', usd: 0.5, runBudget: null, totalBudget: 10, now: T0 });
    // the mock run, paused past its lease: a real run answers the second job first, paid
    await started('real', 'openai-compatible (https://api.openai.com/v1)');
    await store.complete(held[1]!, completion(held[1]!, 'the real answer', 'real'));
    for (const key of held) await store.complete(key, completion(key, 'stand-in', 'mock'));
    // the third document was edited and enqueued again: its old job is needed by no item
    await store.enqueue([row(orphan!.itemId, 'the edited text')], T0 + 1);
    await store.finishRun('mock', T0 + 1000, 'drained', STATS);

    expect(await store.takeBackMockAnswers(T0 + 2000, T0)).toBe(1);
    expect((await job(store, kept!.itemId)).state).toBe('pending');
    expect((await job(store, late!.itemId)).output).toBe('the real answer');
    expect((await store.committed('real')).total).toBe(0);
    // the stand-in no item needed is gone, not kept done: its document enqueued as it was before the
    // edit is sent by a real run, where it found the mock's answer and exported it as the document's
    await store.enqueue([orphan!], T0 + 3000);
    expect(await job(store, orphan!.itemId)).toMatchObject({ state: 'pending', output: null });
    expect((await store.status()).counts).toMatchObject({ pending: 2, done: 1 });
  });

  it('complete records the finishing attempt with its usage and latency', async () => {
    const { store } = await kind.fresh();
    const { id, key } = await claimedOne(store);
    const c = completion(key);
    await store.complete(key, { ...c, attempt: { ...c.attempt, costUsd: 0.0125 } });
    const detail = (await store.item(id))!;
    expect(detail.attempts).toEqual([
      {
        key,
        runId: OWNER,
        attempt: 1,
        startedAt: T0,
        endedAt: T0 + 250,
        latencyMs: 250,
        status: 200,
        outcome: 'done',
        error: null,
        usage: { promptTokens: 11, completionTokens: 7 },
        costUsd: 0.0125,
        mayBeBilled: false,
      },
    ]);
    expect(detail.job.costUsd).toBe(0.0125);
  });

  it('an answer or error with a NUL character is stored, and the answers committed with it too (PostgreSQL text cannot hold U+0000)', async () => {
    const { store } = await kind.fresh();
    await store.enqueue(rows(3), T0);
    const [a, b, c] = (await store.claim(claimOpts())).jobs;
    // one turn of the event loop: the three are one group commit
    const stored = await Promise.all([
      store.complete(a!.key, completion(a!.key, 'before\u0000after')),
      store.complete(b!.key, completion(b!.key, 'plain')),
      store.fail(
        c!.key,
        OWNER,
        'HTTP 400: bad \u0000 byte',
        attempt(c!.key, { status: 400, outcome: 'failed', error: 'HTTP 400: bad \u0000 byte' }),
        T0 + 2,
      ),
    ]);
    expect(stored.slice(0, 2)).toEqual([true, true]);
    // SQLite keeps the character; PostgreSQL stores the replacement character in its place
    const nul = kind.name === 'postgres' ? '\uFFFD' : '\u0000';
    expect((await job(store, 'doc-0000')).output).toBe(`before${nul}after`);
    expect((await job(store, 'doc-0001')).output).toBe('plain');
    expect(await job(store, 'doc-0002')).toMatchObject({ state: 'failed', error: `HTTP 400: bad ${nul} byte` });
    expect((await store.item('doc-0002'))!.attempts[0]!.error).toBe(`HTTP 400: bad ${nul} byte`);
  });

  it('fail marks a held job failed with its reason and attempt; not when another run holds it', async () => {
    const { store } = await kind.fresh();
    const { id, key } = await claimedOne(store);
    await store.fail(key, 'run-b', 'not mine', null, T0 + 1);
    expect((await job(store, id)).state).toBe('running');
    await store.fail(
      key,
      OWNER,
      'HTTP 400: bad request',
      attempt(key, { status: 400, outcome: 'failed', error: 'HTTP 400: bad request' }),
      T0 + 2,
    );
    const j = await job(store, id);
    expect(j).toMatchObject({
      state: 'failed',
      error: 'HTTP 400: bad request',
      leaseOwner: null,
      leaseExpiresAt: null,
      finishedAt: T0 + 2,
      attempts: 1,
    });
    expect((await store.item(id))!.attempts.map((a) => [a.status, a.outcome])).toEqual([[400, 'failed']]);
    expect((await store.claim(claimOpts({ now: T0 + 10 ** 9 }))).jobs).toEqual([]);
  });

  it('a held job no item needs any more is dropped when it fails: retry-failed can never send it', async () => {
    const { store } = await kind.fresh();
    const { id, key } = await claimedOne(store);
    // the document was edited while its job ran: the item now points at a new job
    await store.enqueue([row(id, 'the edited text')], T0 + 1);
    await store.fail(key, OWNER, 'HTTP 400: bad request', attempt(key, { status: 400, outcome: 'failed', error: 'HTTP 400' }), T0 + 2);
    expect((await store.status()).counts).toEqual({ pending: 1, running: 0, done: 0, failed: 0 });
    expect(await store.retryFailed({}, T0 + 3)).toBe(0);
    const { jobs } = await store.claim(claimOpts({ now: T0 + 4 }));
    expect(jobs.map((j) => j.key)).toEqual([(await job(store, id)).key]);
    expect(jobs[0]!.key).not.toBe(key);
  });

  it('retry-failed drops a failed job no item needs (one an older version failed after its document changed)', async () => {
    const { store } = await kind.fresh();
    const { id, key } = await claimedOne(store);
    await store.fail(key, OWNER, 'HTTP 400: bad request', null, T0 + 1);
    // what versions before the drop on failure left behind: the item gone elsewhere, the failed job kept
    if (store instanceof SqliteStore) store.db.prepare('DELETE FROM items WHERE id = ?').run(id);
    else await (store as PostgresStore).pool.query('DELETE FROM items WHERE id = $1', [id]);
    expect((await store.status()).counts.failed).toBe(1);
    expect(await store.retryFailed({}, T0 + 2)).toBe(0);
    // gone, so it neither waits as failed (a drained run would exit 2 for it) nor is sent
    expect((await store.status()).counts).toEqual({ pending: 0, running: 0, done: 0, failed: 0 });
    expect((await store.claim(claimOpts({ now: T0 + 3 }))).jobs).toEqual([]);
  });

  it('release gives held jobs back to pending, with or without the attempt', async () => {
    const { store } = await kind.fresh();
    await store.enqueue(rows(3), T0);
    await store.claim(claimOpts({ limit: 2 }));
    await store.claim(claimOpts({ owner: 'run-b', limit: 1 }));
    expect(await store.release(OWNER, { refund: false, now: T0 + 1 })).toBe(2);
    expect(await job(store, 'doc-0000')).toMatchObject({ state: 'pending', attempts: 1, leaseOwner: null, leaseExpiresAt: null });
    expect(await job(store, 'doc-0002')).toMatchObject({ state: 'running', leaseOwner: 'run-b' });
    expect(await store.release('run-b', { refund: true, now: T0 + 2 })).toBe(1);
    expect(await job(store, 'doc-0002')).toMatchObject({ state: 'pending', attempts: 0 });
    // released jobs are claimable again, in their old order
    const again = await store.claim(claimOpts({ now: T0 + 3 }));
    expect(again.jobs.map((j) => j.attempts)).toEqual([2, 2, 1]);
  });

  it('reclaim takes back expired leases and dead owners, marks dead runs ended, and leaves live leases', async () => {
    const fx = await kind.fresh();
    const { store } = fx;
    await store.enqueue(rows(6), T0);
    for (const id of ['run-dead', 'run-live', 'run-slow']) {
      await store.startRun({ id, host: 'h', pid: 1, startedAt: T0, options: {} });
    }
    await store.claim(claimOpts({ owner: 'run-slow', limit: 2, leaseUntil: T0 + 100 }));
    await store.claim(claimOpts({ owner: 'run-dead', limit: 2, leaseUntil: T0 + 10_000 }));
    await store.claim(claimOpts({ owner: 'run-live', limit: 2, leaseUntil: T0 + 10_000 }));
    expect(await store.reclaim(T0 + 100, [])).toBe(0); // a lease that ends now is still held
    expect(await store.reclaim(T0 + 101, ['run-dead'])).toBe(4);
    const states = await Promise.all(['doc-0000', 'doc-0001', 'doc-0002', 'doc-0003', 'doc-0004', 'doc-0005'].map((id) => job(store, id)));
    // claimed before their runs' first heartbeat: taken as sent, their attempts used (unsent.ts)
    expect(states.map((j) => [j.state, j.leaseOwner, j.attempts])).toEqual([
      ['pending', null, 1],
      ['pending', null, 1],
      ['pending', null, 1],
      ['pending', null, 1],
      ['running', 'run-live', 1],
      ['running', 'run-live', 1],
    ]);
    const runs = await store.activeRuns();
    expect(runs.map((r) => r.id).sort()).toEqual(['run-live', 'run-slow']);
    const all = [];
    for await (const r of store.copier.dumpRuns()) all.push(r);
    expect(all.map((r) => [r.id, r.endedAt, r.exitReason])).toEqual([
      ['run-dead', T0 + 101, 'died'],
      ['run-live', null, null],
      ['run-slow', null, null],
    ]);
    // a second store sees the same thing (the reclaim committed)
    const other = await fx.openAnother();
    expect((await other.status()).counts).toEqual({ pending: 4, running: 2, done: 0, failed: 0 });
  });

  it("reclaim leaves a spared owner's expired leases (a run stopped with Ctrl-Z), and still takes the dead's and others' expired ones", async () => {
    const { store } = await kind.fresh();
    await store.enqueue(rows(6), T0);
    for (const id of ['run-stopped', 'run-dead', 'run-slow']) await store.startRun({ id, host: 'h', pid: 1, startedAt: T0, options: {} });
    for (const owner of ['run-stopped', 'run-dead', 'run-slow']) await store.claim(claimOpts({ owner, limit: 2, leaseUntil: T0 + 100 }));
    expect(await store.reclaim(T0 + 101, ['run-dead'], ['run-stopped'])).toBe(4);
    const held = await Promise.all(['doc-0000', 'doc-0001'].map((id) => job(store, id)));
    expect(held.map((j) => [j.state, j.leaseOwner])).toEqual([
      ['running', 'run-stopped'],
      ['running', 'run-stopped'],
    ]);
    expect((await store.status()).counts).toMatchObject({ pending: 4, running: 2 });
    // once it is no longer spared (continued and silent, or gone), its expired leases come back
    expect(await store.reclaim(T0 + 102, [])).toBe(2);
  });

  it('heartbeat renews the leases the run holds and stores its stats', async () => {
    const { store } = await kind.fresh();
    await store.startRun({ id: OWNER, host: 'h', pid: 42, startedAt: T0, options: { concurrency: 4 } });
    const { id } = await claimedOne(store, { leaseUntil: T0 + 100 });
    const stats = { ...STATS, done: 3, jobsPerSecond: 1.5 };
    await store.heartbeat(OWNER, T0 + 90, T0 + 1000, stats);
    expect((await job(store, id)).leaseExpiresAt).toBe(T0 + 1000);
    expect(await store.reclaim(T0 + 500, [])).toBe(0);
    const [run] = await store.activeRuns();
    expect(run).toMatchObject({ id: OWNER, host: 'h', pid: 42, heartbeatAt: T0 + 90, endedAt: null, options: { concurrency: 4 }, stats });
    await store.finishRun(OWNER, T0 + 2000, 'finished', { ...stats, done: 4 });
    expect(await store.activeRuns()).toEqual([]);
    expect((await store.status()).lastRun).toMatchObject({ id: OWNER, endedAt: T0 + 2000, exitReason: 'finished', stats: { done: 4 } });
  });

  it("status's last run is the last that sent something: a run that found nothing to do does not hide it", async () => {
    const { store } = await kind.fresh();
    await store.startRun({ id: 'worked', host: 'h', pid: 1, startedAt: T0, options: {} });
    await store.finishRun('worked', T0 + 1000, 'drained', { ...STATS, requests: 3, done: 3 });
    await store.startRun({ id: 'idle', host: 'h', pid: 2, startedAt: T0 + 5000, options: {} });
    await store.finishRun('idle', T0 + 5001, 'drained', { ...STATS, requests: 0 });
    expect((await store.status()).lastRun).toMatchObject({ id: 'worked', stats: { done: 3 } });
    // one under way is the last run, whatever it has sent so far
    await store.startRun({ id: 'now', host: 'h', pid: 3, startedAt: T0 + 9000, options: {} });
    expect((await store.status()).lastRun).toMatchObject({ id: 'now' });
  });

  it("status's last run is the one that worked last: a run that died counts to its last heartbeat, not to when its jobs were taken back", async () => {
    const { store } = await kind.fresh();
    await store.startRun({ id: 'killed', host: 'h', pid: 1, startedAt: T0, options: {} });
    await store.heartbeat('killed', T0 + 2000, T0 + 60_000, { ...STATS, requests: 5, done: 5 });
    await store.startRun({ id: 'other', host: 'h', pid: 2, startedAt: T0 + 100, options: {} });
    await store.finishRun('other', T0 + 5000, 'drained', { ...STATS, requests: 10, done: 10 });
    await store.reclaim(T0 + 61_000, ['killed']);
    expect((await store.status()).lastRun).toMatchObject({ id: 'other' });
    // one that ended before the killed one's last heartbeat is not
    await store.startRun({ id: 'early', host: 'h', pid: 3, startedAt: T0 + 200, options: {} });
    await store.finishRun('early', T0 + 1000, 'drained', { ...STATS, requests: 1, done: 1 });
    expect((await store.status()).lastRun).toMatchObject({ id: 'other' });
  });

  it('startRetry raises attempts and renews the lease only for the owner', async () => {
    const { store } = await kind.fresh();
    const { id, key } = await claimedOne(store);
    expect(await store.startRetry(key, 'run-b', T0 + 1, T0 + 2)).toBeNull();
    expect(await store.startRetry(key, OWNER, T0 + 3, T0 + 5000)).toBe(2);
    expect(await job(store, id)).toMatchObject({ attempts: 2, leaseExpiresAt: T0 + 5000, state: 'running', leaseOwner: OWNER });
  });

  it('recordAttempt keeps a counted attempt and gives back one that does not count', async () => {
    const { store } = await kind.fresh();
    const { id, key } = await claimedOne(store);
    await store.recordAttempt(attempt(key, { status: 503, outcome: 'retry', error: 'HTTP 503' }), {
      countAttempt: true,
      error: 'HTTP 503',
    });
    expect(await job(store, id)).toMatchObject({ attempts: 1, error: 'HTTP 503', state: 'running' });
    await store.recordAttempt(attempt(key, { attempt: 1, status: 429, outcome: 'not_counted', error: 'HTTP 429' }), {
      countAttempt: false,
      error: 'HTTP 429',
    });
    expect(await job(store, id)).toMatchObject({ attempts: 0, error: 'HTTP 429' });
    // another run's record does not touch the job's counter
    await store.recordAttempt(attempt(key, { runId: 'run-b', outcome: 'not_counted' }), { countAttempt: false, error: 'x' });
    expect(await job(store, id)).toMatchObject({ attempts: 0, error: 'HTTP 429' });
    expect((await store.item(id))!.attempts.map((a) => a.outcome)).toEqual(['retry', 'not_counted', 'not_counted']);
    // a try the run stopped: its row says why, the job keeps its last error
    await store.recordAttempt(attempt(key, { outcome: 'released', error: 'stopped while the request was in flight' }), {
      countAttempt: false,
      error: null,
    });
    expect(await job(store, id)).toMatchObject({ error: 'HTTP 429' });
    expect((await store.item(id))!.attempts.at(-1)).toMatchObject({
      outcome: 'released',
      error: 'stopped while the request was in flight',
    });
  });

  it('failed jobs sent again with a higher max_tokens: only the items of those the filter takes move to the new request; the failed job goes', async () => {
    const { store } = await kind.fresh();
    // doc-0000 and doc-0001 share a job (one request); doc-0002 has its own; doc-0003 is answered
    const shared = row('doc-0000', 'same text', { meta: { n: 1 } });
    await store.enqueue(
      [shared, { ...shared, itemId: 'doc-0001', source: 'b.txt', meta: null }, row('doc-0002', 'other'), row('doc-0003', 'done')],
      T0,
    );
    const { jobs } = await store.claim(claimOpts());
    const keyOf = async (id: string) => (await job(store, id)).key;
    // its cut-off answer was billed
    const cutOff = attempt(await keyOf('doc-0000'), {
      outcome: 'failed',
      usage: { promptTokens: 10, completionTokens: 50 },
      costUsd: 0.25,
    });
    await store.fail(await keyOf('doc-0000'), OWNER, 'the answer was cut off at max_tokens', cutOff, T0 + 1);
    await store.fail(await keyOf('doc-0002'), OWNER, 'HTTP 400: bad', null, T0 + 1);
    await store.complete(await keyOf('doc-0003'), completion(await keyOf('doc-0003')));
    expect(jobs).toHaveLength(3);
    const page = await store.failedJobsToResend({ errorContains: 'CUT OFF' }, null, 10);
    expect(page.map((j) => [j.request, j.model, j.items])).toEqual([
      [
        shared.request,
        'gpt-test',
        [
          { id: 'doc-0000', source: 'doc-0000.txt', meta: { n: 1 } },
          { id: 'doc-0001', source: 'b.txt', meta: null },
        ],
      ],
    ]);
    expect(await store.failedJobsToResend({}, page[0]!, 10)).toHaveLength(1);
    expect(await resendFailedWithMaxTokens(store, { errorContains: 'cut off' }, 900, T0 + 2)).toEqual({
      jobs: 1,
      items: 2,
      alreadyAt: 0,
      joined: 0,
    });
    const moved = await job(store, 'doc-0001');
    expect([moved.state, moved.attempts, JSON.parse(moved.request).max_tokens, moved.key]).toEqual([
      'pending',
      0,
      900,
      await keyOf('doc-0000'),
    ]);
    expect(await store.item('doc-0000')).toMatchObject({ source: 'doc-0000.txt', meta: { n: 1 } });
    // the money of its billed try goes with its items: status' cost keeps it
    expect(moved.costUsd).toBe(0.25);
    expect((await store.status()).byModel.reduce((sum, m) => sum + m.storedUsd, 0)).toBeCloseTo(0.25, 9);
    // the other failure and the answer are as they were; the failed job no item needs is gone
    expect((await job(store, 'doc-0002')).state).toBe('failed');
    expect((await job(store, 'doc-0003')).state).toBe('done');
    expect((await store.status()).counts).toEqual({ pending: 1, running: 0, done: 1, failed: 1 });
    // the same limit again: nothing to change
    await store.fail((await store.claim(claimOpts({ now: T0 + 3 }))).jobs[0]!.key, OWNER, 'cut off again', null, T0 + 4);
    expect(await resendFailedWithMaxTokens(store, { errorContains: 'cut off' }, 900, T0 + 5)).toEqual({
      jobs: 0,
      items: 0,
      alreadyAt: 1,
      joined: 0,
    });
    // nor lowered
    expect(await resendFailedWithMaxTokens(store, { errorContains: 'cut off' }, 800, T0 + 5)).toMatchObject({ jobs: 0, alreadyAt: 1 });
  });

  it("an enqueue of a changed document drops its failed job and keeps what the job's billed tries cost, on the new job", async () => {
    const { store } = await kind.fresh();
    await store.enqueue([row('doc-0000', 'first text'), row('doc-0001', 'other text')], T0);
    const { jobs } = await store.claim(claimOpts());
    expect(jobs).toHaveLength(2);
    const [first, other] = [await job(store, 'doc-0000'), await job(store, 'doc-0001')];
    const billed = (key: string, usd: number) =>
      attempt(key, { outcome: 'failed', usage: { promptTokens: 10, completionTokens: 50 }, costUsd: usd });
    await store.fail(first.key, OWNER, 'the answer was cut off at max_tokens', billed(first.key, 0.25), T0 + 1);
    await store.fail(other.key, OWNER, 'the answer was cut off at max_tokens', billed(other.key, 0.5), T0 + 1);
    const storedUsd = async () => (await store.status()).byModel.reduce((sum, m) => sum + m.storedUsd, 0);
    expect(await storedUsd()).toBeCloseTo(0.75, 9);
    // doc-0000's document changed: its item moves to a new job, the failed one no item needs is dropped
    const result = await store.enqueue([row('doc-0000', 'second text')], T0 + 2);
    expect(result).toMatchObject({ movedItems: 1, droppedJobs: 1 });
    const moved = await job(store, 'doc-0000');
    expect([moved.state, moved.key === first.key, moved.costUsd]).toEqual(['pending', false, 0.25]);
    expect(await storedUsd()).toBeCloseTo(0.75, 9);
    expect((await store.status()).counts).toEqual({ pending: 1, running: 0, done: 0, failed: 1 });
    // the new job answered: its cost is its answer's and the billed try's before
    const [again] = (await store.claim(claimOpts({ now: T0 + 3 }))).jobs;
    const c = completion(again!.key);
    await store.complete(again!.key, { ...c, attempt: { ...c.attempt, costUsd: 0.125 } });
    expect((await job(store, 'doc-0000')).costUsd).toBeCloseTo(0.375, 9);
    expect(await storedUsd()).toBeCloseTo(0.875, 9);
  });

  it('an enqueue of documents retry-failed --max-tokens raised, with their old request, keeps them at the raise: nothing is sent again', async () => {
    const { store } = await kind.fresh();
    const cutOff = (id: string) => row(id, `text of ${id}`);
    await store.enqueue([cutOff('doc-0000'), cutOff('doc-0001'), row('doc-0002', 'fine')], T0);
    const keyOf = async (id: string) => (await job(store, id)).key;
    // claim all; `cut` fail as cut off, the others answered
    const settle = async (now: number, cut: readonly string[]) => {
      const cutKeys = await Promise.all(cut.map(keyOf));
      for (const j of (await store.claim(claimOpts({ now }))).jobs) {
        if (cutKeys.includes(j.key)) await store.fail(j.key, OWNER, 'the answer was cut off at max_tokens', null, now + 1);
        else await store.complete(j.key, completion(j.key));
      }
    };
    await settle(T0, ['doc-0000', 'doc-0001']);
    expect(await resendFailedWithMaxTokens(store, { errorContains: 'cut off' }, 900, T0 + 2)).toMatchObject({ jobs: 2, items: 2 });
    const at900 = await keyOf('doc-0001');
    // doc-0000 cut off at 900 too: raised again
    await settle(T0 + 3, ['doc-0000']);
    expect(await resendFailedWithMaxTokens(store, { errorContains: 'cut off' }, 2000, T0 + 5)).toMatchObject({ jobs: 1, items: 1 });
    const at2000 = await keyOf('doc-0000');
    await settle(T0 + 6, []);
    expect((await store.status()).counts).toMatchObject({ done: 3, pending: 0, failed: 0 });
    // the next day's enqueue of the folder, with the options as before: the cut-off requests again
    const again = await store.enqueue([cutOff('doc-0000'), cutOff('doc-0001'), row('doc-0002', 'fine'), row('doc-0003', 'new')], T0 + 8);
    expect(again).toMatchObject({
      keptRaised: 2,
      newJobs: 1,
      newItems: 1,
      movedItems: 0,
      unchanged: 3,
      droppedJobs: 0,
      orphanedAnswers: 0,
    });
    expect([await keyOf('doc-0000'), await keyOf('doc-0001')]).toEqual([at2000, at900]);
    expect((await store.status()).counts).toMatchObject({ done: 3, pending: 1, failed: 0 });
    // the first raise's request leads to the second raise too
    const first = cutOff('doc-0000');
    const request = withMaxTokens(first.request, first.model, 900);
    expect(await store.enqueue([{ ...first, request, key: jobKey(request) }], T0 + 9)).toMatchObject({ keptRaised: 1, unchanged: 1 });
    // a document changed is a request of its own
    expect(await store.enqueue([row('doc-0001', 'text of doc-0001, edited')], T0 + 10)).toMatchObject({ movedItems: 1 });
    expect(await store.enqueue([row('doc-0001', 'text of doc-0001, edited')], T0 + 10)).not.toHaveProperty('keptRaised');
  });

  it('cutOffAnswersToResend pages through the done answers cut off at max_tokens, with their items; not one that only says "length"', async () => {
    const { store } = await kind.fresh();
    await store.enqueue(rows(5), T0);
    const { jobs } = await store.claim(claimOpts());
    const finish = ['length', 'stop', 'length', 'stop', 'length'];
    for (const [i, j] of jobs.entries()) {
      const c = completion(j.key, i === 1 ? 'the word "length" in an answer' : 'an answer');
      const body = { choices: [{ message: { content: c.output }, finish_reason: finish[i] }] };
      // the fourth says "length" in its text, escaped in the body: the SQL passes it, its finish does not
      const response = i === 3 ? JSON.stringify({ ...body, note: 'length' }) : JSON.stringify(body);
      await store.complete(j.key, { ...c, response });
    }
    const seen: string[] = [];
    let after: Parameters<Store['cutOffAnswersToResend']>[0] = null;
    for (let pages = 0; pages < 10; pages++) {
      const page = await store.cutOffAnswersToResend(after, 2);
      if (page.last === null) break;
      after = page.last;
      seen.push(...page.jobs.map((j) => `${j.items[0]!.id}:${j.error}`));
    }
    expect(seen).toEqual(['doc-0000:null', 'doc-0002:null', 'doc-0004:null']);
  });

  it('pages through failed jobs enqueued at one moment (one created_at): each sent again once', async () => {
    const { store } = await kind.fresh();
    await store.enqueue(rows(1_100), T0);
    const { jobs } = await store.claim(claimOpts({ limit: 1_100 }));
    for (const j of jobs) await store.fail(j.key, OWNER, 'cut off', null, T0 + 1);
    expect(await resendFailedWithMaxTokens(store, {}, 64, T0 + 2)).toEqual({ jobs: 1_100, items: 1_100, alreadyAt: 0, joined: 0 });
    expect((await store.status()).counts).toEqual({ pending: 1_100, running: 0, done: 0, failed: 0 });
  });

  it('retryFailed puts failed jobs back with fresh attempts, all or by error text', async () => {
    const { store } = await kind.fresh();
    await store.enqueue(rows(3), T0);
    const { jobs } = await store.claim(claimOpts());
    await store.fail(jobs[0]!.key, OWNER, 'HTTP 400: Context Length exceeded', null, T0 + 1);
    await store.fail(jobs[1]!.key, OWNER, 'HTTP 404: no such model', null, T0 + 1);
    await store.complete(jobs[2]!.key, completion(jobs[2]!.key));
    expect(await store.retryFailed({ errorContains: 'context LENGTH' }, T0 + 2)).toBe(1);
    expect(await job(store, 'doc-0000')).toMatchObject({ state: 'pending', attempts: 0, error: null, finishedAt: null, runAfter: 0 });
    expect((await job(store, 'doc-0001')).state).toBe('failed');
    expect(await store.retryFailed({ errorContains: 'nothing like it' }, T0 + 3)).toBe(0);
    // all but those whose error holds a text
    expect(await store.retryFailed({ errorLacks: 'NO SUCH' }, T0 + 4)).toBe(0);
    expect((await job(store, 'doc-0001')).state).toBe('failed');
    expect(await store.retryFailed({}, T0 + 4)).toBe(1);
    expect((await store.status()).counts).toEqual({ pending: 2, running: 0, done: 1, failed: 0 });
    expect((await store.claim(claimOpts({ now: T0 + 5 }))).jobs.map((j) => j.attempts)).toEqual([1, 1]);
  });

  it('retryFailed matches the error text case-insensitively beyond ASCII', async () => {
    const { store } = await kind.fresh();
    const { key } = await claimedOne(store);
    await store.fail(key, OWNER, 'HTTP 404: Modèle introuvable (ÉCHEC)', null, T0 + 1);
    expect(await store.retryFailed({ errorContains: 'MODÈLE INTROUVABLE (échec)' }, T0 + 2)).toBe(1);
  });
});
