import { writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ECHO_MS, signalCounter } from '../src/second-signal.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { collect, runCli, spawnCli } from './helpers/cli.js';
import { answerFor, reply } from './helpers/fake-openai.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';
import { all } from './helpers/store-reads.js';
import { waitFor, waitForLine } from './helpers/wait.js';

async function setup(jobs: number, latencyMs: number) {
  const fake = await startFake({ latencyMs, record: false });
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  const keys = await seedJobs(store, jobs);
  await store.close();
  return { fake, db, keys };
}

async function states(db: string) {
  const store = new SqliteStore(db);
  const rows = await all(store.copier.dumpJobs());
  await store.close();
  return rows;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Google's 429 when a model's quota per day is spent (its wait of seconds asked all day). */
const DAILY_QUOTA_SPENT = [
  {
    error: {
      code: 429,
      // as long as Google's are: the advice llmq adds after it must survive into status
      message:
        'You exceeded your current quota, please check your plan and billing details. For more information on this error, ' +
        'head to: https://ai.google.dev/gemini-api/docs/rate-limits. To monitor your current usage, head to: https://ai.dev/rate-limit. ' +
        '\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 20, model: gemini-x' +
        '\nPlease retry in 36.429760048s.',
      status: 'RESOURCE_EXHAUSTED',
      details: [
        {
          '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
          violations: [{ quotaId: 'GenerateRequestsPerDayPerProjectPerModel-FreeTier', quotaValue: '20' }],
        },
        { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '36s' },
      ],
    },
  },
];

describe('llmq run (child processes)', () => {
  it('in a folder with no queue and no API key, says there is no queue first (the key would be the next thing)', async () => {
    const r = await runCli(['run'], { cwd: tempDir() });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('error: There is no queue at ./llmq.db. Create one with: llmq enqueue');
    expect(r.stderr).not.toContain('API key');
  });

  it('--progress json is refused with the flag that does it: --json', async () => {
    const r = await runCli(['run', '--provider', 'mock', '--db', join(tempDir(), 'q.db'), '--progress', 'json']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      "argument 'json' is invalid. Expected one of: auto, tty, plain, none. For JSON events on stdout, use --json.",
    );
  });

  it('survives SIGKILL at random moments: resumed, every job ends done exactly once', async () => {
    const { fake, db, keys } = await setup(300, 15);
    const args = ['run', '--db', db, '--base-url', fake.url, '--concurrency', '8', '--retry-delay', '0.05', '--progress', 'none'];
    let kills = 0;
    for (let round = 0; round < 4; round++) {
      const child = spawnCli(args);
      const done = collect(child);
      // A random moment mid-run: after 1 to 60 more requests reached the provider (or the run ended).
      const target = fake.received + 1 + Math.floor(Math.random() * 60);
      await waitFor(() => fake.received >= target || child.exitCode !== null, {
        what: `request ${target} to reach the fake`,
        timeoutMs: 30_000,
      });
      if (child.exitCode === null) {
        child.kill('SIGKILL');
        kills++;
      }
      const r = await done;
      if (r.code === 0) break;
      expect(r.signal).toBe('SIGKILL');
    }
    expect(kills).toBeGreaterThan(0);
    const final = await runCli(args);
    // --progress none: the summary, no warning or error
    expect(final.stderr).toMatch(/^finished in \S+: \d+ done, 0 failed, \d+ retr(y|ies)\n {2}tokens /);
    expect(final.stderr).not.toMatch(/warning|error/i);
    expect(final.code).toBe(0);
    const rows = await states(db);
    expect(rows.length).toBe(300);
    for (const r of rows) {
      expect(r.state).toBe('done');
      expect(r.output).toBe(answerFor(r.request));
    }
    // Only a request in flight at the moment of a kill can have gone out twice.
    const resent = keys.filter((k) => fake.sentCount(k) > 1).length;
    expect(resent).toBeLessThanOrEqual(8 * kills);
    const exported = await runCli(['export', '--db', db]);
    const lines = exported.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.length).toBe(300);
    expect(new Set(lines.map((l) => l.id)).size).toBe(300);
    expect(lines.every((l) => l.state === 'done')).toBe(true);
  });

  it('three runs on one database send every job exactly once', async () => {
    const { fake, db, keys } = await setup(240, 10);
    const args = ['run', '--db', db, '--base-url', fake.url, '--concurrency', '4', '--progress', 'none'];
    const results = await Promise.all([0, 1, 2].map(() => runCli(args)));
    expect(results.map((r) => r.code)).toEqual([0, 0, 0]);
    expect(fake.duplicates()).toEqual([]);
    expect(keys.every((k) => fake.sentCount(k) === 1)).toBe(true);
    expect((await states(db)).every((r) => r.state === 'done')).toBe(true);
  });

  it('SIGINT finishes in-flight requests, leaves no job running, exits 130', async () => {
    const { fake, db } = await setup(200, 200);
    const child = spawnCli(['run', '--db', db, '--base-url', fake.url, '--concurrency', '4', '--progress', 'plain']);
    const done = collect(child);
    await fake.waitForRequests(10);
    child.kill('SIGINT');
    const r = await done;
    expect(r.code).toBe(130);
    const rows = await states(db);
    expect(rows.filter((x) => x.state === 'running')).toEqual([]);
    const finished = rows.filter((x) => x.state === 'done').length;
    expect(finished).toBeGreaterThan(0);
    expect(finished).toBe(fake.received); // every request that went out was answered and stored
    expect(rows.filter((x) => x.state === 'pending').every((x) => x.attempts === 0)).toBe(true);
  });

  it('SIGTERM while the run is still starting (a database that never answers) exits 130 at once, as a later stop does', async () => {
    // accepts the connection and says nothing: the run waits in its start for as long as the test likes
    const silent = createServer(() => {});
    const sockets: Socket[] = [];
    silent.on('connection', (s) => sockets.push(s));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const connected = new Promise((resolve) => silent.once('connection', resolve));
      const port = (silent.address() as AddressInfo).port;
      const child = spawnCli(['run', '--db', `postgres://llmq@127.0.0.1:${port}/test`, '--provider', 'mock', '--progress', 'plain']);
      const done = collect(child, 30_000);
      await connected;
      child.kill('SIGTERM');
      const r = await done;
      // without a handler of its own until the run is under way, SIGTERM ended it as a signal does: 143
      expect(r.signal, r.stderr).toBeNull();
      expect(r.code, r.stderr).toBe(130);
      // and said so: it ended with no word
      expect(r.stderr).toBe('stopped (SIGTERM) while the run was starting: nothing was claimed or sent\n');
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });

  it('one Ctrl-C delivered twice at once (npx, timeout) is one stop: the requests in flight finish', async () => {
    const { fake, db } = await setup(20, 1500);
    const child = spawnCli(['run', '--db', db, '--base-url', fake.url, '--concurrency', '2', '--grace', '60', '--progress', 'plain']);
    const done = collect(child);
    await fake.waitForRequests(2);
    child.kill('SIGINT');
    await sleep(5);
    child.kill('SIGINT');
    const r = await done;
    expect(r.code).toBe(130);
    expect(r.stderr).not.toContain('aborting');
    const rows = await states(db);
    expect(rows.filter((x) => x.state === 'done').length).toBe(fake.received);
    expect(fake.received).toBeGreaterThanOrEqual(2);
  });

  it('--progress none: a Ctrl-C says at once that the requests in flight are finishing, as the other displays do', async () => {
    // it printed nothing until the summary, while requests took their time (up to the grace)
    const { fake, db } = await setup(20, 1500);
    const child = spawnCli(['run', '--db', db, '--base-url', fake.url, '--concurrency', '2', '--grace', '60', '--progress', 'none']);
    const done = collect(child);
    await fake.waitForRequests(2);
    child.kill('SIGINT');
    await waitForLine(
      child,
      'stderr',
      /^stopping: letting requests in flight finish, for up to 1m 00s \(--grace\); a second Ctrl-C \(or signal\) aborts$/,
    );
    const r = await done;
    expect(r.code, r.stderr).toBe(130);
    expect(r.stderr.indexOf('stopping:')).toBeLessThan(r.stderr.indexOf('stopped'));
  });

  it('a second SIGINT aborts the requests in flight at once and says so; their jobs go back to pending', async () => {
    const { fake, db } = await setup(50, 60_000); // answers that would take a minute
    const child = spawnCli(['run', '--db', db, '--base-url', fake.url, '--concurrency', '4', '--grace', '60', '--progress', 'plain']);
    const done = collect(child);
    await fake.waitForRequests(1);
    child.kill('SIGINT');
    await waitForLine(child, 'stderr', /stopping: letting requests in flight finish/);
    await sleep(ECHO_MS + 50); // sooner, it is taken as an echo of the first (the next test)
    const abortedAt = Date.now();
    child.kill('SIGINT');
    const r = await done;
    expect(Date.now() - abortedAt).toBeLessThan(5_000); // not the minute of the answers, nor the grace
    expect(r.code).toBe(130);
    expect(r.stderr).toContain('stopping: aborting the requests in flight; their jobs go back to pending');
    expect((await states(db)).every((x) => x.state === 'pending')).toBe(true);
  });

  it('a provider that goes down for 10 s mid-run fails no job', async () => {
    const { fake, db, keys } = await setup(120, 20);
    const child = spawnCli([
      'run',
      '--db',
      db,
      '--base-url',
      fake.url,
      '--concurrency',
      '4',
      '--max-attempts',
      '2',
      '--timeout',
      '2',
      '--retry-delay',
      '0.1',
      '--progress',
      'plain',
    ]);
    const done = collect(child, 90_000);
    await fake.waitForRequests(20);
    const downAt = Date.now();
    await fake.down();
    await waitForLine(child, 'stderr', /paused: provider down \d+s \(--max-outage 15m\), next try in/, 10_000);
    // The outage lasting 10 s is what is tested (far past what --max-attempts 2 would survive): time.
    await sleep(downAt + 10_000 - Date.now());
    await fake.up();
    const r = await done;
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/paused|outage|provider/i);
    const rows = await states(db);
    expect(rows.filter((x) => x.state !== 'done')).toEqual([]);
    expect(keys.every((k) => fake.sentCount(k) >= 1)).toBe(true);
  }, 90_000);

  it('a wrong key stops the run with exit 1, says what to fix, burns no job, never prints the key', async () => {
    const { fake, db } = await setup(30, 5);
    fake.respond((req) =>
      reply.error(401, `Incorrect API key provided: ${String(req.headers.authorization)}`, { code: 'invalid_api_key' }),
    );
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none'], {
      env: { LLMQ_API_KEY: 'sk-live-SECRET-123' },
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/LLMQ_API_KEY/);
    expect(r.stderr + r.stdout).not.toContain('sk-live-SECRET-123');
    expect((await states(db)).every((x) => x.state === 'pending' && x.attempts === 0)).toBe(true);
    const store = new SqliteStore(db);
    const dump =
      JSON.stringify(store.db.prepare('SELECT * FROM attempts').all()) + JSON.stringify(store.db.prepare('SELECT * FROM runs').all());
    await store.close();
    expect(dump).not.toContain('sk-live-SECRET-123');
  });

  it('a 403 that is not about the key says so: a region refused is no reason to rotate a good key', async () => {
    const { fake, db } = await setup(4, 5);
    fake.respond(() =>
      reply.error(403, 'Country, region, or territory not supported', {
        type: 'request_forbidden',
        code: 'unsupported_country_region_territory',
      }),
    );
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none']);
    expect(r.code, r.stderr).toBe(1);
    const said = r.stderr.replace(/\s+/g, ' ');
    expect(said).toContain(
      'HTTP 403: Country, region, or territory not supported. The provider does not serve requests from where this machine is',
    );
    expect(said).toContain('The provider refused the requests as forbidden (why is above). No job failed: 4 jobs are still pending.');
    expect(said).not.toMatch(/refused the API key|Check LLMQ_API_KEY/);
  });

  it("Google's quota per day spent stops the run with exit 1 and says so; no job burned, none failed", async () => {
    const { fake, db } = await setup(10, 5);
    fake.respond(() => reply.raw(429, DAILY_QUOTA_SPENT));
    const started = Date.now();
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none']);
    expect(r.code).toBe(1);
    // at once, not after the 36 s the 429 asks
    expect(Date.now() - started).toBeLessThan(20_000);
    expect(r.stderr).toContain('The quota per day is spent (GenerateRequestsPerDayPerProjectPerModel-FreeTier: 20)');
    expect(r.stderr).toContain(
      "The provider's quota per day for the model is spent (above): the jobs wait for it. No job failed: 10 jobs are still pending.",
    );
    expect((await states(db)).every((x) => x.state === 'pending' && x.attempts === 0)).toBe(true);
    // status tells the run's error whole, what to do at its end
    const status = (await runCli(['status', '--db', db])).stdout.replace(/\s+/g, ' ');
    expect(status).toContain("it comes back when the provider's day turns, or raise it with the provider.");
  });

  it("a model's quota per day spent: its jobs wait (pending, no attempt used), the other models' are answered, exit 1", async () => {
    const fake = await startFake({ latencyMs: 5, record: true });
    fake.respond((r) => (r.json?.model === 'gemini-pro' ? reply.raw(429, DAILY_QUOTA_SPENT) : undefined));
    const dir = tempDir();
    const lines = (prefix: string) => Array.from({ length: 12 }, (_, i) => `{"id":"${prefix}${i}","text":"${prefix} ${i}"}`).join('\n');
    writeFileSync(join(dir, 'pro.jsonl'), lines('p'));
    writeFileSync(join(dir, 'flash.jsonl'), lines('f'));
    expect((await runCli(['enqueue', 'pro.jsonl', '--model', 'gemini-pro'], { cwd: dir })).code).toBe(0);
    expect((await runCli(['enqueue', 'flash.jsonl', '--model', 'gemini-flash'], { cwd: dir })).code).toBe(0);
    const r = await runCli(['run', '--base-url', fake.url, '--progress', 'plain', '-c', '4'], { cwd: dir });
    expect(r.code, r.stderr).toBe(1);
    // said when the lane closes, and at the end with what waits
    expect(r.stderr).toMatch(/^warning: gemini-pro: HTTP 429: .*The quota per day is spent .* Its jobs wait; the other models go on\.$/m);
    expect(r.stderr).toContain('No job failed: 12 jobs are still pending.');
    const jobs = await states(join(dir, 'llmq.db'));
    expect(jobs.filter((j) => j.model === 'gemini-flash').map((j) => j.state)).toEqual(Array(12).fill('done'));
    expect(jobs.filter((j) => j.model === 'gemini-pro').every((j) => j.state === 'pending' && j.attempts === 0)).toBe(true);
    // the model's lane closed at its first refusals: not a request each refill interval for each of its jobs
    expect(fake.requests.filter((q) => q.json?.model === 'gemini-pro').length).toBeLessThanOrEqual(4);
    const status = (await runCli(['status'], { cwd: dir })).stdout.replace(/\s+/g, ' ');
    expect(status).toContain('gemini-pro: HTTP 429: You exceeded your current quota');
  });

  it('a job of the model backing off when its lane closes goes back at once, its tries as they are: the run does not wait out the backoff', async () => {
    const fake = await startFake({ latencyMs: 5, record: true });
    // the first request a 500 (its job backs off 30 s), every later one the day's quota spent
    fake.respond((r) => (r.index === 1 ? reply.serverError(500) : reply.raw(429, DAILY_QUOTA_SPENT)));
    const dir = tempDir();
    writeFileSync(join(dir, 'in.jsonl'), '{"id":"a","text":"one"}\n{"id":"b","text":"two"}\n');
    expect((await runCli(['enqueue', 'in.jsonl'], { cwd: dir })).code).toBe(0);
    const started = Date.now();
    const r = await runCli(['run', '--base-url', fake.url, '--retry-delay', '30', '-c', '1', '--progress', 'none'], { cwd: dir });
    expect(r.code, r.stderr).toBe(1);
    expect(Date.now() - started).toBeLessThan(20_000);
    const jobs = await states(join(dir, 'llmq.db'));
    // the 500's try counted, the 429's not
    expect(jobs.map((j) => [j.state, j.attempts]).sort()).toEqual([
      ['pending', 0],
      ['pending', 1],
    ]);
  }, 30_000);

  it('a key refused after it worked: the jobs that failed before the run stopped are said, not "no job failed"', async () => {
    const { fake, db } = await setup(6, 0);
    let sent = 0;
    fake.respond(() => {
      sent++;
      return sent === 1 ? undefined : sent <= 3 ? reply.badRequest('bad thing') : reply.unauthorized();
    });
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '-c', '1', '--progress', 'none']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('2 jobs failed in this run before it (llmq status says why; llmq retry-failed puts them back)');
    expect(r.stderr).not.toContain('No job failed');
    // the job refused for the key is not failed: it waits for the mended key
    expect((await states(db)).map((j) => j.state).sort()).toEqual(['done', 'failed', 'failed', 'pending', 'pending', 'pending']);
    // status says what stopped it, after the run's own output is gone
    const status = await runCli(['status', '--db', db]);
    expect(status.stdout).toMatch(/ended .* ago \(fatal\)/);
    expect(status.stdout).toMatch(/^ {10}error .*401.*Incorrect API key/m);
    expect(JSON.parse((await runCli(['status', '--json', '--db', db])).stdout).lastRun.error).toMatch(/401/);
  });

  it('exits 2 when the queue drained with failures, and retry-failed puts them back', async () => {
    const { fake, db, keys } = await setup(10, 1);
    fake.respond((req) => (req.key === keys[3] ? reply.badRequest('bad thing') : undefined));
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none']);
    expect(r.code).toBe(2);
    fake.respond(null);
    // an empty --error is in every error: refused, not taken for "all of them"
    const empty = await runCli(['retry-failed', '--db', db, '--error', '']);
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain('leave --error out to retry every failed job');
    const retry = await runCli(['retry-failed', '--db', db]);
    expect(retry.code).toBe(0);
    expect(retry.stderr).toMatch(/1 failed job/);
    const again = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none']);
    expect(again.code).toBe(0);
    expect((await states(db)).every((x) => x.state === 'done')).toBe(true);
    expect(fake.sentCount(keys[3]!)).toBe(2);
  });

  it('with --limit, the exit code speaks of the jobs taken: 0 when they are done, though older ones failed', async () => {
    const { fake, db, keys } = await setup(6, 0);
    fake.respond((req) => (req.key === keys[0] || req.key === keys[1] ? reply.badRequest('bad thing') : undefined));
    const first = await runCli(['run', '--db', db, '--base-url', fake.url, '--limit', '3', '--progress', 'none']);
    expect(first.code, first.stderr).toBe(2); // of the three taken, two failed
    const next = await runCli(['run', '--db', db, '--base-url', fake.url, '--limit', '1', '--progress', 'none']);
    expect(next.code, next.stderr).toBe(0); // the one taken is done; the two failures are older
    const rest = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none']);
    expect(rest.code, rest.stderr).toBe(2); // drained: the queue holds failed jobs
  });

  it("the offline mock's answers are stand-ins: a real run sends those jobs, once, and says so", async () => {
    const { fake, db, keys } = await setup(5, 0);
    // trying llmq on the real queue, as the README invites (--budget offline, say)
    const tried = await runCli(['run', '--db', db, '--provider', 'mock', '--limit', '2', '--progress', 'none']);
    expect(tried.code, tried.stderr).toBe(0);
    // what a real run would send, said before it: the 3 pending and the 2 the mock answered
    const estimate = (args: string[]) => runCli(['estimate', '--db', db, '--json', ...args]).then((r) => JSON.parse(r.stdout).jobs);
    expect(await estimate(['--base-url', fake.url])).toBe(5);
    expect(await estimate(['--provider', 'mock'])).toBe(3);
    const real = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none']);
    expect(real.code, real.stderr).toBe(0);
    expect(real.stderr).toContain(
      "2 jobs answered by the offline mock provider go back to pending, to be sent for real like the others (the mock's answers were stand-ins)",
    );
    const jobs = await states(db);
    for (const j of jobs) expect(j).toMatchObject({ state: 'done', output: answerFor(j.request), attempts: 1 });
    for (const key of keys) expect(fake.sentCount(key)).toBe(1);
    // taken back once: the next real run has nothing to send and says nothing of the mock
    const again = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'plain']);
    expect(again.stderr).not.toContain('mock');
    expect(fake.received).toBe(5);
  });

  it('a run with nothing pending says so in one line, no 0/0 progress, exit 0', async () => {
    const { fake, db } = await setup(3, 1);
    expect((await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none'])).code).toBe(0);
    // run where the queue is, as people do: the command it suggests reaches the queue this run was given
    const again = await runCli(['run', '--db', 'q.db', '--base-url', fake.url, '--progress', 'plain'], { cwd: dirname(db) });
    expect(again.code, again.stderr).toBe(0);
    expect(again.stderr).toMatch(
      /^run [0-9a-f]{8} on q\.db.*: nothing to do, 3 already done\nnothing was pending: llmq status --db q\.db shows the queue\.\n$/,
    );
    expect(fake.received).toBe(3);
    // --json is the display: another asked for beside it is refused, not silently ignored
    const both = await runCli(['run', '--db', db, '--base-url', fake.url, '--json', '--progress', 'tty']);
    expect(both.code).toBe(1);
    expect(both.stderr).toContain("option '--progress <mode>' cannot be used with option '--json'");
  });
});

describe('signalCounter', () => {
  it('counts a stop signal once however often it is echoed at once, and a later one as the second', () => {
    let now = 1000;
    const counted = signalCounter(() => now);
    expect(counted('SIGINT')).toBe(1);
    now += ECHO_MS - 1;
    expect(counted('SIGINT')).toBe(1);
    expect(counted('SIGTERM')).toBe(2); // another signal is another stop
    now += ECHO_MS;
    expect(counted('SIGTERM')).toBe(3);
  });
});
