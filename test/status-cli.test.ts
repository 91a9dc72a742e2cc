import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { collect, MOCK_NOW, runCli, spawnCli } from './helpers/cli.js';
import { seededQueue, seedJobs } from './helpers/seed.js';
import { NO_STATS, row, T0 } from './helpers/stores.js';
import { A_COST, populate, RUN } from './helpers/populate.js';
import { waitFor } from './helpers/wait.js';
import { queueWithDroppedModel } from './helpers/dropped-model.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';
import { reply } from './helpers/fake-openai.js';

/**
 * A queue with two runs side by side: run-killed (its last heartbeat at T0 + 2 s, 5 done) and
 * run-other (10 done, ended at `otherEndedAt`); a later run took the killed one's jobs back at T0 + 61 s.
 */
async function killedBeside(otherEndedAt: number): Promise<string> {
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  await store.enqueue([row('a', 'A')], T0);
  await store.startRun({ id: 'run-killed', host: 'elsewhere', pid: 1, startedAt: T0, options: {} });
  await store.heartbeat('run-killed', T0 + 2000, T0 + 60_000, { ...NO_STATS, done: 5, requests: 5 });
  await store.startRun({ id: 'run-other', host: 'elsewhere', pid: 2, startedAt: T0 + 100, options: {} });
  await store.finishRun('run-other', otherEndedAt, 'drained', { ...NO_STATS, done: 10, requests: 10 });
  await store.reclaim(T0 + 61_000, ['run-killed']);
  await store.close();
  return db;
}

describe('llmq status', () => {
  it("keeps saying what forgotten jobs' billed tries cost when the queue is empty", async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await store.enqueue([row('a', 'one')], T0);
    const [a] = (await store.claim({ owner: 'r', limit: 1, now: T0, leaseUntil: T0 + 60_000, maxAttempts: 5 })).jobs;
    const usage = { promptTokens: 10, completionTokens: 2 };
    await store.fail(
      a!.key,
      'r',
      'the answer is not JSON',
      {
        key: a!.key,
        runId: 'r',
        attempt: 1,
        startedAt: T0,
        endedAt: T0 + 10,
        status: 200,
        outcome: 'failed',
        error: 'the answer is not JSON',
        usage,
        costUsd: 0.25,
      },
      T0 + 10,
    );
    await store.forgetItems({ ids: ['a'] }, { now: T0 + 20 });
    await store.close();
    const r = await runCli(['status', '--db', db]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('The queue is empty');
    expect(r.stdout).toMatch(/ {2}cost {5}\$0\.25 so far/);
  });
  // docs/architecture.md, "Outside contract"
  it('--json: the contract fields exactly, then the extras', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const r = await runCli(['status', '--json', '--db', db]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const s = JSON.parse(r.stdout);
    expect(s.counts).toEqual({ pending: 1, running: 1, done: 5, failed: 2 });
    expect(s.total).toBe(9);
    expect(s.items).toBe(10);
    expect(s.tokens).toEqual({ prompt: 500, completion: 100 });
    expect(s.sharedItems).toBe(1);
    expect(s.percentDone).toBe(55.6);
    expect(s.db).toBe(db);
    // gpt-4o-mini: 500 * 0.15 / 1e6 + 100 * 0.60 / 1e6
    expect(s.cost.usd).toBeCloseTo(0.000135, 9);
    expect(s.cost.unpriced).toEqual([]);
    expect(s.cost.byModel).toEqual([
      {
        model: 'gpt-4o-mini',
        jobs: 9,
        done: 5,
        prompt: 500,
        completion: 100,
        dropped: 0,
        price: [0.15, 0.6],
        priceSource: expect.stringMatching(/^genai-prices \d{4}-\d{2}-\d{2}$/),
        usd: s.cost.usd,
      },
    ]);
    expect(s.cost.remainingUsd).toBeCloseTo((0.000135 / 5) * 2, 9);
    expect(s.failures).toEqual([{ error: "400 context_length_exceeded: This model's maximum context length is 128000 tokens.", count: 2 }]);
    expect(s.oldestPending.ageSeconds).toBeGreaterThan(60);
    expect(s.activeRuns).toHaveLength(1);
    expect(s.activeRuns[0]).toMatchObject({
      id: RUN,
      host: 'testhost',
      pid: 4242,
      live: true,
      done: 5,
      failed: 2,
      recentJobsPerSecond: 0.5,
    });
    expect(s.jobsPerSecond).toBe(0.5);
    expect(s.etaSeconds).toBe(4); // 2 jobs left at 0.5/s
    expect(s.lastRun.id).toBe(RUN);
  });

  it('prices: --price overrides, an unknown model is unknown (not 0), a bad --price is refused', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    // a.txt's answer keeps the cost stored with it; the four answered without one are priced as told
    const priced = JSON.parse((await runCli(['status', '--json', '--db', db, '--price', '1,2'])).stdout);
    expect(priced.cost.usd).toBeCloseTo(A_COST + (400 * 1 + 80 * 2) / 1e6, 12);
    expect(priced.cost.byModel[0].priceSource).toBe('--price');
    // the two jobs left (one pending, one running) as an average answer so far, 100 in and 20 out, at the price given
    expect(priced.cost.remainingUsd).toBeCloseTo((2 * (100 * 1 + 20 * 2)) / 1e6, 12);
    const file = join(dir, 'prices.json');
    writeFileSync(file, JSON.stringify({ 'gpt-4o-mini': [10, 20] }));
    const fromFile = JSON.parse((await runCli(['status', '--json', '--db', db, '--prices', file])).stdout);
    expect(fromFile.cost.usd).toBeCloseTo(A_COST + (400 * 10 + 80 * 20) / 1e6, 12);
    expect(fromFile.cost.byModel[0].priceSource).toBe(`--prices ${file}`);
    expect(fromFile.cost.remainingUsd).toBeCloseTo((2 * (100 * 10 + 20 * 20)) / 1e6, 12);
    const fromEnv = JSON.parse((await runCli(['status', '--json', '--db', db], { env: { LLMQ_PRICES: '{"gpt-4o-mini":[3,4]}' } })).stdout);
    expect(fromEnv.cost.usd).toBeCloseTo(A_COST + (400 * 3 + 80 * 4) / 1e6, 12);
    const bad = await runCli(['status', '--db', db, '--price', '0.15']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--price.*'0\.15'.*0\.15,0\.60/);
  });

  it("the last run's --prices file gone: status says so, and what prices the rest instead", async () => {
    const dir = tempDir();
    const db = await seededQueue(4);
    const fake = await startFake({ latencyMs: 1 });
    const file = join(dir, 'prices.json');
    writeFileSync(file, JSON.stringify({ 'gpt-4o-mini': [10, 20] }));
    const ran = await runCli(['run', '--db', db, '--base-url', fake.url, '--prices', file, '--limit', '2', '--progress', 'none']);
    expect(ran.code, ran.stderr).toBe(0);
    const before = await runCli(['status', '--db', db]);
    expect(before.stdout).toMatch(/^ {2}prices {3}--prices \S+prices\.json of run [0-9a-f]{8}$/m);
    expect(before.stderr).toBe('');
    rmSync(file);
    const after = await runCli(['status', '--db', db]);
    expect(after.code).toBe(0);
    expect(after.stderr.replace(/\s+/g, ' ').trim()).toMatch(
      /^warning: the last run \([0-9a-f]{8}\) was priced by --prices \S+prices\.json, which is not there any more: what is left is priced by genai-prices\. Give --prices FILE to price it as that run did\.$/,
    );
    expect(after.stdout).toMatch(/^ {2}prices {3}genai-prices /m);
    // the run it proposes still names the file: pasted, it stops at it rather than spend at other prices
    expect(after.stdout.replace(/\n {4}/g, ' ')).toMatch(/llmq run --base-url \S+ --prices \S+prices\.json --db /);
  });

  it('several models: each says how many of its jobs are done beside its cost, aligned', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const lines = (n: number, prefix: string) =>
      Array.from({ length: n }, (_, i) => `{"id":"${prefix}${i}","text":"${prefix} ${i}"}`).join('\n');
    writeFileSync(join(dir, 'a.jsonl'), lines(5, 'a'));
    writeFileSync(join(dir, 'b.jsonl'), lines(20, 'b'));
    expect((await runCli(['enqueue', 'a.jsonl', '--model', 'gpt-4o', '--db', db], { cwd: dir })).code).toBe(0);
    expect((await runCli(['enqueue', 'b.jsonl', '--model', 'claude-3-5-haiku-latest', '--db', db], { cwd: dir })).code).toBe(0);
    // 7 of the 25 answered: the models partly done
    expect((await runCli(['run', '--db', db, '--provider', 'mock', '--limit', '7', '--price', '1,2', '--progress', 'none'])).code).toBe(0);
    const out = (await runCli(['status', '--db', db, '--price', '1,2'])).stdout;
    const rows = out.split('\n').filter((l) => /^ {11}(gpt-4o|claude)/.test(l));
    expect(rows.map((l) => l.trim().split(' ')[0])).toEqual(['claude-3-5-haiku-latest', 'gpt-4o']);
    for (const l of rows) expect(l).toMatch(/ \d+\/(5|20) done {2,}\$[\d.]+ {2}\$1\/\$2 per M$/);
    const json = JSON.parse((await runCli(['status', '--json', '--db', db])).stdout);
    const done = Object.fromEntries(
      json.cost.byModel.map((m: { model: string; done: number; jobs: number }) => [m.model, `${m.done}/${m.jobs}`]),
    );
    for (const l of rows) expect(l).toContain(`${done[l.trim().split(' ')[0]!]} done`);
    // the counts line up under each other
    expect(new Set(rows.map((l) => l.indexOf(' done'))).size).toBe(1);
  });

  it("a model whose jobs were all dropped (forget) says so beside the cost it keeps, not '0/0 done'", async () => {
    const db = await queueWithDroppedModel(tempDir(), 3, 2);
    const out = (await runCli(['status', '--db', db, '--price', '1,2'])).stdout;
    const rows = out.split('\n').filter((l) => /^ {11}gpt-4o/.test(l));
    expect(rows[0]).toMatch(/^ {11}gpt-4o {7}3 dropped {2,}\$[\d.]+ {2}\$1\/\$2 per M$/);
    expect(rows[1]).toMatch(/^ {11}gpt-4o-mini {3}2\/2 done {2,}\$[\d.]+ {2}\$1\/\$2 per M$/);
    const json = JSON.parse((await runCli(['status', '--json', '--db', db])).stdout);
    expect(json.cost.byModel.map((m: { model: string; jobs: number; dropped: number }) => [m.model, m.jobs, m.dropped])).toEqual([
      ['gpt-4o', 0, 3],
      ['gpt-4o-mini', 2, 0],
    ]);
    expect(json.cost.byModel[0].usd).toBeGreaterThan(0);
  });

  it('human output: aligned, no escape codes through a pipe, failures grouped with the next step', async () => {
    const dir = tempDir();
    const { db } = await populate(dir, { finished: true });
    const r = await runCli(['status', '--db', db], { env: { NO_COLOR: undefined } });
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(/\x1B/);
    expect(r.stdout).toMatch(/^ {2}jobs {6}9 {2}for 10 items · 1 call saved by shared jobs$/m);
    expect(r.stdout).toMatch(/^ {2}done {6}5 {2}56%$/m);
    expect(r.stdout).toMatch(/^ {2}pending {3}1 {2}oldest queued \d+m \d\ds ago$/m);
    expect(r.stdout).toMatch(/^ {2}failed {4}2$/m);
    expect(r.stdout).toMatch(/^ {2}tokens {3}500 in · 100 out$/m);
    expect(r.stdout).toMatch(
      /^ {2}cost {5}\$0\.000135 so far\n {11}about \$0\.000054 more if the rest are like those done · gpt-4o-mini$/m,
    );
    expect(r.stdout).toMatch(/^ {2}2 {2}400 context_length_exceeded/m);
    // a reason longer than the line is wrapped under itself, its end kept (in a log there is no wider terminal)
    expect(r.stdout).toMatch(/^ {5}128000 tokens\.$/m);
    // the run proposed goes at the last run's --concurrency (4, not the default)
    expect(r.stdout).toContain(`  to try them again: llmq retry-failed --db ${db}\n  then: llmq run --concurrency 4 --db ${db}\n`);
    expect(r.stdout).toMatch(/last run {2}run-0001 \(testhost pid 4242\) ended .* ago \(drained\)/);
    // one job waits, one a run left running, and no run works: what sends them, and what it would cost first
    expect(r.stdout).toContain(
      // the estimate is of the run proposed: at its concurrency (and endpoint, whose limits it reads)
      `  to send the 1 pending and the 1 a stopped run left running:\n    llmq run --concurrency 4 --db ${db}\n  what that would cost and take:\n    llmq estimate --concurrency 4 --db ${db}\n`,
    );
    for (const line of r.stdout.split('\n')) expect(line.length).toBeLessThanOrEqual(80);
    // only what a stopped run left running: the next run takes it back; estimate, which prices
    // pending jobs, would say 0 to send, and is not offered
    const store = new SqliteStore(db);
    await store.db.prepare(`UPDATE jobs SET state = 'failed', error = 'x' WHERE state = 'pending'`).run();
    await store.close();
    const left = (await runCli(['status', '--db', db])).stdout;
    expect(left).toContain(`  to send the 1 a stopped run left running:\n    llmq run --concurrency 4 --db ${db}\n`);
    expect(left).not.toContain('llmq estimate');
    // while a run works the queue, no such line
    const working = await populate(tempDir());
    expect((await runCli(['status', '--db', working.db])).stdout).not.toContain('to send the');
    // a pending job tried before waits for a retry only while a run is there to make it
    for (const [where, note] of [
      [db, 'tried before, to retry'],
      [working.db, 'waiting to retry'],
    ] as const) {
      const s = new SqliteStore(where);
      await s.db
        .prepare(`UPDATE jobs SET state = 'pending', attempts = 1 WHERE key = (SELECT job_key FROM items WHERE id = 'e.txt')`)
        .run();
      await s.close();
      expect((await runCli(['status', '--db', where])).stdout).toMatch(new RegExp(`^ {2}pending {3}\\d {2}1 ${note} · oldest`, 'm'));
    }
  });

  it('after a mock run, the llmq run it proposes for the failures is a mock run too (not one that sends to OpenAI), with its --max-attempts and latency, not its failure rate', async () => {
    const db = join(tempDir(), 'q.db');
    const docs = join(tempDir(), 'docs.jsonl');
    // two documents: three failures in a row would be an outage, and the run would wait for the provider to come back
    writeFileSync(docs, '{"id":"a","text":"one"}\n{"id":"b","text":"two"}\n');
    expect((await runCli(['enqueue', docs, '--db', db, '--model', 'mock-1'])).code).toBe(0);
    const run = ['run', '--db', db, '--provider', 'mock', '--mock-latency', '0', '--mock-failure-rate', '1', '--max-attempts', '1'];
    expect((await runCli(run)).code).toBe(2);
    const r = await runCli(['status', '--db', db]);
    expect(r.stdout.replace(/\n {2}then: /, ', then ')).toContain(
      `to try them again: llmq retry-failed --db ${db}, then llmq run --provider mock --mock-latency 0 --max-attempts 1 --db ${db}`,
    );
    const retry = await runCli(['retry-failed', '--db', db]);
    expect(retry.stderr).toContain(`Run llmq run --provider mock --mock-latency 0 --max-attempts 1 --db ${db} to try them again.`);
  });

  it("after a run to an endpoint with Azure's api-version, the run it proposes keeps it (without it the endpoint answers 404), and masks a key given there", async () => {
    const fake = await startFake();
    const db = await seededQueue(3);
    const baseUrl = `${fake.url}?api-version=2024-10-21&api-key=sk-SECRET123`;
    const run = await runCli(['run', '--db', db, '--base-url', baseUrl, '--limit', '1', '--progress', 'none'], {
      env: { OPENAI_API_KEY: 'sk-test-0123456789abcdef' },
    });
    expect(run.code, run.stderr).toBe(0);
    const status = (await runCli(['status', '--db', db])).stdout;
    expect(status).toContain(`llmq run --base-url '${fake.url}?api-version=2024-10-21&api-key=***' --db ${db}`);
    expect(status).toContain(`llmq estimate --base-url '${fake.url}?api-version=2024-10-21&api-key=***' --db ${db}`);
    expect(status).not.toContain('SECRET');
  });

  it("prices what is left from real answers only: the offline mock's stand-ins (short, free) say nothing of it", async () => {
    const db = await seededQueue(6, { model: 'gpt-4o-mini' });
    expect((await runCli(['run', '--db', db, ...MOCK_NOW, '--limit', '3'])).code).toBe(0);
    const s = JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout);
    expect(s.counts).toMatchObject({ done: 3, pending: 3 });
    expect(s.cost.remainingUsd).toBeNull();
    expect((await runCli(['status', '--db', db])).stdout).not.toContain('more to finish');
  });

  it('lists the runs that sent something with their money, not those that found nothing to do', async () => {
    const db = join(tempDir(), 'q.db');
    const docs = join(tempDir(), 'docs.jsonl');
    writeFileSync(docs, '{"id":"a","text":"one"}\n{"id":"b","text":"two"}\n');
    expect((await runCli(['enqueue', docs, '--db', db])).code).toBe(0);
    const run = ['run', '--db', db, '--provider', 'mock', '--mock-latency', '0', '--progress', 'none'];
    for (let i = 0; i < 3; i++) expect((await runCli(run)).code).toBe(0);
    const s = JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout);
    expect(s.cost.byRun).toHaveLength(1);
    const worked = s.cost.byRun[0].runId as string;
    expect(s.lastRun.id).toBe(worked);
    const text = (await runCli(['status', '--db', db])).stdout;
    expect(text).toMatch(new RegExp(`^ {2}runs {5}${worked.slice(0, 8)} {2}\\$`, 'm'));
    expect(text).not.toMatch(/earlier run/);
    expect(text.match(/^ {21}[0-9a-f]{8} {2}\$/gm)).toBeNull();
  });

  it('after runs side by side, the last run is said with the others beside it and their work together; a run alone, without', async () => {
    const db = join(tempDir(), 'q.db');
    const docs = join(tempDir(), 'docs.jsonl');
    const lines = (from: number, n: number) =>
      Array.from({ length: n }, (_, i) => JSON.stringify({ id: `d${from + i}`, text: `doc ${from + i}` }));
    writeFileSync(docs, `${lines(0, 200).join('\n')}\n`);
    expect((await runCli(['enqueue', docs, '--db', db])).code).toBe(0);
    // 40 ms an answer at -c 2: a run alone takes about 4 s, far longer than the second one's start
    const run = ['run', '--db', db, '--provider', 'mock', '--mock-latency', '40', '-c', '2', '--progress', 'none'];
    const both = await Promise.all([runCli(run), runCli(run)]);
    expect(both.map((r) => r.code)).toEqual([0, 0]);
    const s = JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout);
    expect(s.lastRun.done).toBeGreaterThan(0);
    expect(s.lastRun.done).toBeLessThan(200);
    expect(s.lastRunBeside.runs).toHaveLength(1);
    expect(s.lastRunBeside.runs[0].id).not.toBe(s.lastRun.id);
    expect(s.lastRunBeside).toMatchObject({ done: 200, failed: 0 });
    expect(s.lastRunBeside.averageJobsPerSecond).toBeGreaterThan(s.lastRun.averageJobsPerSecond);
    const text = (await runCli(['status', '--db', db])).stdout;
    const other = (s.lastRunBeside.runs[0].id as string).slice(0, 8);
    expect(text).toMatch(new RegExp(`^ {10}beside it 1 other run \\(${other}\\); together:\n {10}200 done, 0 failed · `, 'm'));

    writeFileSync(docs, `${lines(200, 5).join('\n')}\n`);
    expect((await runCli(['enqueue', docs, '--db', db])).code).toBe(0);
    expect((await runCli(run)).code).toBe(0);
    const alone = JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout);
    expect(alone.lastRun.done).toBe(5);
    // the concurrency an ended run ran at, not the none it has once ended
    expect(alone.lastRun.concurrency).toBe(2);
    expect(alone.lastRunBeside).toBeNull();
    expect((await runCli(['status', '--db', db])).stdout).not.toMatch(/beside it/);
  }, 30_000);

  it("the last run's 429s are said with its figures, the strays among them apart; a run that met none says nothing of them", async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await store.enqueue([row('a', 'A')], T0);
    const met = { ...NO_STATS, done: 1, requests: 8, rateLimited: 7, strayRateLimited: 6 };
    await store.startRun({ id: 'run-1', host: 'h', pid: 1, startedAt: T0, options: {} });
    await store.finishRun('run-1', T0 + 5000, 'drained', met);
    await store.close();
    const text = (await runCli(['status', '--db', db])).stdout;
    expect(text).toMatch(/^ {10}1 done, 0 failed · [\d.]+ jobs\/s · [\d.,]+ tokens\/s · 7 rate-limited \(6 stray\)$/m);
    expect(JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout).lastRun).toMatchObject({
      rateLimited: 7,
      strayRateLimited: 6,
    });

    const again = new SqliteStore(db);
    await again.startRun({ id: 'run-2', host: 'h', pid: 1, startedAt: T0 + 6000, options: {} });
    await again.finishRun('run-2', T0 + 7000, 'drained', { ...NO_STATS, done: 1, requests: 1 });
    await again.close();
    expect((await runCli(['status', '--db', db])).stdout).not.toContain('rate-limited');
  });

  it("a run that died counts to its last heartbeat: its figures, and the runs' together beside it, are said as lower bounds", async () => {
    // the other run ended before the killed one's last heartbeat
    const db = await killedBeside(T0 + 1500);
    const text = (await runCli(['status', '--db', db])).stdout;
    expect(text).toMatch(
      /^last run {2}run-kill \(elsewhere pid 1\) last heard .* ago \(died\) after 2s\n {10}at least 5 done, 0 failed · 2\.5 jobs\/s .*\n {10}\(as of its last heartbeat/m,
    );
    expect(text).toMatch(/^ {10}beside it 1 other run \(run-othe\); together:\n {10}at least 15 done, 0 failed · /m);
    const s = JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout);
    expect(s.lastRunBeside).toMatchObject({ done: 15, atLeast: true });

    // a run that worked after the killed one's last heartbeat is the last run, though the killed one ended (was taken back) later
    const db3 = await killedBeside(T0 + 5000);
    const later = JSON.parse((await runCli(['status', '--db', db3, '--json'])).stdout);
    expect(later.lastRun.id).toBe('run-other');
    expect(later.lastRunBeside).toMatchObject({ runs: [expect.objectContaining({ id: 'run-killed' })], done: 15, atLeast: true });
    expect((await runCli(['status', '--db', db3])).stdout).toMatch(/^ {10}beside it 1 other run \(run-kill died\); together:$/m);

    // runs that ended by themselves: exact, said as such
    const db2 = join(tempDir(), 'q.db');
    const store2 = new SqliteStore(db2);
    await store2.enqueue([row('a', 'A')], T0);
    for (const [id, at] of [
      ['run-1', T0],
      ['run-2', T0 + 100],
    ] as const) {
      await store2.startRun({ id, host: 'elsewhere', pid: 1, startedAt: at, options: {} });
      await store2.finishRun(id, at + 5000, 'drained', { ...NO_STATS, done: 5, requests: 5 });
    }
    await store2.close();
    const exact = (await runCli(['status', '--db', db2])).stdout;
    expect(exact).toMatch(/^ {10}10 done, 0 failed · /m);
    expect(exact).not.toMatch(/at least|last heartbeat/);
    expect(JSON.parse((await runCli(['status', '--db', db2, '--json'])).stdout).lastRunBeside.atLeast).toBe(false);
  });

  it('colors only when forced, never with NO_COLOR', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const forced = await runCli(['status', '--db', db], { env: { NO_COLOR: undefined, FORCE_COLOR: '1' } });
    expect(forced.stdout).toMatch(/\x1B\[/);
    const off = await runCli(['status', '--db', db], { env: { NO_COLOR: '1', FORCE_COLOR: '1' } });
    expect(off.stdout).not.toMatch(/\x1B/);
  });

  it('a run that stopped heartbeating is reported silent, with no ETA', async () => {
    const dir = tempDir();
    const { db } = await populate(dir, { heartbeatAt: Date.now() - 5 * 60_000 });
    const s = JSON.parse((await runCli(['status', '--json', '--db', db])).stdout);
    expect(s.activeRuns[0].live).toBe(false);
    expect(s.etaSeconds).toBeNull();
    const text = (await runCli(['status', '--db', db])).stdout;
    expect(text).toMatch(/silent {4}run-0001 .*no heartbeat for 5m/);
  });

  it('a run counted running whose heartbeat stopped a while ago (another machine: its process cannot be checked) says so', async () => {
    const dir = tempDir();
    const { db } = await populate(dir, { heartbeatAt: Date.now() - 30_000 });
    const text = (await runCli(['status', '--db', db])).stdout;
    expect(text).toMatch(/running {3}run-0001 /);
    expect(text).toMatch(/\n {10}no heartbeat for 3\ds: stopped\? its jobs return as leases run out\n/);
    expect(text.split('\n').every((l) => l.length <= 80)).toBe(true);
    // a beat a moment ago is no news
    const { db: fresh } = await populate(tempDir(), { heartbeatAt: Date.now() - 1000 });
    expect((await runCli(['status', '--db', fresh])).stdout).not.toContain('no heartbeat');
  });

  it('a run of this machine whose process is gone is reported dead within seconds, not running with a frozen ETA', async () => {
    // a pid that is no process: a child that has exited
    const { pid } = spawnSync(process.execPath, ['-e', '']);
    for (const [quietMs, live] of [
      [0, true],
      [10_000, false],
    ] as const) {
      // a queue per command, its heartbeat set just before: two commands under a loaded machine's
      // startup can take longer than the quiet that makes a run dead
      const queue = async () => (await populate(tempDir(), { heartbeatAt: Date.now() - quietMs, host: hostname(), pid })).db;
      const s = JSON.parse((await runCli(['status', '--json', '--db', await queue()])).stdout);
      // just heard from, it may still be finishing a commit; quiet for a few heartbeats, it is dead
      expect(s.activeRuns[0]).toMatchObject({ live, gone: !live, pidGoneHere: live });
      // the same run as the last one: the same word, and its time only up to its last heartbeat
      expect(s.lastRun).toMatchObject({ id: s.activeRuns[0].id, live, gone: !live, wallSeconds: s.activeRuns[0].wallSeconds });
      // its last rate promises nothing, dead or not yet known dead
      expect(s.etaSeconds).toBeNull();
      const text = (await runCli(['status', '--db', await queue()])).stdout;
      if (live) expect(text).toMatch(/^running /m);
      else
        expect(text).toMatch(
          /silent {4}run-0001 .*no heartbeat for 1\ds\n\s+its process is gone; the next llmq run takes its jobs back at once/,
        );
    }
    // the same run on another machine (same pid, other host) is only silent once STALE_RUN_MS passed
    const { db } = await populate(tempDir(), { heartbeatAt: Date.now() - 10_000, host: 'elsewhere', pid });
    expect(JSON.parse((await runCli(['status', '--json', '--db', db])).stdout).activeRuns[0]).toMatchObject({ live: true, gone: false });
  });

  it('a proposed command too long for its line goes whole on the next one, never split between --db and its value', async () => {
    const dir = join(tempDir(), 'a-folder-name-long-enough-that-the-proposed-command-cannot-fit-in-eighty-columns');
    const db = join(dir, 'q.db');
    const input = join(tempDir(), 'in.jsonl');
    writeFileSync(input, '{"id":"a","text":"one"}\n{"id":"b","text":"two"}\n');
    expect((await runCli(['enqueue', input, '--db', db])).code).toBe(0);
    const r = await runCli(['status', '--db', db]);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split('\n');
    const at = lines.findIndex((l) => l.includes('llmq run'));
    expect(lines[at], r.stdout).toBe(`    llmq run --db ${db}`);
    expect(lines[at - 1]).toMatch(/^ {2}to send the 2 pending:$/);
  });

  it('does not create a database at a missing path', async () => {
    const dir = tempDir();
    const db = join(dir, 'nope.db');
    for (const args of [['status'], ['show', 'x'], ['export']]) {
      const r = await runCli([...args, '--db', db]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/There is no queue at .*nope\.db\. Create one with: llmq enqueue/);
      expect(existsSync(db)).toBe(false);
    }
  });

  it('--watch prints a new block each interval through a pipe until stopped', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const { spawnCli, collect } = await import('./helpers/cli.js');
    const child = spawnCli(['status', '--json', '--watch', '0.2', '--db', db]);
    const done = collect(child);
    let out = '';
    child.stdout!.on('data', (d: string) => (out += d));
    await waitFor(() => out.split('\n').filter(Boolean).length >= 2, { what: 'two blocks from status --watch', timeoutMs: 20_000 });
    child.kill('SIGINT');
    const r = await done;
    expect(r.code).toBe(130); // stopped by a signal, as every llmq command
    const lines = r.stdout.split('\n').filter(Boolean);
    expect(lines.length).toBeGreaterThanOrEqual(2);
    for (const l of lines) expect(JSON.parse(l).total).toBe(9);
  });

  it('after a run on the offline mock, says its answers are stand-ins; after a real provider, does not', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a.txt'), 'a document');
    const cli = (args: string[]) => runCli(args, { cwd: dir });
    expect((await cli(['enqueue', 'a.txt'])).code).toBe(0);
    expect((await cli(['run', '--provider', 'mock', '--progress', 'none'])).code).toBe(0);
    const note = 'on the offline mock: its answers are stand-ins, sent again by a run with a real provider';
    const mockOnly = (await cli(['status'])).stdout;
    expect(mockOnly).toContain(note);
    // its $0.00 is not a price list's: none is named beside it
    expect(mockOnly).toMatch(/^ {2}cost {5}\$0\.00 so far · gpt-4o-mini · the offline mock bills nothing$/m);
    expect(mockOnly).not.toMatch(/^ {2}prices /m);
    // populate's last run went to a real provider
    const { db } = await populate(tempDir());
    const real = (await runCli(['status', '--db', db])).stdout;
    expect(real).not.toContain('offline mock');
    expect(real).toMatch(/^ {2}prices {3}genai-prices /m);
  });

  it('a live run paused by a rate limit is said to be paused, not left at "0 jobs/s"', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a.txt'), 'a document');
    expect((await runCli(['enqueue', 'a.txt'], { cwd: dir })).code).toBe(0);
    const store = new SqliteStore(join(dir, 'llmq.db'));
    const now = Date.now();
    await store.startRun({ id: 'paused-run', host: 'h', pid: 1, startedAt: now, options: {} });
    await store.heartbeat('paused-run', now, now + 60_000, { ...NO_STATS, paused: { reason: 'rate_limit', until: now + 45_000 } });
    await store.close();
    const text = (await runCli(['status'], { cwd: dir })).stdout;
    expect(text).toMatch(/^running {3}paused-r.*\n {10}paused: rate limited, resuming in 4\ds$/m);
  });

  it("a live run paused for an hour by a rate limit's retry-after: the ETA counts the pause", async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a.jsonl'), Array.from({ length: 100 }, (_, i) => `{"id":"d${i}","text":"document ${i}"}\n`).join(''));
    expect((await runCli(['enqueue', 'a.jsonl'], { cwd: dir })).code).toBe(0);
    const store = new SqliteStore(join(dir, 'llmq.db'));
    const now = Date.now();
    await store.startRun({ id: 'paused-run', host: 'h', pid: 1, startedAt: now - 60_000, options: {} });
    const paused = { reason: 'rate_limit' as const, until: now + 3_585_000 };
    await store.heartbeat('paused-run', now, now + 60_000, { ...NO_STATS, jobsPerSecond: 1, paused });
    await store.close();
    const out = await runCli(['status', '--json'], { cwd: dir });
    // it said "ETA 1m 40s" above "paused: rate limited, resuming in 59m 45s"
    expect(JSON.parse(out.stdout).etaSeconds).toBeCloseTo(3585 + 100, -1);
    const text = (await runCli(['status'], { cwd: dir })).stdout;
    expect(text).toMatch(/ETA 1h 01m/);
  });

  it('a live run paused by an outage says how long the provider has been down, and how long the run waits for it', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'a.txt'), 'a document');
    expect((await runCli(['enqueue', 'a.txt'], { cwd: dir })).code).toBe(0);
    const store = new SqliteStore(join(dir, 'llmq.db'));
    const now = Date.now();
    await store.startRun({ id: 'outage-run', host: 'h', pid: 1, startedAt: now - 500_000, options: {} });
    const paused = { reason: 'outage' as const, until: now + 9_500, downSince: now - 432_000, givesUpAt: now - 432_000 + 900_000 };
    await store.heartbeat('outage-run', now, now + 60_000, { ...NO_STATS, paused });
    await store.close();
    const text = (await runCli(['status'], { cwd: dir })).stdout;
    expect(text).toMatch(/^ {10}paused: the provider down 7m 1\ds \(--max-outage 15m\), next try in \ds$/m);
  });
  it('a job a live run holds while it waits out a backoff is said on the running row, and in --json', async () => {
    const fake = await startFake({ latencyMs: 5 });
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    const [failing] = await seedJobs(store, 3);
    await store.close();
    fake.respond((r) => (r.key === failing ? reply.serverError() : undefined));
    const child = spawnCli(['run', '--db', db, '--base-url', fake.url, '--retry-delay', '60', '--progress', 'none'], {
      env: { LLMQ_API_KEY: 'sk-test' },
    });
    const ended = collect(child, 30_000);
    try {
      const out = await waitFor(
        async () => {
          const r = (await runCli(['status', '--db', db])).stdout;
          return /^ {2}running {2}1 {2}1 waiting to retry in their run$/m.test(r) ? r : null;
        },
        { what: 'the running row to say the job backing off', timeoutMs: 15_000 },
      );
      expect(out).toMatch(/^ {2}done {5}2 {2}67%$/m);
      const json = JSON.parse((await runCli(['status', '--json', '--db', db])).stdout);
      expect(json.activeRuns[0]).toMatchObject({ live: true, backingOff: 1 });
    } finally {
      child.kill('SIGINT');
      await ended;
    }
  }, 30_000);
});
