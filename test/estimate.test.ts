import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ClaimedJob, Usage } from '../src/store/types.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { all } from './helpers/store-reads.js';
import { estimateRun, type Estimate } from '../src/report/estimate.js';
import { renderEstimate } from '../src/report/estimate-text.js';
import { paceSeconds } from '../src/report/estimate-time.js';
import { loadPriceTable } from '../src/pricing/price-table.js';
import { estimatePromptTokens } from '../src/provider/tokens.js';
import { MOCK_NOW, runCli } from './helpers/cli.js';
import { requestFor, seededQueue, seedJobs } from './helpers/seed.js';
import { jobKey } from '../src/request.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';

const MODEL = 'gpt-test';
const BASE = 'http://127.0.0.1:9/v1';
// $1 per thousand prompt tokens, $2 per thousand completion tokens
const prices = loadPriceTable({ price: [1000, 2000] });
const text = (n: number) => `document ${n}: ${'lorem ipsum '.repeat(n + 1)}`;
const promptOf = (n: number) => estimatePromptTokens(JSON.parse(requestFor(n, { model: MODEL, text: text(n) })));
const T = Date.now();

/**
 * 30 jobs (max_tokens 64), priority -1 for every third: 10 answered, by a provider that counts 7
 * prompt tokens more than the text and answers 10, 20 ... 100 tokens in 1 s; one running job of a
 * dead run (lease expired); one pending job whose attempts are used up; 18 pending.
 */
/** Answer `jobs` for run-a, each in a second, with the usage `usageOf` gives it. */
async function answer(store: SqliteStore, jobs: readonly ClaimedJob[], usageOf: (job: ClaimedJob, i: number) => Usage): Promise<void> {
  for (const [i, job] of jobs.entries()) {
    const usage = usageOf(job, i);
    const attempt = {
      key: job.key,
      runId: 'run-a',
      attempt: 1,
      startedAt: T,
      endedAt: T + 1000,
      status: 200,
      outcome: 'done' as const,
      error: null,
      usage,
    };
    await store.complete(job.key, { owner: 'run-a', output: 'x', response: '{}', usage, attempt });
  }
}

async function seeded() {
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  const keys = await seedJobs(store, 30, { model: MODEL, maxTokens: 64, text, priority: (n) => (n % 3 === 0 ? -1 : 0) });
  const byKey = new Map(keys.map((k, n) => [k, n]));
  await store.startRun({ id: 'run-a', host: 'h', pid: 1, startedAt: T, options: {} });
  const answered = (await store.claim({ owner: 'run-a', limit: 10, now: T, leaseUntil: T + 60_000, maxAttempts: 5 })).jobs;
  await answer(store, answered, (job, i) => ({ promptTokens: promptOf(byKey.get(job.key)!) + 7, completionTokens: 10 * (i + 1) }));
  const [held] = (await store.claim({ owner: 'run-dead', limit: 1, now: T, leaseUntil: T - 1, maxAttempts: 5 })).jobs;
  const [tired] = (await store.claim({ owner: 'run-a', limit: 1, now: T, leaseUntil: T + 60_000, maxAttempts: 5 })).jobs;
  store.db.prepare("UPDATE jobs SET state = 'pending', attempts = 5, lease_owner = NULL WHERE key = ?").run(tired!.key);
  await store.saveLaneLimits({ baseUrl: BASE, model: MODEL, rpm: 60, tpm: null, source: 'headers', at: T });
  // what a run would take, in its order: (priority, seq), the tired one left out
  const order = keys
    .map((k, n) => ({ k, n }))
    .filter(({ k }) => !answered.some((j) => j.key === k) && k !== tired!.key)
    .sort((a, b) => (a.n % 3 === 0 ? -1 : 0) - (b.n % 3 === 0 ? -1 : 0) || a.n - b.n)
    .map(({ n }) => n);
  expect(order).toContain(byKey.get(held!.key));
  return { db, store, order };
}

describe('estimate', () => {
  it('counts what a run would take, learns answer lengths and the prompt overhead from answers, prices and times it', async () => {
    const { store, order } = await seeded();
    const e = await estimateRun(store, { prices, now: T, baseUrl: BASE, concurrency: 4 });
    expect(e.jobs).toBe(19);
    expect(e.exhausted).toBe(1);
    const prompt = order.reduce((a, n) => a + promptOf(n) + 7, 0);
    const m = e.models[0]!;
    expect(m).toMatchObject({ model: MODEL, jobs: 19, promptTokens: prompt, promptCorrection: 7, latencyMs: 1000 });
    // answers were 10..100 tokens: mean 55, p90 90, but none can pass max_tokens 64
    expect(m.completion).toEqual({ basis: 'answers', answered: 10, mean: 55, p90: 90, low: 19 * 55, high: 19 * 64, ceiling: 19 * 64 });
    expect(m.cost!.low).toBeCloseTo(prompt * 0.001 + 19 * 55 * 0.002, 9);
    expect(m.cost!.high).toBeCloseTo(prompt * 0.001 + 19 * 64 * 0.002, 9);
    expect(m.cost!.worst).toBeCloseTo(m.cost!.high, 9);
    expect(m.batchCost).toBeNull(); // --price of a model whose provider nobody knows: no batch price
    expect(m.price).toEqual({ input: 1000, output: 2000, source: '--price' });
    // 60 rpm learned from headers: 19 s; the work (19 x 1 s over 4 slots) is less
    expect(m.limits).toEqual({
      rpm: 60,
      tpm: null,
      learned: { source: 'headers', at: T },
      learnedLimits: { rpm: true, tpm: false },
      learnedElsewhere: [],
    });
    expect(e.seconds).toBeCloseTo(19, 9);
    expect(e.cost).toEqual(m.cost);

    // --limit takes the first jobs in the run's order; a lower --rpm wins over the learned one
    const first = await estimateRun(store, { prices, now: T, baseUrl: BASE, limit: 5, rpm: 30 });
    expect(first.jobs).toBe(5);
    expect(first.models[0]!.promptTokens).toBe(order.slice(0, 5).reduce((a, n) => a + promptOf(n) + 7, 0));
    expect(first.seconds).toBeCloseTo(10, 9);
    await store.close();
  });

  it('before any answer: answers up to max_tokens, time from the flags alone, batch at half for OpenAI, unknown price as unknown', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 4, { maxTokens: 100 });
    await store.enqueue(
      [0, 1].map((n) => {
        const request = requestFor(n, { model: 'my-finetune' });
        return { itemId: `tuned-${n}`, source: 'seed', meta: null, key: jobKey(request), request, model: 'my-finetune', priority: 0 };
      }),
      T,
    );
    const e = await estimateRun(store, { prices: loadPriceTable(), now: T, baseUrl: BASE, tpm: 6000 });
    const mini = e.models.find((m) => m.model === 'gpt-4o-mini')!;
    expect(mini.completion).toMatchObject({ basis: 'max_tokens', answered: 0, low: 0, high: 400, ceiling: 400 });
    const prompt = [0, 1, 2, 3].reduce((a, n) => a + estimatePromptTokens(JSON.parse(requestFor(n))), 0);
    expect(mini.cost!.low).toBeCloseTo(prompt * 0.15e-6, 12);
    expect(mini.cost!.high).toBeCloseTo(prompt * 0.15e-6 + 400 * 0.6e-6, 12);
    expect(mini.batchCost!.high).toBeCloseTo(mini.cost!.high / 2, 12);
    expect(mini.paceSeconds).toBeCloseTo(((prompt + 400) / 6000) * 60, 9);
    expect(e.unpriced).toEqual(['my-finetune']);
    expect(e.cost).toBeNull();
    expect(e.models.find((m) => m.model === 'my-finetune')!.cost).toBeNull();
    await store.close();
  });

  it("leaves out of its figures the jobs longer than their model's context, which the provider refuses unbilled, and names them", async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    // gpt-4o-mini takes 128,000 tokens (genai-prices): doc-1's prompt fits alone but not with its
    // max_tokens, doc-3's is three times over; doc-0 and doc-2 are short
    const long = (n: number) => (n === 1 ? 'word '.repeat(127_400) : n === 3 ? 'word '.repeat(384_000) : `short document ${n}`);
    const keys = await seedJobs(store, 4, { maxTokens: 1000, text: long });
    const prompt = (n: number) => estimatePromptTokens(JSON.parse(requestFor(n, { maxTokens: 1000, text: long(n) })));
    expect(prompt(1)).toBeLessThan(128_000);
    expect(prompt(1) + 1000).toBeGreaterThan(128_000);
    await store.enqueue(
      [
        {
          itemId: 'also doc 3.txt',
          source: 'seed',
          meta: null,
          key: keys[3]!,
          request: requestFor(3, { maxTokens: 1000, text: long(3) }),
          model: 'gpt-4o-mini',
          priority: 0,
        },
      ],
      T,
    );
    const e = await estimateRun(store, { prices: loadPriceTable(), now: T, baseUrl: BASE, tpm: 600_000 });
    const mini = e.models[0]!;
    expect(mini).toMatchObject({ model: 'gpt-4o-mini', jobs: 4, contextWindow: 128_000, tooLong: 2, tooLongPrompts: 1 });
    expect(e).toMatchObject({
      jobs: 4,
      tooLong: 2,
      tooLongPrompts: 1,
      tooLongItems: [
        { id: 'doc-1', tokens: prompt(1) + 1000 },
        { id: 'doc-3', tokens: prompt(3) + 1000 },
      ],
    });
    // the tokens, cost and pace are those of the two that fit
    expect(mini.promptTokens).toBe(prompt(0) + prompt(2));
    expect(mini.completion.ceiling).toBe(2000);
    expect(mini.cost!.worst).toBeCloseTo((prompt(0) + prompt(2)) * 0.15e-6 + 2000 * 0.6e-6, 12);
    expect(mini.paceSeconds).toBe(paceSeconds(2, prompt(0) + prompt(2) + 2000, mini.limits));
    const text = renderEstimate(e, { db: 'q.db' }).replace(/\n {2}(?! )/g, ' ');
    expect(text).toContain(
      '2 jobs ask more tokens than the model takes in one request (gpt-4o-mini: 128,000, the prompt and max_tokens together): ' +
        'the provider refuses them unbilled, and the figures below leave them out. Split or shorten those documents, lower max_tokens, or',
    );
    expect(text).toContain(
      `doc-1 (${(prompt(1) + 1000).toLocaleString('en-US')}) and doc-3 (${(prompt(3) + 1000).toLocaleString('en-US')}).`,
    );
    expect(text).toContain('gpt-4o-mini  4 jobs, 2 too long (left out below)');
    // a price given on the command line changes what it costs, not what the model takes
    const priced = await estimateRun(store, { prices: loadPriceTable({ price: [1, 2] }), now: T, baseUrl: BASE });
    expect(priced.tooLong).toBe(2);
    // nothing refuses a long prompt on the offline mock: all four are priced (at nothing)
    const mock = await estimateRun(store, { prices: loadPriceTable({ free: true }), now: T, baseUrl: BASE });
    expect(mock.models[0]).toMatchObject({
      contextWindow: null,
      tooLong: 0,
      promptTokens: [0, 1, 2, 3].reduce((a, n) => a + prompt(n), 0),
    });
    await store.close();
  });

  it('says how many jobs failed, which a run does not send: "0 jobs to send" of a queue of failed jobs read as nothing left to do', async () => {
    const db = await seededQueue(2);
    expect((await runCli(['run', '--db', db, ...MOCK_NOW, '--mock-failure-rate', '1', '--max-attempts', '1'])).code).toBe(2);
    const r = await runCli(['estimate', '--db', db]);
    expect(r.stdout).toMatch(/: 0 jobs to send\n {2}2 more have failed: a run sends none of them \(llmq retry-failed puts them back\)\n$/);
    expect(JSON.parse((await runCli(['estimate', '--db', db, '--json'])).stdout)).toMatchObject({ jobs: 0, failed: 2 });
  });

  it("learns answer lengths from real answers only: the offline mock's stand-ins count neither in the mean nor the p90", async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 20, { model: MODEL, maxTokens: 500 });
    /** `n` jobs answered by run `id` (of `provider`), each with `completion` tokens. */
    const answeredBy = async (id: string, provider: string | undefined, n: number, completion: number) => {
      await store.startRun({ id, host: 'h', pid: 1, startedAt: T, options: provider ? { provider } : {} });
      const got = await store.claim({ owner: id, limit: n, now: T, leaseUntil: T + 60_000, maxAttempts: 5 });
      for (const job of got.jobs) {
        const usage = { promptTokens: 10, completionTokens: completion };
        const attempt = {
          key: job.key,
          runId: id,
          attempt: 1,
          startedAt: T,
          endedAt: T + 5,
          status: 200,
          outcome: 'done' as const,
          error: null,
          usage,
        };
        await store.complete(job.key, { owner: id, output: 'x', response: '{}', usage, attempt });
      }
    };
    await answeredBy('mocky', 'mock', 6, 9);
    const mockOnly = await estimateRun(store, { prices, now: T, baseUrl: BASE });
    expect(mockOnly.models[0]!.completion).toMatchObject({ basis: 'max_tokens', answered: 0, mean: null, p90: null });
    await answeredBy('real', undefined, 4, 300);
    const mixed = await estimateRun(store, { prices, now: T, baseUrl: BASE });
    expect(mixed.models[0]!.completion).toMatchObject({ basis: 'answers', answered: 4, mean: 300, p90: 300 });
    await store.close();
  });

  it("after a mock run, says the jobs status counts done are the mock's, which a real run sends again", async () => {
    const db = await seededQueue(4);
    const mock = await runCli(['run', '--db', db, ...MOCK_NOW, '--limit', '3']);
    expect(mock.code, mock.stderr).toBe(0);
    const r = await runCli(['estimate', '--db', db]);
    expect(r.code, r.stderr).toBe(0);
    const text = r.stdout.replace(/\n {9}(?=\S)/g, ' ');
    expect(text).toContain(
      ': 4 jobs to send\n  3 of them were answered by the offline mock: done in llmq status, sent again by a run with a real provider\n',
    );
    expect(text).toContain('(--rpm, --tpm, or a first run with a real provider)');
    expect(JSON.parse((await runCli(['estimate', '--db', db, '--json'])).stdout)).toMatchObject({ jobs: 4, mockAnswered: 3 });
    // the mock's own estimate has nothing of them to send
    expect((await runCli(['estimate', '--db', db, '--provider', 'mock'])).stdout).toContain(': 1 job to send\n');
  });

  it('times the offline mock by its --mock-latency and the concurrency, in estimate and in a dry run, and refuses the flag for a real provider', async () => {
    const db = await seededQueue(40);
    const mock = async (args: readonly string[]) => {
      const r = await runCli(args);
      expect(r.code, r.stderr).toBe(0);
      return r.stdout.replace(/\n {9}(?=\S)/g, ' ');
    };
    // 40 answers of 200 ms (the mock's default), 8 at a time: 1 s
    const byDefault = await mock(['estimate', '--db', db, '--provider', 'mock']);
    expect(byDefault).toContain('answers take 200 ms (--mock-latency)');
    expect(byDefault).toContain("about 1s (the offline mock's answers, 8 at a time)");
    expect(byDefault).not.toContain('time unknown');
    // 40 answers of 1.5 s, 4 at a time: 15 s
    const dry = await mock(['run', '--dry-run', '--db', db, '--provider', 'mock', '--mock-latency', '1.5s', '-c', '4']);
    expect(dry).toContain('answers take 1,500 ms (--mock-latency)');
    expect(dry).toContain("about 15s (the offline mock's answers, 4 at a time)");
    const json = JSON.parse(await mock(['estimate', '--db', db, '--provider', 'mock', '--mock-latency', '100', '-c', '2', '--json']));
    expect(json).toMatchObject({ seconds: 2, models: [{ latencyMs: 100 }] });
    // paced by --rpm, the mock's time is the pace's: 40 jobs at 60 a minute
    const paced = await mock(['estimate', '--db', db, '--provider', 'mock', '--rpm', '60']);
    expect(paced).toMatch(/time {5}\S.* at 60 rpm/);
    expect(paced).not.toContain("the offline mock's answers");
    // under a second: said so on the model's line as on the total's, not "0s" beside "under a second"
    const quick = await mock(['estimate', '--db', db, '--provider', 'mock', '--rpm', '6000']);
    expect(quick).toMatch(/time {5}under a second at 6,000 rpm/);
    const real = await runCli(['estimate', '--db', db, '--mock-latency', '100']);
    expect(real.code).toBe(1);
    expect(real.stderr).toContain('--mock-latency is for the offline mock provider');
  });

  it('limits learned at another endpoint are named, with the flag that uses them, instead of "no limit known"', async () => {
    const { db, store } = await seeded();
    await store.close();
    const r = await runCli(['estimate', '--db', db, '--base-url', 'http://127.0.0.1:8/v1']);
    expect(r.code, r.stderr).toBe(0);
    const rows = r.stdout.replace(/\n {13}/g, ' ');
    expect(rows).toContain(`    time     no limit known here; learned at ${BASE}: add --base-url ${BASE}`);
    // the total's time is then what the concurrency allows, said as such (not a time the limit would give)
    expect(r.stdout.replace(/\n {9}/g, ' ')).toMatch(
      / (under a second|about \d+s) if nothing limits the rate \(no limit known for gpt-test\)\n/,
    );
    const json = JSON.parse((await runCli(['estimate', '--db', db, '--base-url', 'http://127.0.0.1:8/v1', '--json'])).stdout);
    expect(json.models[0].limits.learnedElsewhere).toEqual([BASE]);
  });

  it('a value too long for its row wraps under itself, through a pipe too: nothing is cut off', async () => {
    const dir = tempDir();
    const store = new SqliteStore(join(dir, 'q.db'));
    await seedJobs(store, 2);
    await store.close();
    const prices = join(dir, 'prices-of-the-finance-team-for-the-quarter-ending-in-december.json');
    writeFileSync(prices, JSON.stringify({ 'gpt-4o-mini': [0.15, 0.6] }));
    const r = await runCli(['estimate', '--db', join(dir, 'q.db'), '--prices', prices]);
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.split('\n');
    const at = lines.findIndex((l) => l.startsWith('    price    '));
    // the source names the whole file: on the price line and the ones under it
    expect(
      lines
        .slice(at, at + 3)
        .map((l) => l.trim())
        .join(' ')
        .replace(/ /g, ''),
    ).toContain(`--prices${prices}`);
    expect(lines[at + 1]).toMatch(/^ {13}\S/);
    expect(r.stdout).not.toContain('…');
    for (const line of lines) expect(line.length).toBeLessThanOrEqual(80);
  });

  it("streams the queue a page at a time, in the run's order across pages", async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 2500, { priority: (n) => (n % 2 === 0 ? 1 : 0) });
    const e = await estimateRun(store, { prices: loadPriceTable(), now: T, baseUrl: BASE, limit: 1300 });
    expect(e.jobs).toBe(1300);
    // the 1,250 odd documents (priority 0) first, then the first 50 even ones
    const want = [...Array.from({ length: 1250 }, (_, i) => 2 * i + 1), ...Array.from({ length: 50 }, (_, i) => 2 * i)];
    expect(e.models[0]!.promptTokens).toBe(want.reduce((a, n) => a + estimatePromptTokens(JSON.parse(requestFor(n))), 0));
    await store.close();
  });

  it('counts apart the jobs a live run or a batch holds (a run leaves them be), and sends those whose lease ran out', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 10);
    const now = Date.now();
    await store.startRun({ id: 'live', host: 'elsewhere', pid: 1, startedAt: now, options: {} });
    await store.claim({ owner: 'live', limit: 3, now, leaseUntil: now + 60_000, maxAttempts: 5 });
    await store.claim({ owner: 'live', limit: 2, now, leaseUntil: now - 1, maxAttempts: 5 });
    const e = await estimateRun(store, { prices, now, baseUrl: BASE });
    // 5 pending and the 2 whose lease ran out are sent; the 3 held are not
    expect(e).toMatchObject({ jobs: 7, held: 3 });
    await store.close();
    const r = await runCli(['estimate', '--db', db]);
    expect(r.stdout).toContain(
      ': 7 jobs to send\n  3 more are held by a live run, a run stopped here, or a batch at the provider: a run leaves them be\n',
    );
    // with --limit reached, the walk stops before it meets them all: nothing is said of them
    const again = new SqliteStore(db);
    expect((await estimateRun(again, { prices, now, baseUrl: BASE, limit: 4 })).held).toBe(0);
    await again.close();
  });

  it('llmq estimate and llmq run --dry-run print the same, and the dry run sends nothing', async () => {
    const { db, store } = await seeded();
    await store.close();
    const fake = await startFake();
    const base = BASE;
    const json = await runCli(['estimate', '--db', db, '--json', '--base-url', base, '--price', '1000,2000', '-c', '4']);
    expect(json.code).toBe(0);
    const e = JSON.parse(json.stdout);
    expect(e).toMatchObject({ jobs: 19, exhausted: 1, seconds: 19, unpriced: [] });
    const text = await runCli(['estimate', '--db', db, '--base-url', base, '--price', '1000,2000']);
    expect(text.stdout).toMatch(/^estimate .*q\.db: 19 jobs to send\n {2}1 more used all their attempts: a run fails them unsent$/m);
    expect(text.stdout).toMatch(/^ {4}answers {2}1,045 to 1,216 tokens \(mean 55, p90 90 of 10 answered\)$/m);
    // what the provider counted beyond the tokenizer, said in words
    expect(text.stdout).toMatch(/^ {4}prompt {3}[\d,.k]+ tokens \(counted; answers showed 7\.0 more a request\)$/m);
    expect(text.stdout).toMatch(/^ {4}time {5}19s at 60 rpm, learned from headers\n {13}answers took 1,000 ms$/m);
    // the user's own --rpm, lower than what was learned, is not said as learned; beside a learned rpm, a --tpm is the user's
    const timeOf = async (...flags: string[]) =>
      (await runCli(['estimate', '--db', db, '--base-url', base, '--price', '1000,2000', ...flags])).stdout.match(
        /^ {4}time {5}(.*)$/m,
      )?.[1];
    expect(await timeOf('--rpm', '30')).toBe('38s at 30 rpm');
    expect(await timeOf('--rpm', '120', '--tpm', '900000')).toBe('19s at 60 rpm learned from headers, 900,000 tpm');
    expect(text.stdout).toMatch(/^ {4}price {4}\$1000\/\$2000 per million tokens, --price$/m);
    // --price is the online price: of a model whose provider nobody knows, the batch figure is not guessed
    expect(text.stdout).toMatch(/^ {4}cost {5}\$.* · no batch price · worst/m);
    for (const line of text.stdout.split('\n')) expect(line.length).toBeLessThanOrEqual(80);

    const dry = await runCli(['run', '--dry-run', '--db', db, '--base-url', fake.url, '--price', '1000,2000', '--json', '--limit', '5']);
    expect(dry.code).toBe(0);
    expect(JSON.parse(dry.stdout)).toMatchObject({ jobs: 5 });
    const dryText = await runCli(['run', '--dry-run', '--db', db, '--base-url', fake.url, '--price', '1000,2000', '--limit', '5']);
    expect(dryText.stdout).toMatch(/^dry run .*q\.db: 5 jobs a run would send; nothing was sent\n/);
    expect(dryText.stdout.slice(dryText.stdout.indexOf('\n'))).toBe(
      (await runCli(['estimate', '--db', db, '--base-url', fake.url, '--price', '1000,2000', '--limit', '5'])).stdout.replace(/^.*/, ''),
    );
    expect(fake.received).toBe(0);
    const after = new SqliteStore(db);
    expect(await all(after.copier.dumpRuns())).toHaveLength(1); // only the seeded run: no run was started
    expect((await after.status()).counts.pending).toBe(19);
    await after.close();
  });

  it("with no price given, estimate prices at the last run's --price, as status does, and says so; run --dry-run as that run would", async () => {
    const fake = await startFake();
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 4);
    await store.close();
    const ran = await runCli(['run', '--db', db, '--base-url', fake.url, '--price', '100,100', '--limit', '2', '--progress', 'none']);
    expect(ran.code, ran.stderr).toBe(0);
    const runId = JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout).lastRun.id as string;
    const text = await runCli(['estimate', '--db', db, '--base-url', fake.url]);
    expect(text.stdout).toContain(`price    $100/$100 per million tokens, --price of run ${runId.slice(0, 8)}`);
    const dry = await runCli(['run', '--dry-run', '--db', db, '--base-url', fake.url]);
    expect(dry.stdout).not.toContain('$100/$100');
    expect(fake.received).toBe(2);
  });

  it("a dry run of a real provider leaves the mock runs' money out of --budget-total, as the run takes it back", async () => {
    const db = await seededQueue(6);
    const price = ['--price', '2.5,10'];
    const mock = await runCli(['run', '--db', db, ...MOCK_NOW, '--limit', '4', ...price]);
    expect(mock.code, mock.stderr).toBe(0);
    const mockSpent = JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout).cost.usd;
    expect(mockSpent).toBeGreaterThan(0);
    const dry = async (provider: string[]) =>
      JSON.parse((await runCli(['run', '--dry-run', '--db', db, ...provider, ...price, '--budget-total', '1', '--json'])).stdout).budget;
    // the real run starts by taking the mock's answers back, and their money with them: all of $1 is left
    expect(await dry(['--base-url', BASE])).toMatchObject({ flag: '--budget-total', usd: 1, left: 1 });
    // another mock run keeps them, and counts what they cost
    expect((await dry(['--provider', 'mock'])).left).toBeCloseTo(1 - mockSpent, 9);
  });

  it('a job that sets no max_tokens has no worst case: estimate says so, and a dry run under --budget says the run would refuse it', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const line = (id: string, extra: string) =>
      JSON.stringify({
        custom_id: id,
        method: 'POST',
        url: '/v1/chat/completions',
        body: JSON.parse(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi ${id}"}]${extra}}`),
      });
    writeFileSync(join(dir, 'batch.jsonl'), `${line('capped', ',"max_tokens":50')}\n${line('open', '')}\n`);
    expect((await runCli(['enqueue', join(dir, 'batch.jsonl'), '--db', db])).code).toBe(0);
    const flags = ['--db', db, '--base-url', BASE, '--price', '1,1'];
    const json = JSON.parse((await runCli(['estimate', ...flags, '--json'])).stdout);
    expect(json).toMatchObject({ jobs: 2, uncapped: 1, models: [{ model: 'gpt-4o-mini', uncapped: 1 }] });
    // no worst case in the JSON either: the capped job's alone read as the bound
    expect([json.cost.worst, json.batchCost.worst, json.models[0].cost.worst, json.models[0].batchCost.worst]).toEqual([
      null,
      null,
      null,
      null,
    ]);
    expect(json.cost.high).toBeGreaterThan(0);
    const text = (await runCli(['estimate', ...flags])).stdout.replace(/\s+/g, ' ');
    expect(text).toContain('worst unbounded (1 job without max_tokens)');
    expect(text).toContain('answers unbounded: 1 job sets no max_tokens (no real answer yet)');
    const dry = await runCli(['run', '--dry-run', ...flags, '--budget', '1']);
    expect(dry.stdout.replace(/\s+/g, ' ')).toContain(
      '--budget $1.00: 1 job sets no max_tokens, so nothing bounds their cost and a run under --budget refuses them. Set max_tokens in the request',
    );
    // and the run does: the job fails unsent, the way out said, and the rest of the queue is sent
    // (stopping the run for it left the others pending, every run)
    const fake = await startFake();
    const run = await runCli(['run', '--db', db, '--base-url', fake.url, '--price', '1,1', '--budget', '1', '--progress', 'plain']);
    expect(run.code, run.stderr).toBe(2);
    expect(run.stderr.replace(/\s+/g, ' ')).toContain('failed open (attempt 1): not sent: it sets no max_tokens');
    expect(run.stderr).toMatch(/finished in .*: 1 done, 1 failed/);
    expect(fake.requests.map((r) => JSON.parse(r.body).messages[0].content)).toEqual(['hi capped']);
    const shown = JSON.parse((await runCli(['show', 'open', '--db', db, '--json'])).stdout);
    expect(shown.job).toMatchObject({ state: 'failed' });
    expect(shown.job.error).toMatch(
      /^not sent: it sets no max_tokens, .*llmq retry-failed --error "no max_tokens", then llmq run without --budget\.$/,
    );
    expect(shown.attempts).toEqual([]);
    // sent again under the same budget it fails the same way: status proposes no retry for it
    const status = (await runCli(['status', '--db', db])).stdout;
    expect(status).toContain('not sent: it sets no max_tokens');
    expect(status).not.toMatch(/to try (them|the others) again/);
    // the command it gives puts it back, and a run without a budget sends it
    expect((await runCli(['retry-failed', '--db', db, '--error', 'no max_tokens'])).code).toBe(0);
    expect((await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none'])).code).toBe(0);
    expect(fake.requests.map((r) => JSON.parse(r.body).messages[0].content)).toEqual(['hi capped', 'hi open']);
  });

  it('llmq run --dry-run --budget says whether the budget covers the run, or where it would stop it', async () => {
    // answers of 10 to 50 tokens where max_tokens is 500: the worst case is far above the expected cost
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 20, { model: MODEL, maxTokens: 500 });
    await store.startRun({ id: 'run-a', host: 'h', pid: 1, startedAt: T, options: {} });
    const answered = (await store.claim({ owner: 'run-a', limit: 5, now: T, leaseUntil: T + 60_000, maxAttempts: 5 })).jobs;
    await answer(store, answered, (_, i) => ({ promptTokens: 30, completionTokens: 10 * (i + 1) }));
    await store.finishRun('run-a', T + 2000, 'drained', {} as never);
    await store.close();
    const dry = (...flags: string[]) => runCli(['run', '--dry-run', '--db', db, '--price', '1000,2000', ...flags]);
    const json = JSON.parse((await dry('--json')).stdout);
    const { low, high, worst } = json.cost as { low: number; high: number; worst: number };
    expect(worst).toBeGreaterThan(2 * high);
    expect(high).toBeGreaterThan(1.2 * low);
    expect(json.budget).toBeUndefined();
    // the budget's words, wrapped within 80 columns, as one line
    const said = async (budget: number) => {
      const out = (await dry('--budget', String(budget))).stdout;
      for (const line of out.split('\n')) expect(line.length).toBeLessThanOrEqual(80);
      return out.slice(out.indexOf('  budget')).replace(/\s+/g, ' ').trim();
    };
    expect(await said(worst * 2)).toMatch(/^budget --budget \$[\d.]+ covers the worst case: the run will not stop for it$/);
    expect(await said((high + worst) / 2)).toMatch(
      /is below the worst case \(\$[\d.]+\): the run stops early \(exit 3\) if answers run long/,
    );
    expect(await said(low / 2)).toMatch(
      /is below the expected cost \(\$[\d.]+ at least\): the run would stop early \(exit 3\), the rest left pending/,
    );
    // just below: the amounts are told apart, never "$X is below ($X at least)"
    const close = (await said(low * 0.9995)).match(/--budget (\$[\d.]+) is below the expected cost \((\$[\d.]+) at least\)/);
    expect(close).not.toBeNull();
    expect(close![1]).not.toBe(close![2]);
    // what is left of --budget-total is shown with the digits of the amount it is compared with
    const e: Estimate = {
      jobs: 5,
      exhausted: 0,
      mockAnswered: 0,
      held: 0,
      uncapped: 0,
      failed: 0,
      tooLong: 0,
      tooLongPrompts: 0,
      tooLongItems: [],
      models: [],
      cost: { low: 0.00108, high: 0.002, worst: 0.003 },
      batchCost: { low: 0.00054, high: 0.001, worst: 0.0015 },
      unpriced: [],
      seconds: 10,
    };
    const total = renderEstimate(e, { db: 'q.db', budget: { flag: '--budget-total', usd: 0.04, committed: 0.0389225 } });
    expect(total.replace(/\s+/g, ' ')).toContain(
      '--budget-total $0.04 ($0.001078 left of it) is below the expected cost ($0.001080 at least)',
    );
    // inside the range it may be enough: not said as a sure stop
    expect(await said((low + high) / 2)).toMatch(
      /is within the expected cost \(\$[\d.]+ to \$[\d.]+\): the run may stop early \(exit 3\), the rest left pending/,
    );
    const both = JSON.parse((await dry('--json', '--budget', String(worst * 2), '--budget-total', String(high / 10))).stdout);
    expect(both.budget).toMatchObject({ flag: '--budget-total', verdict: 'stops' });
    const within = JSON.parse((await dry('--json', '--budget', String((low + high) / 2))).stdout);
    expect(within.budget).toMatchObject({ flag: '--budget', verdict: 'within' });
  });
});

describe('estimate and status read a remembered pace as the next run will', () => {
  it('a pace only 429s taught, over 15 minutes ago, is expired: estimate paces without it, status says so', async () => {
    const { store } = await seeded();
    await store.saveLaneLimits({ baseUrl: BASE, model: MODEL, rpm: 6, tpm: null, source: '429s', at: T - 16 * 60_000 });
    const old = await estimateRun(store, { prices, now: T, baseUrl: BASE, concurrency: 4 });
    expect(old.models[0]!.limits).toMatchObject({ rpm: null, learned: null });
    const recent = await estimateRun(store, { prices, now: T - 2 * 60_000, baseUrl: BASE, concurrency: 4 });
    expect(recent.models[0]!.limits).toMatchObject({ rpm: 6, learned: { source: '429s' } });
    const db = store.location;
    await store.close();
    const status = await runCli(['status', '--db', db, '--json']);
    expect(JSON.parse(status.stdout).limits).toMatchObject([{ model: MODEL, source: '429s', rpm: 6, expired: true }]);
    expect((await runCli(['status', '--db', db])).stdout).toMatch(
      // 16 minutes before the queue was seeded: later by as long as the test has taken (a minute once, on a loaded machine)
      /gpt-test: 6 rpm, learned from 429s 1[6-9]m \d\ds ago, expired/,
    );
  });
});
