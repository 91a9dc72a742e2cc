import { existsSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { PostgresStore } from '../src/store/postgres/store.js';
import { copyStore } from '../src/store/copy.js';
import type { JobRow, Store } from '../src/store/types.js';
import {
  STORE_KINDS,
  T0,
  OWNER,
  claimOpts,
  exported,
  freshPgUrl,
  pgJobWrites,
  row,
  rows,
  skipUnavailable,
  NO_STATS,
} from './helpers/stores.js';
import { tempDir } from './helpers/tmp.js';
import { gonePid } from './helpers/pids.js';
import { spawn } from 'node:child_process';
import Database from 'better-sqlite3';
import { BIN, cliEnv, collect, runCli } from './helpers/cli.js';
import { openExistingStore } from '../src/report/open-existing.js';

const postgres = STORE_KINDS.find((k) => k.name === 'postgres')!;
const STATS = { done: 1, failed: 1, retried: 1, requests: 3, rateLimited: 0, promptTokens: 9, completionTokens: 9, jobsPerSecond: 0.5 };

/** A queue with every state: done (with a retry before, its items moved off it since), failed, pending after a try, running, untouched; shared jobs; runs. */
async function populate(store: Store): Promise<void> {
  await store.enqueue(
    [
      row('done', 'd', { meta: { lang: 'fr', n: [1, 2] } }),
      row('done-twin', 'd'),
      row('failed', 'f', { priority: -1 }),
      row('retrying', 'r'),
      row('running', 'u', { model: 'other' }),
      ...rows(3, { prefix: 'later', priority: 3 }),
    ],
    T0,
  );
  // what runs learned of the provider's limits: a copy starts at the right pace, not probing again
  await store.saveLaneLimits({ baseUrl: 'https://api.example/v1', model: 'm', rpm: 500, tpm: 200_000, source: 'headers', at: T0 });
  await store.saveLaneLimits({ baseUrl: 'https://api.example/v1', model: 'other', rpm: 60, tpm: null, source: '429s', at: T0 + 1 });
  // what an enqueue rejected: status names it in the copy too
  await store.keepRejections([
    { source: 'in.jsonl', rejected: 2, first: [{ path: 'in.jsonl', line: 2, reason: 'malformed JSON' }], at: T0 },
  ]);
  await store.startRun({ id: 'run-old', host: 'h', pid: 1, startedAt: T0, options: { concurrency: 2 } });
  await store.finishRun('run-old', T0 + 50, 'finished', STATS);
  await store.startRun({ id: OWNER, host: 'h', pid: 2, startedAt: T0 + 100, options: {} });
  const { jobs } = await store.claim(claimOpts({ now: T0 + 100, limit: 4 }));
  const [failed, done, retrying, running] = jobs;
  const attempt = (key: string, o: object) => ({
    key,
    runId: OWNER,
    attempt: 1,
    startedAt: T0 + 100,
    endedAt: T0 + 140,
    status: 200,
    outcome: 'done' as const,
    error: null,
    usage: null,
    ...o,
  });
  await store.fail(
    failed!.key,
    OWNER,
    'HTTP 400: bad',
    attempt(failed!.key, { status: 400, outcome: 'failed', error: 'HTTP 400: bad' }),
    T0 + 150,
  );
  await store.recordAttempt(attempt(done!.key, { status: 503, outcome: 'retry', error: 'HTTP 503' }), {
    countAttempt: true,
    error: 'HTTP 503',
  });
  await store.startRetry(done!.key, OWNER, T0 + 160, T0 + 10_000);
  // money: a reservation still out (the live run's), an answer with its cost, a try that may be billed
  await store.reserve({ runId: OWNER, usd: 0.25, runBudget: null, totalBudget: 10, now: T0 + 165 });
  await store.complete(done!.key, {
    owner: OWNER,
    output: "l'answer ✓",
    response: '{"id":"x"}',
    usage: { promptTokens: 12, completionTokens: 3 },
    attempt: attempt(done!.key, {
      attempt: 2,
      startedAt: T0 + 170,
      endedAt: T0 + 230,
      usage: { promptTokens: 12, completionTokens: 3 },
      costUsd: 0.0012,
    }),
  });
  await store.recordAttempt(
    attempt(retrying!.key, { status: null, outcome: 'retry', error: 'ETIMEDOUT', costUsd: 0.003, mayBeBilled: true }),
    { countAttempt: true, error: 'ETIMEDOUT' },
  );
  await store.release(OWNER, { refund: false, now: T0 + 240 }); // retrying and running go back to pending...
  // ...and the first of them is held again by a run still working when the copy starts
  await store.claim(claimOpts({ now: T0 + 250, limit: 1, owner: 'run-live' }));
  // the answered job's two items take another text: its answer is kept, needed by no item (orphanedAnswers)
  await store.enqueue([row('done', 'd, edited', { meta: { lang: 'fr', n: [1, 2] } }), row('done-twin', 'd, edited')], T0 + 260);
  expect((await store.status()).orphanedAnswers).toBe(1);
  expect(running!.model).toBe('other');
  expect((await store.status()).spend.find((r) => r.id === OWNER)!.spend).toMatchObject({
    reservedUsd: 0.25,
    inFlight: 1,
    spentUsd: 0.0012,
    mayBeBilledUsd: 0.003,
    mayBeBilledTries: 1,
  });
}

async function dumpJobs(store: Store): Promise<JobRow[]> {
  const out = [];
  for await (const j of store.copier.dumpJobs()) out.push(j);
  return out;
}

async function everything(store: Store) {
  const attempts = [];
  for await (const a of store.copier.dumpAttempts()) attempts.push(a);
  const items = [];
  for await (const i of store.copier.dumpItems()) items.push(i);
  // runs are compared by their money here; the runs themselves below (a copy closes the open ones)
  const { activeRuns: _a, lastRun: _l, spend, ...status } = await store.status();
  return {
    export: await exported(store),
    jobs: await dumpJobs(store),
    items,
    attempts,
    status,
    spend: spend.map((r) => [r.id, r.endedAt === null, r.spend] as const),
  };
}

/** What a copy should hold: the source with its running jobs pending and unleased. */
function asCopied(source: Awaited<ReturnType<typeof everything>>) {
  const jobs = source.jobs.map((j) =>
    j.state === 'running' ? { ...j, state: 'pending' as const, leaseOwner: null, leaseExpiresAt: null } : j,
  );
  const running = new Set(source.jobs.filter((j) => j.state === 'running').map((j) => j.key));
  const exportRows = source.export.map((r) => (running.has(r.key) ? { ...r, state: 'pending' as const } : r));
  const counts = { ...source.status.counts, pending: source.status.counts.pending + running.size, running: 0 };
  const byModel = source.status.byModel.map((m) => ({
    ...m,
    pending: m.pending + m.running,
    running: 0,
  }));
  // a run the copy closes is never reclaimed there: its requests out may have been billed
  const spend = source.spend.map(([id, open, m]) => {
    if (!open) return [id, false, m] as const;
    const moved = {
      ...m,
      reservedUsd: 0,
      inFlight: 0,
      mayBeBilledUsd: m.mayBeBilledUsd + m.reservedUsd,
      mayBeBilledTries: m.mayBeBilledTries + m.inFlight,
    };
    return [id, false, moved] as const;
  });
  return {
    ...source,
    jobs,
    export: exportRows,
    status: { ...source.status, counts, byModel, retrying: source.status.retrying + running.size },
    spend,
  };
}

describe('copy', () => {
  // 333 a batch: row by row into the indexes; 1000: the first batch is big enough to load in bulk,
  // the random-key indexes built after the items (bulk-load.ts), the count triggers kept
  it.each([
    ['in small batches across dump pages', 333, false],
    ['in bulk, the key indexes built once the items are in', 1000, true],
  ])('copies SQLite to SQLite %s', async (_how, batchSize, bulk) => {
    const dir = tempDir();
    const from = new SqliteStore(join(dir, 'a.db'));
    const to = new SqliteStore(join(dir, 'b.db'));
    await populate(from);
    const many = rows(2100, { prefix: 'bulk' });
    for (let i = 0; i < many.length; i += 700) await from.enqueue(many.slice(i, i + 700), T0 + 1);
    const progress: string[] = [];
    const loading: boolean[] = [];
    const result = await copyStore(from, to, {
      now: T0 + 999,
      batchSize,
      onProgress: (t) => {
        progress.push(t);
        if (t === 'jobs') loading.push(to.db.prepare('SELECT count(*) FROM bulk_load').pluck().get() === 1);
      },
    });
    expect(new Set(loading)).toEqual(new Set([bulk]));
    // the same indexes and triggers as the source, the load's record gone, every foreign key whole
    const schema = (s: SqliteStore) =>
      s.db.prepare("SELECT type, name, sql FROM sqlite_master WHERE type IN ('index', 'trigger') ORDER BY name").all();
    expect(schema(to)).toEqual(schema(from));
    expect(to.db.prepare('SELECT count(*) FROM bulk_load').pluck().get()).toBe(0);
    expect(to.db.pragma('foreign_key_check')).toEqual([]);
    expect(to.db.pragma('foreign_keys', { simple: true })).toBe(1);
    expect(result).toEqual({ jobs: 2108, items: 2108, attempts: 4, runs: 2, laneLimits: 2, rejections: 1, requeued: 1, closedRuns: 1 });
    expect(new Set(progress)).toEqual(new Set(['jobs', 'items', 'attempts', 'runs']));
    expect(await everything(to)).toEqual(asCopied(await everything(from)));
    expect(await to.activeRuns()).toEqual([]);
    // every copied attempt carries its job's seq in the new file (the index a job's attempts are found by)
    const misplaced = to.db.prepare('SELECT count(*) FROM attempts a LEFT JOIN jobs j ON j.key = a.job_key WHERE a.job_seq IS NOT j.seq');
    expect(misplaced.pluck().get()).toBe(0);
    // the copy works as a queue: FIFO by priority continues where the source stood
    const next = await to.claim(claimOpts({ now: T0 + 1000, limit: 2 }));
    expect(next.jobs.map((j) => j.attempts)).toEqual([3, 2]);
    await Promise.all([from.close(), to.close()]);
  });

  it.for([
    ['SQLite', false],
    ['PostgreSQL', true],
  ] as const)(
    'a copy into %s stopped halfway is refused by the commands and by another copy into it; one that finished is not',
    async ([, pg], ctx) => {
      if (pg) skipUnavailable(postgres, ctx);
      const dir = tempDir();
      const from = new SqliteStore(join(dir, 'a.db'));
      await populate(from);
      const target = pg ? freshPgUrl() : join(dir, 'b.db');
      const to = pg ? await PostgresStore.open(target) : new SqliteStore(target);
      const stop = new Error('Ctrl-C');
      // stopped once the first jobs are in, before their items
      await expect(
        copyStore(from, to, {
          now: T0 + 999,
          batchSize: 2,
          onProgress: () => {
            throw stop;
          },
        }),
      ).rejects.toBe(stop);
      const unfinished =
        /is a copy of .*a\.db that llmq copy has not finished \(started 2023-11-14 22:13:20Z; stopped, or still at work\): it holds part of that queue/;
      await expect(copyStore(from, to, { now: T0 + 1999 })).rejects.toThrow(unfinished);
      await to.close();
      await expect(openExistingStore(target)).rejects.toThrow(unfinished);
      const status = await runCli(['status', '--db', target]);
      expect(status.code).toBe(1);
      expect(status.stderr).toMatch(unfinished);
      // nor is it enqueued into: it would look whole once the new items came
      const docs = join(dir, 'more.jsonl');
      writeFileSync(docs, '{"id":"more","text":"more"}\n');
      const enqueue = await runCli(['enqueue', docs, '--db', target]);
      expect(enqueue.code).toBe(1);
      expect(enqueue.stderr).toMatch(unfinished);
      // a whole copy is a queue like any other
      const whole = pg ? freshPgUrl() : join(dir, 'c.db');
      const copy = pg ? await PostgresStore.open(whole) : new SqliteStore(whole);
      await copyStore(from, copy, { now: T0 + 2999 });
      expect(await copy.copier.copyInProgress()).toBeNull();
      await Promise.all([copy.close(), from.close()]);
      await (await openExistingStore(whole)).close();
    },
  );

  it('llmq copy stopped by Ctrl-C says what it left, and exits 130', async () => {
    const dir = tempDir();
    const from = join(dir, 'big.db');
    const source = new SqliteStore(from);
    for (let i = 0; i < 60_000; i += 10_000) await source.enqueue(rows(10_000, { prefix: `p${i}` }), T0);
    await source.close();
    const to = join(dir, 'part.db');
    const child = spawn(process.execPath, [BIN, 'copy', '--from', from, '--to', to], { env: cliEnv() });
    const done = collect(child);
    // stopped once the copy is at work: its mark is in the target
    for (let seen = false; !seen; await new Promise((r) => setTimeout(r, 10))) {
      try {
        const db = new Database(to, { readonly: true, fileMustExist: true });
        seen =
          db.prepare("SELECT count(*) FROM sqlite_master WHERE name = 'copying'").pluck().get() === 1 &&
          db.prepare('SELECT count(*) FROM copying').pluck().get() === 1;
        db.close();
      } catch {}
    }
    child.kill('SIGINT');
    const r = await done;
    expect(r.code).toBe(130);
    expect(r.stderr).toContain(`stopped: ${to} holds part of ${from}, and llmq refuses to use it; delete it and copy again.`);
  });

  it('refuses a target that already holds a queue', async () => {
    const dir = tempDir();
    const from = new SqliteStore(join(dir, 'a.db'));
    const to = new SqliteStore(join(dir, 'b.db'));
    await to.enqueue(rows(1), T0);
    await expect(copyStore(from, to, { now: T0 })).rejects.toThrow(/b\.db is not empty \(1 job, 1 item\).*new file or a new schema/);
    await Promise.all([from.close(), to.close()]);
  });

  describe('through PostgreSQL', () => {
    beforeEach((ctx) => skipUnavailable(postgres, ctx));

    it('SQLite -> PostgreSQL -> SQLite keeps states, attempts, answers, items and runs', async () => {
      const dir = tempDir();
      const source = new SqliteStore(join(dir, 'source.db'));
      const middle = await PostgresStore.open(freshPgUrl());
      const back = new SqliteStore(join(dir, 'back.db'));
      await populate(source);
      // a request retry-failed --max-tokens raised: an enqueue of the copy keeps its documents at the raise too
      await source.enqueue([{ ...row('raised', 'raised text'), supersedes: 'ab'.repeat(32) }], T0 + 1);
      await copyStore(source, middle, { now: T0 + 999 });
      await copyStore(middle, back, { now: T0 + 1999 });
      const expected = asCopied(await everything(source));
      expect(await everything(middle)).toEqual(expected);
      expect(await everything(back)).toEqual(expected);
      const superseded = [{ key: 'ab'.repeat(32), byKey: row('raised', 'raised text').key }];
      expect(await middle.copier.dumpSuperseded()).toEqual(superseded);
      expect(await back.copier.dumpSuperseded()).toEqual(superseded);
      const runs = [];
      for await (const r of back.copier.dumpRuns()) runs.push([r.id, r.endedAt, r.exitReason, r.stats]);
      expect(runs).toEqual([
        ['run-old', T0 + 50, 'finished', STATS],
        [OWNER, T0 + 999, 'copied to another database while open', null],
      ]);
      await Promise.all([source.close(), middle.close(), back.close()]);
    });

    it('writes each job once: the attempts loaded after it leave its row alone (it carries its latency)', async () => {
      const source = new SqliteStore(join(tempDir(), 'source.db'));
      await source.enqueue(rows(20), T0);
      await source.startRun({ id: OWNER, host: 'h', pid: 1, startedAt: T0, options: {} });
      const { jobs } = await source.claim(claimOpts());
      const usage = { promptTokens: 3, completionTokens: 2 };
      await Promise.all(
        jobs.map((j, n) =>
          source.complete(j.key, {
            owner: OWNER,
            output: 'ok',
            response: '{}',
            usage,
            attempt: {
              key: j.key,
              runId: OWNER,
              attempt: 1,
              startedAt: T0,
              endedAt: T0 + 10 + n,
              status: 200,
              outcome: 'done',
              error: null,
              usage,
            },
          }),
        ),
      );
      const url = freshPgUrl();
      const target = await PostgresStore.open(url);
      await copyStore(source, target, { now: T0 + 999 });
      expect((await dumpJobs(target)).map((j) => j.latencyMs)).toEqual(jobs.map((_, n) => 10 + n));
      await Promise.all([source.close(), target.close()]);
      // the copy's connections are gone, their statistics written: every job inserted, none rewritten
      // (a rewrite per job was half the time of a copy, and half the table dead rows)
      expect(await pgJobWrites(url, 20)).toEqual({ ins: 20, upd: 0 });
    });

    it('llmq copy runs from the command line', async () => {
      const dir = tempDir();
      const from = join(dir, 'q.db');
      const source = new SqliteStore(from);
      await populate(source);
      await source.close();
      const url = freshPgUrl();
      const ok = await runCli(['copy', '--from', from, '--to', url, '--json']);
      expect(ok.stderr).toMatch(/^warning: 1 run on .*q\.db has not ended/);
      expect(ok.code).toBe(0);
      expect(JSON.parse(ok.stdout)).toMatchObject({ from, to: url, jobs: 8, items: 8, attempts: 4, runs: 2, requeued: 1 });
      const again = await runCli(['copy', '--to', url], { env: { LLMQ_DB: from } });
      expect(again.code).toBe(1);
      expect(again.stderr).toMatch(/^error: .* is not empty \(8 jobs, 8 items\)/m);
      const same = await runCli(['copy', '--db', from, '--to', from]);
      expect(same.code).toBe(1);
      expect(same.stderr).toMatch(/Expected --from and --to to name two databases/);
    });
  });
});

describe('llmq copy from a queue a run is working', () => {
  it('is refused, naming the run, and writes nothing: what the run answers meanwhile would be sent again from the copy', async () => {
    const dir = tempDir();
    const from = join(dir, 'q.db');
    const source = new SqliteStore(from);
    await populate(source);
    // a run heartbeating now, in a process that is alive (this one)
    await source.startRun({ id: 'working1-run', host: hostname(), pid: process.pid, startedAt: Date.now(), options: {} });
    await source.close();
    const to = join(dir, 'copy.db');
    const refused = await runCli(['copy', '--from', from, '--to', to]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`error: ${from} is being worked on by 1 run: working1 (${hostname()} pid ${process.pid}).`);
    expect(refused.stderr).toContain('Stop it first (Ctrl-C where it runs; llmq status shows it), then copy.');
    expect(existsSync(to)).toBe(false);
  });

  it('killed a moment ago (its pid gone here, its heartbeat fresh): says so and to copy again in a few seconds, not to Ctrl-C it', async () => {
    const dir = tempDir();
    const from = join(dir, 'q.db');
    const source = new SqliteStore(from);
    await populate(source);
    const pid = gonePid();
    await source.startRun({ id: 'killed01-run', host: hostname(), pid, startedAt: Date.now() - 10_000, options: {} });
    await source.heartbeat('killed01-run', Date.now() - 1_000, Date.now() + 60_000, NO_STATS);
    await source.close();
    const to = join(dir, 'copy.db');
    const refused = await runCli(['copy', '--from', from, '--to', to]);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      `whose process is not running here any more (killed a moment ago, most likely): killed01 (pid ${pid}).`,
    );
    expect(refused.stderr).toContain('Copy again in a few seconds.');
    expect(refused.stderr).not.toContain('Ctrl-C');
    expect(existsSync(to)).toBe(false);
  });
});
