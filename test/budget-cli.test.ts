import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { worstCaseUsage } from '../src/pricing/cost.js';
import { usd } from '../src/report/format.js';
import { budgetMessage } from '../src/cli/commands/run-action.js';
import { collect, MOCK_NOW, runCli, spawnCli } from './helpers/cli.js';
import { reply } from './helpers/fake-openai.js';
import { requestFor, seededQueue, seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';
import { all } from './helpers/store-reads.js';
import { readDb } from './helpers/e2e.js';

// $1 per thousand tokens: a request here costs cents, its worst case (prompt + 64 max_tokens) about $0.10.
const PRICE = ['--price', '1000,1000'];
const PER_TOKEN = 1000 / 1e6;

async function setup(jobs: number, o: { latencyMs?: number; model?: string } = {}) {
  const fake = await startFake({ latencyMs: o.latencyMs ?? 5, record: false });
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  await seedJobs(store, jobs, { model: o.model });
  await store.close();
  return {
    fake,
    db,
    run: (...args: string[]) => ['run', '--db', db, '--base-url', fake.url, '--progress', 'none', '--retry-delay', '0.05', ...args],
  };
}

/** The most one seeded request can cost at PRICE. */
const worst = Math.max(
  ...[0, 99].map((n) => {
    const w = worstCaseUsage(requestFor(n));
    return (w.promptTokens + w.completionTokens!) * PER_TOKEN;
  }),
);

/** Until the run's heartbeat has said four requests out (what status counts comes from it). */
async function beatWithFourOut(db: string): Promise<void> {
  for (;;) {
    const s = JSON.parse((await runCli(['status', '--json', '--db', db])).stdout);
    if (s.activeRuns[0]?.inFlight === 4) return;
    await sleep(100);
  }
}

/** A queue of `jobs` seeded jobs in a new folder. */
async function seededDb(jobs: number): Promise<string> {
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  await seedJobs(store, jobs);
  await store.close();
  return db;
}

/** `llmq run` on the offline mock, four at a time, each answer taking `latencyMs`. */
function mockRunArgs(db: string, latencyMs: string, ...more: string[]): string[] {
  return ['run', '--db', db, '--provider', 'mock', '--mock-latency', latencyMs, '--concurrency', '4', '--progress', 'none', ...more];
}

/**
 * Start a run with `args`, SIGKILL it once a heartbeat has said four requests out, and wait until a
 * later command takes it for dead (its heartbeat quiet three beats).
 */
async function killedWithFourOut(db: string, args: string[]): Promise<void> {
  const run = spawnCli(args);
  const ended = collect(run);
  await beatWithFourOut(db);
  run.kill('SIGKILL');
  expect((await ended).signal).toBe('SIGKILL');
  const { lastBeat } = await recorded(db);
  await sleep(lastBeat + 3 * 2000 + 250 - Date.now());
}

/** Money as the store reports it: attempt costs, the ledger (every run's commitments), and jobs. */
async function recorded(db: string) {
  const store = new SqliteStore(db);
  try {
    const attempts = await all(store.copier.dumpAttempts());
    const s = await store.status();
    const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
    return {
      attempts: attempts.length,
      attemptsUsd: sum(attempts.map((a) => a.costUsd ?? 0)),
      ledgerUsd: sum(s.spend.map((r) => r.spend.reservedUsd + r.spend.spentUsd + r.spend.mayBeBilledUsd)),
      jobsUsd: sum(s.byModel.map((m) => m.storedUsd)),
      pending: s.counts.pending,
      done: s.counts.done,
      /** When the last active run last beat, ms epoch. */
      lastBeat: Math.max(...s.activeRuns.map((r) => r.heartbeatAt)),
    };
  } finally {
    await store.close();
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** What `--progress none` prints last: after the run's summary, why it stopped. */
const lastLine = (stderr: string) => stderr.trimEnd().split('\n').at(-1);

describe('llmq run --budget', () => {
  it("a budget below one request's worst case sends nothing and says that one request may cost more", async () => {
    const { fake, db, run } = await setup(5);
    const r = await runCli(run('--budget', '0.01', ...PRICE));
    expect(r.code).toBe(3);
    expect(fake.received).toBe(0);
    expect(r.stderr).toMatch(/^stopped by the budget in \d+s: 0 done, 0 failed/);
    expect(lastLine(r.stderr)).toMatch(
      /^budget reached: \$0\.00 of \$0\.01; one request may cost up to \$0\.\d+ \(its prompt and all of max_tokens\), more than the \$0\.01 left; 5 jobs pending; run again with a larger --budget to go on$/,
    );
    expect((await recorded(db)).pending).toBe(5);
  });

  it('a document longer than its model takes does not stop the run at the budget: it fails unsent, the provider would refuse it', async () => {
    const fake = await startFake({ latencyMs: 5 });
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    // gpt-4o-mini takes 128,000 tokens (genai-prices): doc-1 is about 130,000, its worst case ~$0.02 at $0.15 per million
    await seedJobs(store, 3, { maxTokens: 100, text: (n) => (n === 1 ? 'word '.repeat(130_000) : `short document ${n}`) });
    await store.close();
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'plain', '--budget', '0.01']);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr.replace(/\s+/g, ' ')).toMatch(
      /failed doc-1 \(attempt 1\): not sent: 130,\d{3} tokens counted \(its prompt and max_tokens\), more than gpt-4o-mini takes in one request \(128,000\)/,
    );
    expect(r.stderr).toMatch(/finished in .*: 2 done, 1 failed/);
    expect(fake.requests.map((q) => JSON.parse(q.body).messages[0].content)).toEqual(['short document 0', 'short document 2']);
    // a budget that holds its worst case sends it: the provider says whether it takes it
    const store2 = new SqliteStore(db);
    await store2.retryFailed({}, Date.now());
    await store2.close();
    expect((await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none', '--budget', '1'])).code).toBe(0);
    expect(fake.requests).toHaveLength(3);
  });

  it('jobs refused unsent under a budget take no place in the pace: the jobs after them are sent at once', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    // an OpenAI Batch file: twenty lines without max_tokens (unbounded: refused under --budget), then two with it
    const line = (id: string, maxTokens?: number) =>
      JSON.stringify({
        custom_id: id,
        method: 'POST',
        url: '/v1/chat/completions',
        body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `hi ${id}` }], ...(maxTokens ? { max_tokens: maxTokens } : {}) },
      });
    const lines = [...Array.from({ length: 20 }, (_, i) => line(`open-${i}`)), line('capped-0', 50), line('capped-1', 50)];
    writeFileSync(join(dir, 'batch.jsonl'), `${lines.join('\n')}\n`);
    expect((await runCli(['enqueue', join(dir, 'batch.jsonl'), '--db', db])).code).toBe(0);
    const fake = await startFake({ latencyMs: 5 });
    const started = Date.now();
    // at 60 a minute, one request a second: had each refusal taken its place, the capped two waited 20 s
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--rpm', '60', '--budget', '1', ...PRICE, '--progress', 'none']);
    const tookMs = Date.now() - started;
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/: 2 done, 20 failed/);
    expect(fake.requests).toHaveLength(2);
    expect(tookMs).toBeLessThan(12_000);
  });

  it('on the offline mock, says that a budget with no --price never stops the run (the mock bills nothing), and not with one', async () => {
    const db = await seededQueue(3);
    const free = await runCli(['run', '--db', db, ...MOCK_NOW, '--budget', '0.01']);
    expect(free.code, free.stderr).toBe(0);
    expect(free.stderr).toContain('the offline mock bills nothing, so --budget and --budget-total never stop this run');
    const priced = await runCli(['run', '--db', db, ...MOCK_NOW, '--budget-total', '1', ...PRICE]);
    expect(priced.code, priced.stderr).toBe(0);
    expect(priced.stderr).not.toContain('bills nothing');
  });

  it('a budget tried offline (the mock with --price): status says nothing was billed, and estimate of a real provider leaves that price', async () => {
    const db = await seededQueue(3);
    expect((await runCli(['run', '--db', db, ...MOCK_NOW, '--budget', '1', ...PRICE, '--limit', '2'])).code).toBe(0);
    const status = (await runCli(['status', '--db', db])).stdout;
    expect(status).toMatch(/^ {2}cost {5}\$[\d.]+ so far · gpt-4o-mini\n {11}on the offline mock at the price given: nothing was billed$/m);
    // a run of a real provider sends the mock's jobs again, at the provider's price: the estimate says that one
    const e = JSON.parse((await runCli(['estimate', '--db', db, '--json'])).stdout);
    expect(e.models[0].price.source).toMatch(/^genai-prices /);
    expect(e.jobs).toBe(3);
  });

  it('a proposed command pasted with its USD placeholder says to put an amount there, not only that the value is invalid', async () => {
    const db = await seededQueue(1);
    for (const flag of ['--budget', '--budget-total']) {
      const r = await runCli(['run', '--db', db, ...MOCK_NOW, flag, 'USD']);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`option '${flag} <usd>' argument 'USD' is invalid. USD stands for an amount to choose`);
    }
    expect((await runCli(['run', '--db', db, ...MOCK_NOW, '--budget', '-1'])).stderr).toContain('Expected a number greater than 0.');
  });

  it('says what the next request may cost when much of the budget is left, and not when it is spent', () => {
    // half of --budget-total spent by earlier runs (a try that may be billed); the next would take more than the rest
    expect(budgetMessage({ scope: 'total', limitUsd: 0.01, committedUsd: 0.00525, nextUsd: 0.00525 }, 4)).toBe(
      'budget reached: $0.00525 of $0.01 for the whole queue; one request may cost up to $0.00525 (its prompt and all of max_tokens), ' +
        'more than the $0.00475 left; 4 jobs pending; run again with a larger --budget-total to go on',
    );
    // a budget spent on tries no answer came for (an outage's timeouts) says so
    expect(budgetMessage({ scope: 'run', limitUsd: 0.005, committedUsd: 0.00472, nextUsd: 0.0004 }, 60, { tries: 11, usd: 0.00472 })).toBe(
      'budget reached: $0.00472 of $0.005 ($0.00472 of it the worst case of 11 tries no answer came for: timed out or cut short, ' +
        'which the provider may bill); 60 jobs pending; run again to go on: --budget counts what one run spends, so the next may spend as much again (--budget-total caps the whole queue)',
    );
    expect(budgetMessage({ scope: 'run', limitUsd: 1, committedUsd: 0.97, nextUsd: 0.1 }, 1)).toBe(
      'budget reached: $0.97 of $1.00; 1 job pending; run again to go on: --budget counts what one run spends, so the next may spend as much again (--budget-total caps the whole queue)',
    );
  });

  it('stops with exit 3 when the next request would not fit, never above the budget, and says how to go on', async () => {
    const { fake, db, run } = await setup(100);
    const r = await runCli(run('--budget', '1', '--concurrency', '8', ...PRICE));
    expect(r.code).toBe(3);
    const m = await recorded(db);
    expect(lastLine(r.stderr)).toBe(
      `budget reached: ${usd(m.ledgerUsd)} of $1.00; ${m.pending} jobs pending; run again to go on: --budget counts what one run spends, so the next may spend as much again (--budget-total caps the whole queue)`,
    );
    expect(m.done).toBeGreaterThan(20); // in-flight worst cases settled far lower, and the room was used again
    expect(m.pending).toBe(100 - m.done);
    expect(m.attemptsUsd).toBeLessThanOrEqual(1);
    expect(m.ledgerUsd).toBeLessThanOrEqual(1);
    expect(m.ledgerUsd + worst).toBeGreaterThan(1); // it stopped only when one more could not fit
    expect(m.jobsUsd).toBeCloseTo(m.attemptsUsd, 9);
    // every request that left is recorded and paid for
    expect(fake.received).toBe(m.attempts);

    // status: per model and per run, with the run's budget
    const s = JSON.parse((await runCli(['status', '--json', '--db', db, ...PRICE])).stdout);
    expect(s.cost.byModel[0].usd).toBeCloseTo(m.jobsUsd, 9);
    expect(s.cost.byRun).toHaveLength(1);
    expect(s.cost.byRun[0]).toMatchObject({
      budgetUsd: 1,
      budgetTotalUsd: null,
      inFlight: 0,
      reservedUsd: 0,
      mayBeBilledTries: 0,
      live: false,
    });
    expect(s.cost.byRun[0].spentUsd).toBeCloseTo(m.attemptsUsd, 6);
    const text = (await runCli(['status', '--db', db])).stdout;
    expect(text).toMatch(/^ {2}runs {5}[0-9a-f]{8} {2}\$0\.\d\d\d? · budget \$1\.00$/m);
    // the run it proposes for the rest spends under the same budget and prices: pasted, a bare llmq
    // run would spend with no cap, at genai-prices' price
    expect(text.replace(/\n {4}/g, ' ')).toContain(`llmq run --base-url ${fake.url} --budget 1 --price ${PRICE[1]} --db ${db}`);
    // without price flags, the rest is reckoned at the price the run was given, as its answers were
    // stored: not "$0.92 so far, $0.0006 more to finish" at genai-prices' price of the model
    expect(text).toMatch(/^ {2}prices {3}--price of run [0-9a-f]{8}$/m);
    const bare = JSON.parse((await runCli(['status', '--json', '--db', db])).stdout);
    expect(bare.cost.remainingUsd).toBeGreaterThan(0.5);
    expect(bare.cost.remainingUsd).toBeCloseTo(s.cost.remainingUsd, 9);
    // a price given to status itself still wins
    const given = (await runCli(['status', '--db', db, '--price', '0.15,0.6'])).stdout;
    expect(given).toMatch(/^ {2}prices {3}--price$/m);

    // a larger budget goes on from there
    const more = await runCli(run('--budget', '100', ...PRICE));
    expect(more.code).toBe(0);
    expect((await recorded(db)).pending).toBe(0);
  });

  it('a provider that counts ten times the prompt tokens llmq counts: later requests are reserved at what answers showed, never above the budget', async () => {
    const { fake, db, run } = await setup(20);
    const prompt = worstCaseUsage(requestFor(0)).promptTokens;
    // another tokenizer, or a proxy adding its own text: each answer bills 10x the counted prompt
    fake.respond(() => reply.ok({ usage: { prompt_tokens: 10 * prompt, completion_tokens: 10 } }));
    const r = await runCli(run('--budget', '1', '--concurrency', '1', ...PRICE));
    expect(r.code).toBe(3);
    const m = await recorded(db);
    // reserved at the count alone (about $0.10), each answer costing about $0.36 came past the budget
    expect(m.done).toBeGreaterThanOrEqual(2);
    expect(m.attemptsUsd).toBeLessThanOrEqual(1);
    expect(m.ledgerUsd).toBeLessThanOrEqual(1);
  });

  it('two runs on one database share --budget-total: together they never spend more than it', async () => {
    const { db, run } = await setup(150, { latencyMs: 20 });
    const [a, b] = await Promise.all([1, 2].map(() => runCli(run('--budget-total', '1.5', '--concurrency', '4', ...PRICE))));
    expect([a!.code, b!.code]).toEqual([3, 3]);
    for (const r of [a!, b!])
      expect(lastLine(r.stderr)).toMatch(
        /^budget reached: \$1\.\d\d of \$1\.50 for the whole queue; \d+ jobs pending; run again with a larger --budget-total to go on$/,
      );
    const m = await recorded(db);
    expect(m.ledgerUsd).toBeLessThanOrEqual(1.5);
    expect(m.attemptsUsd).toBeLessThanOrEqual(1.5);
    expect(m.ledgerUsd + worst).toBeGreaterThan(1.5);
    // a later run with the same total has nothing left to spend: it sends nothing
    const later = await runCli(run('--budget-total', '1.5', ...PRICE));
    expect(later.code).toBe(3);
    expect((await recorded(db)).attempts).toBe(m.attempts);
  });

  it('a run killed with SIGKILL mid-flight: its requests count as may be billed, and the next run stays within --budget-total', async () => {
    // the first request goes alone for 2 s; answered at 3 s, a kill slowed by a loaded machine could
    // land with three out (the first answered, the fifth not yet sent): none is answered before 10 s
    const { fake, db, run } = await setup(60, { latencyMs: 10_000 });
    const first = spawnCli(run('--budget-total', '1', '--concurrency', '4', ...PRICE));
    const ended = collect(first);
    await fake.waitForRequests(4);
    first.kill('SIGKILL');
    expect((await ended).signal).toBe('SIGKILL');
    expect((await recorded(db)).ledgerUsd).toBeGreaterThan(3 * 0.05); // the four worst cases are held in the database
    // The same machine knows it is dead once its heartbeat has been quiet for three beats (2 s each,
    // at least 5 s; src/scheduler/run.ts): time, not an event (nothing changes until the next run
    // looks), so wait that long past its last beat.
    const { lastBeat } = await recorded(db);
    await sleep(lastBeat + 3 * 2000 + 250 - Date.now());
    fake.configure({ latencyMs: 5 });
    const second = await runCli(run('--budget-total', '1', '--concurrency', '4', ...PRICE));
    expect(second.code).toBe(3);
    const m = await recorded(db);
    expect(m.ledgerUsd).toBeLessThanOrEqual(1);
    expect(m.attemptsUsd).toBeLessThanOrEqual(1);
    const s = JSON.parse((await runCli(['status', '--json', '--db', db])).stdout);
    expect(s.cost.mayBeBilled.tries).toBe(4);
    expect(s.cost.mayBeBilled.usd).toBeGreaterThan(4 * 0.05);
    expect(s.cost.mayBeBilled.usd).toBeLessThanOrEqual(4 * worst + 1e-9);
    expect(s.cost.byRun.find((x: { exitReason?: string; mayBeBilledTries: number }) => x.mayBeBilledTries === 4)).toBeTruthy();
    // what was answered plus what may have been billed stays within the budget
    expect(m.attemptsUsd + s.cost.mayBeBilled.usd).toBeLessThanOrEqual(1 + 1e-9);
    const status = (await runCli(['status', '--db', db])).stdout;
    expect(status).toMatch(/may be billed: 4 tries, up to \$0\.\d\d/);
    // the run's money goes on as many lines as it takes, never cut to fit 80 columns
    expect(status).toMatch(/^ {2}runs {5}[0-9a-f]{8} {2}\$0\.\d+ · queue budget \$1\.00/m);
    expect(status).not.toContain('…');
    // but a proposed command, kept whole on its own line so that it pastes as one
    for (const line of status.split('\n')) if (!line.startsWith('    llmq ')) expect(line.length, line).toBeLessThanOrEqual(80);
  });

  it('a mock run with a price and a budget killed with SIGKILL: what it had out is may-be-billed at that price, and said not billed', async () => {
    const db = await seededDb(8);
    await killedWithFourOut(db, mockRunArgs(db, '10000', ...PRICE, '--budget', '5'));
    const status = (await runCli(['status', '--db', db])).stdout;
    // before, beside "on the offline mock at the price given: nothing was billed", a bare "may be billed"
    expect(status).toMatch(
      /may be billed: 4 tries, up to \$\S+ \(no usable answer came; on the offline mock, at the price given: not billed\)/,
    );
  }, 30_000);

  it('a run without a budget killed with SIGKILL: status counts the requests it had out as may be billed, at a cost not known', async () => {
    const { fake, db, run } = await setup(20, { latencyMs: 10_000 }); // none answered before the kill, as above
    const first = spawnCli(run('--concurrency', '4', ...PRICE));
    const ended = collect(first);
    await fake.waitForRequests(4);
    await beatWithFourOut(db);
    first.kill('SIGKILL');
    expect((await ended).signal).toBe('SIGKILL');
    const { lastBeat } = await recorded(db);
    await sleep(lastBeat + 3 * 2000 + 250 - Date.now());
    const s = JSON.parse((await runCli(['status', '--json', '--db', db])).stdout);
    expect(s.cost.mayBeBilled).toEqual({ tries: 4, usd: 0, unpricedTries: 4 });
    expect(s.cost.byRun[0].unpricedInFlight).toBe(4);
    const status = (await runCli(['status', '--db', db])).stdout;
    // about: its last heartbeat's count, which what it sent after leaves out
    expect(status).toContain('may be billed: about 4 tries, cost not known (no usable answer came)');
    expect(status).toMatch(/^ {2}runs {5}[0-9a-f]{8} {2}\$0\.\d+ · died · may be billed: about 4 tries, cost not known$/m);
    // the next run takes back what the dead run held, and says so before it is asked
    const { counts } = s;
    expect(counts.running).toBeGreaterThanOrEqual(4);
    expect(status).toContain(`to send the ${counts.pending} pending and the ${counts.running} a stopped run left running:`);
    // still counted once the next run has taken the dead run's jobs back and sent them again
    fake.configure({ latencyMs: 5 });
    expect((await runCli(run('--concurrency', '4', ...PRICE))).code).toBe(0);
    const after = JSON.parse((await runCli(['status', '--json', '--db', db])).stdout);
    expect(after.counts).toMatchObject({ pending: 0, running: 0, done: 20 });
    expect(after.cost.mayBeBilled).toEqual({ tries: 4, usd: 0, unpricedTries: 4 });
    // with the queue done, the dead run is still marked among the runs (and only it)
    const afterText = (await runCli(['status', '--db', db])).stdout;
    expect(afterText.match(/· died ·/g)).toHaveLength(1);
    expect(after.cost.byRun.map((r: { died: boolean }) => r.died).sort()).toEqual([false, true]);
    // show says of a job the dead run held that its first try left no record
    const held = readDb(db).jobs.find((j) => j.attempts === 2)!;
    const shown = (await runCli(['show', held.key, '--db', db])).stdout;
    expect(shown).toContain('1 try left no record: the run holding it died (a request that had left may be billed)');
    expect(shown).toMatch(/^ {2}#2 .* done/m);
    const fresh = readDb(db).jobs.find((j) => j.attempts === 1)!;
    expect((await runCli(['show', fresh.key, '--db', db])).stdout).not.toContain('left no record');
  });

  it('a run killed within its first second has stored what it had out (early heartbeats)', async () => {
    const { fake, db, run } = await setup(20, { latencyMs: 5000 });
    const first = spawnCli(run('--concurrency', '4', '--rpm', '600', ...PRICE));
    const ended = collect(first);
    await fake.waitForRequests(1);
    let beat: { startedAt: number; heartbeatAt: number; inFlight: number | null } | undefined;
    for (;;) {
      beat = JSON.parse((await runCli(['status', '--json', '--db', db])).stdout).activeRuns[0];
      if (beat && (beat.inFlight ?? 0) > 0) break;
      await sleep(50);
    }
    first.kill('SIGKILL');
    await ended;
    // the regular beat comes every 2 s: this one came before it
    expect(beat!.heartbeatAt - beat!.startedAt).toBeLessThan(1900);
  });

  it('a killed run on the offline mock: nothing may be billed', async () => {
    const db = await seededDb(20);
    await killedWithFourOut(db, mockRunArgs(db, '3000'));
    const s = JSON.parse((await runCli(['status', '--json', '--db', db])).stdout);
    expect(s.activeRuns[0]).toMatchObject({ gone: true, inFlight: 4 });
    expect(s.cost.mayBeBilled).toEqual({ tries: 0, usd: 0, unpricedTries: 0 });
  });

  it('a model without a price and a budget: refuses to start, names the model and --price, sends nothing', async () => {
    const { fake, run } = await setup(3, { model: 'llama3.1:8b' });
    const r = await runCli(run('--budget', '5'));
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/--budget needs a price .* none is known for llama3\.1:8b \(3 jobs pending\)\. Give one with --price IN,OUT/);
    expect(fake.received).toBe(0);
    const priced = await runCli(run('--budget', '5', '--price', '0,0'));
    expect(priced.code).toBe(0);
  });

  it('the llmq run suggested to pick up what is left carries the budget, the price and the limits, so pasted it still holds', async () => {
    const { db, fake, run } = await setup(6);
    const limits = ['-c', '3', '--rpm', '6000', '--tpm', '900000', '--max-attempts', '7'];
    const r = await runCli(run('--budget', '100', '--limit', '2', ...limits, ...PRICE, '--progress', 'plain'));
    expect(r.code, r.stderr).toBe(0);
    const carried = `--concurrency 3 --rpm 6000 --tpm 900000 --max-attempts 7 --budget 100 --price 1000,1000 --db ${db}`;
    // the command is wrapped with shell line continuations
    expect(r.stderr.replace(/ \\\n\s+/g, ' ')).toContain(`llmq run --base-url ${fake.url} ${carried}`);
    // and status, from what the run stored
    expect((await runCli(['status', '--db', db])).stdout.replace(/\n {4}/g, ' ')).toContain(`llmq run --base-url ${fake.url} ${carried}`);
    // the defaults are not said
    const plain = await runCli(run('--limit', '1', '-c', '8', '--max-attempts', '5', '--progress', 'plain'));
    expect(plain.stderr.replace(/ \\\n\s+/g, ' ')).toContain(`llmq run --base-url ${fake.url} --db ${db}`);
  });

  it("after the queue's --budget-total stopped a run, status proposes raising it: the same amount would stop at once", async () => {
    const { db, run } = await setup(6);
    const stopped = await runCli(run('--budget-total', '0.15', ...PRICE));
    expect(stopped.code).toBe(3);
    const text = (await runCli(['status', '--db', db])).stdout.replace(/\n {4}/g, ' ');
    expect(text).toMatch(/ended .* ago \(budget: --budget-total\)/);
    expect(text).toContain("the last run stopped at the queue's --budget-total of $0.15; raise it to go on");
    // with what its runs committed against it: the new amount is chosen from there
    const said = /\(its runs have committed \$([\d.]+) of it: answers, and tries that may be billed\)/.exec(text);
    expect(said, text).not.toBeNull();
    expect(Number(said![1])).toBeGreaterThan(0);
    expect(Number(said![1])).toBeLessThanOrEqual(0.15);
    expect(text).toMatch(/llmq run --base-url \S+ --budget-total USD --price 1000,1000 --db/);
    expect(JSON.parse((await runCli(['status', '--json', '--db', db])).stdout).lastRun.budgetReached).toBe('total');
    // retry-failed proposes the same
    const store = new SqliteStore(db);
    store.db.prepare(`UPDATE jobs SET state = 'failed', error = 'x' WHERE seq = (SELECT min(seq) FROM jobs WHERE state = 'pending')`).run();
    await store.close();
    const retried = await runCli(['retry-failed', '--db', db]);
    expect(retried.stderr).toMatch(
      /--budget-total USD --price 1000,1000 --db \S+ to try it again \(the last run stopped at the queue's --budget-total: raise it\)\.$/m,
    );
    // a pasted placeholder is refused before anything is sent
    const pasted = await runCli(run('--budget-total', 'USD', ...PRICE));
    expect(pasted.code).toBe(1);
    expect(pasted.stderr).toContain("'--budget-total <usd>' argument 'USD' is invalid");
    // the run's own end, with failed jobs to try again, proposes the same: the same amount would stop at once
    const failOne = new SqliteStore(db);
    failOne.db
      .prepare(`UPDATE jobs SET state = 'failed', error = 'x' WHERE seq = (SELECT min(seq) FROM jobs WHERE state = 'pending')`)
      .run();
    await failOne.close();
    const spent = await runCli(run('--budget-total', '0.15', ...PRICE));
    expect(spent.code).toBe(3);
    const proposed = spent.stderr.replace(/ \\\n\s+/g, ' ');
    expect(proposed).toMatch(/llmq run --base-url \S+ --budget-total USD --price 1000,1000 --db/);
    expect(proposed).not.toMatch(/llmq run .*--budget-total 0\.15/);
    // a run's own --budget that answered some and stopped with most of it left (one request's worst
    // case is $0.103) is to raise as well, as the run itself says; one spent to the end would be the
    // same again (the next run may spend as much again: test/cli-again.test.ts)
    const own = await runCli(run('--budget', '0.15', ...PRICE));
    expect(own.code).toBe(3);
    expect(own.stderr).toContain('run again with a larger --budget to go on');
    const after = (await runCli(['status', '--db', db])).stdout.replace(/\n {4}/g, ' ');
    expect(after).toMatch(/ended .* ago \(budget: --budget\)/);
    expect(after).not.toContain('--budget-total of');
    expect(after).toContain(
      "the last run's --budget of $0.15 is too small for its requests (one may cost more than was left); raise it to go on",
    );
    expect(after).toMatch(/llmq run --base-url \S+ --budget USD --price 1000,1000 --db/);
  });

  it('after a --budget smaller than one request stopped a run before it sent anything, status and retry-failed propose raising it', async () => {
    const { db, fake, run } = await setup(6);
    const stopped = await runCli(run('--budget', '0.01', ...PRICE));
    expect(stopped.code).toBe(3);
    expect(fake.received).toBe(0);
    expect(stopped.stderr).toContain('more than the $0.01 left; 6 jobs pending; run again with a larger --budget to go on');
    const text = (await runCli(['status', '--db', db])).stdout.replace(/\n {4}/g, ' ');
    expect(text).toContain(
      "the last run's --budget of $0.01 is too small for its requests (one may cost more than was left); raise it to go on",
    );
    expect(text).toMatch(/llmq run --base-url \S+ --budget USD --price 1000,1000 --db/);
    expect(JSON.parse((await runCli(['status', '--json', '--db', db])).stdout).lastRun).toMatchObject({
      budgetReached: 'run',
      budgetTooSmall: true,
    });
    const store = new SqliteStore(db);
    store.db.prepare(`UPDATE jobs SET state = 'failed', error = 'x' WHERE seq = (SELECT min(seq) FROM jobs WHERE state = 'pending')`).run();
    await store.close();
    const retried = await runCli(['retry-failed', '--db', db]);
    expect(retried.stderr).toMatch(
      /--budget USD --price 1000,1000 --db \S+ to try it again \(the last run's --budget is too small for its requests: raise it\)\.$/m,
    );
    const pasted = await runCli(run('--budget', 'USD', ...PRICE));
    expect(pasted.code).toBe(1);
    expect(pasted.stderr).toContain("'--budget <usd>' argument 'USD' is invalid");
  });

  it('--via batch or auto with a budget is refused before anything is sent: the batch lane reserves nothing', async () => {
    const { fake, db, run } = await setup(3);
    for (const via of [
      ['--via', 'batch'],
      ['--via', 'auto', '--deadline', '1h'],
    ]) {
      for (const budget of [
        ['--budget', '5'],
        ['--budget-total', '5'],
      ]) {
        const r = await runCli(run(...via, ...budget));
        expect(r.code, r.stderr).toBe(1);
        expect(r.stderr).toContain('--budget and --budget-total hold online requests only');
      }
    }
    expect(fake.received).toBe(0);
    expect(fake.batches.count('create')).toBe(0);
    expect(await recorded(db)).toMatchObject({ attempts: 0, pending: 3, ledgerUsd: 0 });
  });

  it('a try that timed out may be billed: status and show count it at its worst case', async () => {
    const { fake, db, run } = await setup(2);
    fake.respond((q) => (q.index === 1 ? reply.hang() : undefined));
    const r = await runCli(run('--timeout', '1', '--concurrency', '1', ...PRICE, '--progress', 'plain'));
    expect(r.code).toBe(0);
    const w = worstCaseUsage(requestFor(0));
    const upTo = (w.promptTokens + w.completionTokens!) * PER_TOKEN;
    // the run's own summary says it, not only status
    expect(r.stderr).toContain(`  1 try may be billed, up to ${usd(upTo)} (sent, no usable answer; llmq status counts them)`);
    const s = JSON.parse((await runCli(['status', '--json', '--db', db])).stdout);
    expect(s.cost.mayBeBilled.tries).toBe(1);
    expect(s.cost.mayBeBilled.usd).toBeCloseTo(upTo, 9);
    const shown = await runCli(['show', 'doc-0', '--db', db]);
    expect(shown.stdout).toContain(`may be billed: 1 try, up to $${upTo.toFixed(2)}`);
    expect(shown.stdout).toMatch(/^ {2}cost {6}\$0\.0\d+$/m);
    const json = JSON.parse((await runCli(['show', 'doc-0', '--json', '--db', db])).stdout);
    expect(json.attempts.map((a: { mayBeBilled: boolean }) => a.mayBeBilled)).toEqual([true, false]);
  });

  it('--help names exit code 3', async () => {
    const r = await runCli(['run', '--help']);
    expect(r.stdout).toMatch(/^ {2}3 {4}stopped by --budget or --budget-total/m);
    expect(r.stdout).toContain('--budget <usd>');
    expect(r.stdout).toContain('--budget-total <usd>');
  });
});
