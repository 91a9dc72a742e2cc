import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser, Page } from 'puppeteer-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { collect, runCli, spawnCli } from './helpers/cli.js';
import { haveChromium, launchBrowser, startServe, type ServeChild } from './helpers/dashboard.js';
import { FakeOpenAI, reply } from './helpers/fake-openai.js';
import { seedJobs } from './helpers/seed.js';
import { queueWithDroppedModel } from './helpers/dropped-model.js';
import { tempDir } from './helpers/tmp.js';

// page.evaluate and waitForFunction callbacks run in the browser; tsconfig has no DOM library (it
// would clash with Node's types elsewhere), so the few browser names used are declared here.
declare const document: any;
declare const getComputedStyle: (e: unknown) => { display: string };
type HTMLInputElement = { value: string };

const BAD = "Invalid value for 'temperature': must be between 0 and 2.";

let browser: Browser;
const cleanup: Array<() => Promise<unknown>> = [];
beforeAll(async () => {
  browser = await launchBrowser();
});
afterAll(async () => {
  await browser?.close();
});
afterEach(async () => {
  await Promise.all(cleanup.splice(0).map((c) => c()));
});

async function serve(db: string, extra: readonly string[] = []): Promise<ServeChild> {
  const s = await startServe(['--db', db, '--poll', '0.25', ...extra]);
  cleanup.push(() => s.stop());
  return s;
}

async function open(url: string): Promise<Page> {
  const page = await browser.newPage();
  // A page that does not close in time is left to browser.close() rather than hanging the test.
  cleanup.push(() => Promise.race([page.close(), new Promise((r) => setTimeout(r, 5000))]));
  await page.goto(url, { waitUntil: 'domcontentloaded' });
  return page;
}

const text = (page: Page, selector: string) => page.$eval(selector, (e) => e.textContent ?? '');

/** A queue of `jobs` jobs where those whose index is in `failing` fail with a 400 when run. */
async function queueWithFailures(jobs: number, failing: ReadonlySet<number>) {
  const fake = await FakeOpenAI.start({ latencyMs: 5, record: false });
  cleanup.push(() => fake.close());
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  const keys = await seedJobs(store, jobs);
  await store.close();
  const failingKeys = new Set(keys.filter((_, i) => failing.has(i)));
  fake.respond((r) => (failingKeys.has(r.key) ? reply.badRequest(BAD) : undefined));
  const run = await collect(
    spawnCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none'], { env: { LLMQ_API_KEY: 'sk-test-0123456789abcdef' } }),
  );
  expect(run.code, run.stderr).toBe(2);
  return { db, fake };
}

function countStates(db: string): Record<string, number> {
  const store = new SqliteStore(db);
  const rows = store.db.prepare('SELECT state, count(*) AS n FROM jobs GROUP BY state').all() as Array<{ state: string; n: number }>;
  void store.close();
  return Object.fromEntries(rows.map((r) => [r.state, r.n]));
}

// Like the PostgreSQL tests: skipped on a machine without chromium, never in CI (.ci/run installs it).
describe.skipIf(!haveChromium() && !process.env.CI)('llmq serve in a real browser', () => {
  it('updates the page live while a run progresses against the fake, and shows the run with its lane and alert', async () => {
    const fake = await FakeOpenAI.start({ latencyMs: 80, record: false });
    cleanup.push(() => fake.close());
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 120);
    await store.close();
    const s = await serve(db);
    const page = await open(s.url);
    await page.waitForFunction(() => document.getElementById('count-pending')?.textContent === '120');
    expect(await text(page, '#count-done')).toBe('0');

    const child = spawnCli(
      ['run', '--db', db, '--base-url', fake.url, '--concurrency', '2', '--progress', 'none', '--alert-oldest', '1s'],
      { env: { LLMQ_API_KEY: 'sk-test-0123456789abcdef' } },
    );
    cleanup.push(async () => child.kill('SIGKILL'));
    const run = collect(child);
    // Seen part-way: the page moved without a reload while the run was still going.
    await page.waitForFunction(
      () => {
        const done = Number(document.getElementById('count-done')?.textContent?.replace(/,/g, ''));
        return done > 0 && done < 120;
      },
      { timeout: 10_000 },
    );
    // The run's lane comes from its heartbeat (every 2 s), stored in the database: no other channel.
    await page.waitForFunction(() => /lane gpt-4o-mini: .* in flight/.test(document.querySelector('#runs tbody')?.textContent ?? ''), {
      timeout: 10_000,
    });
    expect(await text(page, '#runs tbody')).toMatch(/running/);
    // The run's alert (its queue was enqueued seconds ago) reaches the page through its heartbeat too.
    await page.waitForFunction(
      () => /the oldest pending job has waited \d+s \(alert at 1s\)/.test(document.getElementById('alerts')?.textContent ?? ''),
      { timeout: 10_000 },
    );
    expect((await run).code).toBe(0);
    await page.waitForFunction(() => document.getElementById('count-done')?.textContent === '120', { timeout: 10_000 });
    await page.waitForFunction(() => /No run is active/.test(document.getElementById('last-run')?.textContent ?? ''));
    expect(await text(page, '#alerts')).toBe('');
    expect(await page.$('#chart .uplot canvas')).not.toBeNull();
    expect(await text(page, '#connection')).toBe('live');
  });

  it('a page opened on a quiet queue draws its first points over the last minute, not an axis years wide', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 3);
    await store.close();
    const page = await open((await serve(db)).url);
    // one point, then two: uPlot's own range for a single x spanned from 2027 to 2029
    await page.waitForFunction('state.history.length >= 1 && state.chart !== null');
    const span = await page.evaluate('state.chart.scales.x.max - state.chart.scales.x.min');
    expect(span).toBeGreaterThan(0);
    expect(span).toBeLessThan(120);
  });

  it("fits a phone's screen: wide tables scroll in their section, the page does not", async () => {
    const { db } = await queueWithFailures(6, new Set([1, 2]));
    const page = await browser.newPage();
    cleanup.push(() => Promise.race([page.close(), new Promise((r) => setTimeout(r, 5000))]));
    await page.setViewport({ width: 390, height: 844 });
    await page.goto((await serve(db)).url, { waitUntil: 'domcontentloaded' });
    await page.waitForFunction(() => document.getElementById('count-failed')?.textContent === '2');
    // it was about 620 px wide
    expect(await page.evaluate('document.documentElement.scrollWidth')).toBeLessThanOrEqual(390);
  });

  it("says the last run's 429s, the strays apart, as status does", async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 1);
    await store.startRun({ id: 'run-1', host: 'vm', pid: 1, startedAt: Date.now() - 9000, options: {} });
    const stats = {
      done: 1,
      failed: 0,
      retried: 0,
      requests: 8,
      rateLimited: 7,
      strayRateLimited: 6,
      promptTokens: 1,
      completionTokens: 1,
      jobsPerSecond: 0,
    };
    await store.finishRun('run-1', Date.now() - 4000, 'drained', stats);
    await store.close();
    const page = await open((await serve(db)).url);
    await page.waitForFunction(() => /No run is active/.test(document.getElementById('last-run')?.textContent ?? ''));
    expect(await text(page, '#last-run')).toMatch(/: drained, 1 done, 0 failed, 7 rate-limited \(6 stray\)\.$/);
  });

  it("says a run's pause as status does, and a quiet run's figures are not shown as of now", async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 3);
    const now = Date.now();
    const stats = (o: object) => ({
      done: 0,
      failed: 0,
      retried: 0,
      requests: 5,
      rateLimited: 0,
      promptTokens: 1,
      completionTokens: 1,
      jobsPerSecond: 42,
      inFlight: 7,
      backingOff: 2,
      concurrency: 16,
      lanes: [{ model: 'gpt-4o-mini', rpm: 600, tpm: null, requestsPerSecond: 46.8, inFlight: 7, rateLimited: 0, pausedUntil: null }],
      ...o,
    });
    // another machine's runs: their processes are not looked for here
    await store.startRun({ id: 'down-run', host: 'elsewhere', pid: 1, startedAt: now - 700_000, options: {} });
    await store.heartbeat(
      'down-run',
      now,
      now + 60_000,
      stats({ paused: { reason: 'outage', until: now + 7000, downSince: now - 608_000, givesUpAt: now + 292_000 } }),
    );
    await store.startRun({ id: 'quiet-run', host: 'elsewhere', pid: 2, startedAt: now - 60_000, options: {} });
    await store.heartbeat('quiet-run', now - 14_000, now + 46_000, stats({ backingOff: 0 }));
    await store.close();
    const page = await open((await serve(db)).url);
    await page.waitForFunction(() => /down-run/.test(document.querySelector('#runs tbody')?.textContent ?? ''));
    const rows: string[] = await page.$$eval('#runs tbody tr', (trs: any[]) => trs.map((tr) => tr.textContent));
    const down = rows.find((r) => r.startsWith('down-run'))!;
    // it said "paused (outage) for 7s": the time to the next probe, where status said down 10m
    expect(down).toMatch(/paused: provider down 10m \d+s, next try in [3-7]s$/);
    const quiet = rows.find((r) => r.startsWith('quiet-ru'))!;
    expect(quiet).toMatch(/no heartbeat for 1\ds: stopped, or its database locked\?$/);
    // its rate and requests in flight are its last heartbeat's, not now's: not shown, nor its lane
    expect(quiet).not.toContain('42.0');
    expect(rows.filter((r) => r.startsWith('lane'))).toHaveLength(1);
    // the jobs the live run holds in its backoff wait for a retry too, as status says
    expect(await text(page, '#percent')).toMatch(/; 2 waiting for a retry;/);
  });

  it('shows what the last enqueue of each input rejected, by file and line, and hides the section when nothing is', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    writeFileSync(join(dir, 'in.jsonl'), '{"id":"r1","text":"one"}\n{"id":"r2","text":"tw\n{"id":"r3"}\n');
    expect((await runCli(['enqueue', 'in.jsonl', '--db', db], { cwd: dir })).code).toBe(2);
    const page = await open((await serve(db)).url);
    await page.waitForFunction(() => document.getElementById('rejected-section')?.hidden === false);
    expect(await text(page, '#rejected-summary')).toBe(
      '2 documents of in.jsonl. Fix them, then enqueue the same input again: what is fixed goes in.',
    );
    expect(await text(page, '#rejected tbody')).toBe(
      'in.jsonl:2malformed JSON (Unterminated string in JSON at position 21)' +
        'in.jsonl:3no "text" field (it has "id"), where most lines before it have one: mend this line',
    );
    // fixed and enqueued again: the page drops the section without a reload
    writeFileSync(join(dir, 'in.jsonl'), '{"id":"r1","text":"one"}\n{"id":"r2","text":"two"}\n{"id":"r3","text":"three"}\n');
    expect((await runCli(['enqueue', 'in.jsonl', '--db', db], { cwd: dir })).code).toBe(0);
    await page.waitForFunction(() => document.getElementById('rejected-section')?.hidden === true, { timeout: 10_000 });
  });

  it('says the cost is unknown, not $0.00, when a model has no price', async () => {
    const fake = await FakeOpenAI.start({ latencyMs: 1, record: false });
    cleanup.push(() => fake.close());
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 3, { model: 'acme-llm-7b' });
    await store.close();
    const run = await collect(
      spawnCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none'], { env: { LLMQ_API_KEY: 'sk-test-0123456789abcdef' } }),
    );
    expect(run.code, run.stderr).toBe(0);
    const page = await open((await serve(db)).url);
    await page.waitForFunction(() => /spent /.test(document.getElementById('cost-total')?.textContent ?? ''), { timeout: 10_000 });
    expect(await text(page, '#cost-total')).toMatch(/spent unknown \(no price for acme-llm-7b: llmq serve --price in,out\)$/);
  });

  it('says what may be billed and the budget of a run killed with requests out, in money as status writes it', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 20, { model: 'mock-1' });
    await store.close();
    // answers take 30 s: the run is killed with its 4 requests out, each reserved at its worst case
    const child = spawnCli(
      [
        'run',
        '--db',
        db,
        '--provider',
        'mock',
        '--mock-latency',
        '30000',
        '-c',
        '4',
        '--price',
        '2.5,10',
        '--budget',
        '1',
        '--progress',
        'none',
      ],
      {},
    );
    cleanup.push(async () => child.kill('SIGKILL'));
    const page = await open((await serve(db)).url);
    await page.waitForFunction(() => /4 in flight, up to \$0\.0\d+/.test(document.getElementById('cost-runs')?.textContent ?? ''), {
      timeout: 15_000,
    });
    expect(await text(page, '#cost-runs')).toMatch(/^run [0-9a-f]{8} spent \$0\.00 of its \$1\.00 budget, 4 in flight, up to \$0\.0\d+$/);
    child.kill('SIGKILL');
    await page.waitForFunction(
      () =>
        /may be billed: 4 tries, up to \$0\.0\d+ \(no usable answer came\)$/.test(document.getElementById('cost-total')?.textContent ?? ''),
      {
        timeout: 20_000,
      },
    );
    expect(await text(page, '#cost-runs')).toMatch(/^run [0-9a-f]{8} spent \$0\.00 of its \$1\.00 budget, died$/);
    // money as status writes it: nothing spent is $0.00, not $0.0000
    expect(await text(page, '#cost-total')).not.toContain('$0.0000');
  }, 60_000);

  it('retries failed jobs of one reason from the page, only with the token', async () => {
    const { db } = await queueWithFailures(6, new Set([1, 3, 5]));
    const s = await serve(db);
    const page = await open(s.url);
    await page.waitForFunction(() => document.getElementById('count-failed')?.textContent === '3');
    expect(await text(page, '#failures tbody')).toContain("Invalid value for 'temperature'");

    // Each Retry asks first (it acted on one click); these the provider refused as sent, which it says
    const asked: string[] = [];
    let answer = true;
    page.on('dialog', (d) => {
      asked.push(d.message());
      void (answer ? d.accept() : d.dismiss());
    });
    // No token: the page says what to do and nothing moves.
    await page.click('#failures .retry-reason');
    expect(await text(page, '#action-result')).toMatch(/Paste the action token/);
    // A wrong token: refused by the server.
    await page.type('#token', 'f'.repeat(64));
    answer = false;
    await page.click('#failures .retry-reason');
    await page.waitForFunction(() => document.getElementById('action-result')?.textContent === 'Nothing was put back.');
    expect(asked).toEqual([
      'The provider refused these 3 failed jobs as they were sent. Sent again unchanged, they most likely fail the same way, and may be billed. Put them back to pending anyway?',
    ]);
    answer = true;
    await page.click('#failures .retry-reason');
    await page.waitForFunction(() => /wrong token/.test(document.getElementById('action-result')?.textContent ?? ''));
    expect(countStates(db)).toEqual({ done: 3, failed: 3 });

    await page.$eval('#token', (e) => {
      (e as HTMLInputElement).value = '';
    });
    await page.type('#token', s.token!);
    await page.click('#failures .retry-reason');
    await page.waitForFunction(() => /Put 3 failed jobs back to pending/.test(document.getElementById('action-result')?.textContent ?? ''));
    expect(countStates(db)).toEqual({ done: 3, pending: 3 });
    await page.waitForFunction(() => document.getElementById('count-pending')?.textContent === '3');
  });

  it("says of a model whose jobs were all dropped (forget) how many, beside the cost it keeps, not '0' jobs", async () => {
    const db = await queueWithDroppedModel(tempDir(), 2, 1);
    const page = await open((await serve(db)).url);
    await page.waitForFunction(() => document.querySelectorAll('#cost tbody tr').length === 2, { timeout: 10_000 });
    const rows = await page.$$eval('#cost tbody tr', (trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].slice(0, 3).map((td) => td.textContent)),
    );
    expect(rows).toEqual([
      ['gpt-4o', '2 dropped', '0'],
      ['gpt-4o-mini', '1', '1'],
    ]);
  });

  it('Retry all counts the failed jobs it puts back: not those cut off at max_tokens, which it leaves', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 5);
    const now = Date.now();
    const { jobs } = await store.claim({ owner: 'r', limit: 5, now, leaseUntil: now + 60_000, maxAttempts: 5 });
    const cutOff = 'the answer was cut off at max_tokens (finish_reason "length") before its JSON was whole';
    for (const [i, j] of jobs.entries()) await store.fail(j.key, 'r', i < 3 ? cutOff : 'HTTP 500: server error', null, now);
    await store.close();
    const s = await serve(db);
    const page = await open(s.url);
    await page.waitForFunction(() => document.getElementById('count-failed')?.textContent === '5');
    const asked: string[] = [];
    page.on('dialog', (d) => {
      asked.push(d.message());
      void d.accept();
    });
    await page.type('#token', s.token!);
    await page.click('#retry-all');
    await page.waitForFunction(() => /^Put 2 failed jobs back/.test(document.getElementById('action-result')?.textContent ?? ''));
    expect(asked).toEqual([
      'Put 2 failed jobs back to pending? A running llmq run sends them again (or start one). It leaves 3 cut off at max_tokens failed: ' +
        'sent as they were, they would most likely be cut off again (llmq retry-failed --max-tokens N asks them with more room).',
    ]);
    expect(countStates(db)).toEqual({ pending: 2, failed: 3 });

    // only cut-off ones left: nothing to ask, nothing put back
    await page.waitForFunction(() => document.getElementById('count-failed')?.textContent === '3');
    await page.click('#retry-all');
    await page.waitForFunction(() =>
      /^Nothing to put back\. It leaves 3 cut off/.test(document.getElementById('action-result')?.textContent ?? ''),
    );
    expect(asked).toHaveLength(1);
    expect(countStates(db)).toEqual({ pending: 2, failed: 3 });
  });

  it('refuses a cross-origin POST, even one carrying the token, and a foreign page cannot retry', async () => {
    const { db } = await queueWithFailures(4, new Set([0, 2]));
    const s = await serve(db);
    const target = new URL('/api/retry-failed', s.url).href;

    // Straight from Node, with the right token but someone else's Origin.
    const res = await fetch(target, {
      method: 'POST',
      headers: { origin: 'http://127.0.0.1:1', 'x-llmq-token': s.token!, 'content-type': 'text/plain' },
      body: '{}',
    });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: string }).error).toMatch(/refused/);

    // From a page of another origin in the browser: a simple (no-preflight) POST and a preflighted one.
    const evil: Server = createServer((_req, r) => {
      r.writeHead(200, { 'content-type': 'text/html' });
      r.end('<p>evil</p>');
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    cleanup.push(
      () =>
        new Promise((resolve) => {
          evil.closeAllConnections();
          evil.close(resolve);
        }),
    );
    const page = await open(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
    const outcome = await page.evaluate(
      async (url, token) => {
        await fetch(url, { method: 'POST', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body: '{}' }).catch(() => null);
        try {
          const r = await fetch(url, {
            method: 'POST',
            headers: { 'x-llmq-token': token, 'content-type': 'application/json' },
            body: '{}',
          });
          return `answered ${r.status}`;
        } catch {
          return 'blocked';
        }
      },
      target,
      s.token!,
    );
    expect(outcome).toBe('blocked');
    expect(countStates(db)).toEqual({ done: 2, failed: 2 });

    // The same request from the dashboard's own origin goes through: the refusals above were about origin.
    const ok = await fetch(target, { method: 'POST', headers: { origin: new URL(s.url).origin, 'x-llmq-token': s.token! }, body: '{}' });
    expect(ok.status).toBe(200);
    expect(countStates(db)).toEqual({ done: 2, pending: 2 });
  });

  it('needs the token for actions; --read-only serves none; URL passwords and keys never reach the page', async () => {
    const { db } = await queueWithFailures(3, new Set([0, 1]));
    const store = new SqliteStore(db);
    store.db
      .prepare(`UPDATE jobs SET error = ? WHERE state = 'failed'`)
      .run('mirror at postgres://admin:hunter22@10.0.0.9/q said no; key sk-proj-ABCDEFGHIJKLMNOPQRSTUV');
    await store.close();

    const s = await serve(db);
    const target = new URL('/api/retry-failed', s.url).href;
    expect((await fetch(target, { method: 'POST', body: '{}' })).status).toBe(401);
    expect((await fetch(target, { method: 'POST', headers: { 'x-llmq-token': 'nope' }, body: '{}' })).status).toBe(401);
    expect((await fetch(`${target}?token=${s.token}`, { method: 'POST', body: '{}' })).status).toBe(401);
    // a body that is neither {} nor {"error": "..."} retries nothing (read loosely, it retried every failure)
    for (const body of ['{"error": 5}', '{"erorr": "HTTP 500"}', '{"error": null}', '[]', '']) {
      const r = await fetch(target, { method: 'POST', headers: { 'x-llmq-token': s.token! }, body });
      expect(r.status, body).toBe(400);
      expect(((await r.json()) as { error: string }).error).toMatch(/^expected \{\} \(every failed job\) or \{"error"/);
    }
    expect(countStates(db)).toEqual({ done: 1, failed: 2 });

    const page = await open(s.url);
    await page.waitForFunction(() => document.getElementById('count-failed')?.textContent === '2');
    // biome-ignore lint/performance/useDomNodeTextContent: the test reads what the page shows, which innerText is and textContent is not.
    const shown = await page.evaluate(() => document.body.innerText);
    expect(shown).toContain('postgres://admin:***@10.0.0.9/q');
    expect(shown).not.toContain('hunter22');
    expect(shown).not.toContain('ABCDEFGHIJKLMNOPQRSTUV');
    expect(await page.$eval('#retry-all', (e) => getComputedStyle(e).display)).not.toBe('none');

    const ro = await serve(db, ['--read-only']);
    expect(ro.token).toBeNull();
    expect(
      (await fetch(new URL('/api/retry-failed', ro.url), { method: 'POST', headers: { 'x-llmq-token': s.token! }, body: '{}' })).status,
    ).toBe(403);
    const roPage = await open(ro.url);
    await roPage.waitForFunction(() => document.body.classList.contains('read-only'));
    expect(await roPage.$eval('#retry-all', (e) => getComputedStyle(e).display)).toBe('none');
    expect(await roPage.$('#failures .retry-reason')).toBeNull();
    expect(countStates(db)).toEqual({ done: 1, failed: 2 });
  });
});
