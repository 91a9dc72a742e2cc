import { spawn, spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { commandFailure, deliverTo } from '../src/hooks/deliver.js';
import { createRunHooks, JOB_HOOK_ITEMS, jobItemsFrom } from '../src/hooks/run-hooks.js';
import { parseHookTarget } from '../src/hooks/target.js';
import { hookReportLine } from '../src/cli/hook-flags.js';
import type { RunSummary } from '../src/scheduler/events.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { all } from './helpers/store-reads.js';
import { collect, MOCK_NOW, runCli, spawnCli } from './helpers/cli.js';
import { answerFor, reply } from './helpers/fake-openai.js';
import { seededQueue, seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { waitFor } from './helpers/wait.js';
import { closedPort } from './helpers/ports.js';
import { startFake } from './helpers/start-fake.js';

const SECRET = 'hook-secret-for-tests';
const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  await Promise.all(cleanup.splice(0).map((c) => c()));
});

interface Received {
  readonly body: string;
  readonly signature: string | undefined;
}

/** A hook receiver on 127.0.0.1 answering with `answer(n)` (n from 1) or hanging when it returns null. */
async function receiver(answer: (n: number) => number | null = () => 200): Promise<{ url: string; got: Received[] }> {
  const got: Received[] = [];
  const server: Server = createServer((req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req
      .setEncoding('utf8')
      .on('data', (d: string) => (body += d))
      .on('end', () => {
        got.push({ body, signature: req.headers['x-llmq-signature'] as string | undefined });
        const status = answer(got.length);
        if (status !== null) res.writeHead(status).end();
      });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanup.push(
    () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(resolve);
      }),
  );
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, got };
}

const SUMMARY: RunSummary = {
  mayBeBilled: { tries: 0, usd: 0 },
  answersNotStored: 0,
  unreachable: false,
  wrongEndpoint: null,
  runId: 'run-1',
  cutOff: 0,
  refused: 0,
  empty: 0,
  reason: 'drained',
  done: 3,
  failed: 1,
  retried: 0,
  requests: 4,
  probes: 0,
  rateLimited: 0,
  strayRateLimited: 0,
  promptTokens: 30,
  completionTokens: 12,
  wallMs: 1234,
  remaining: 0,
  uncollected: [],
  failedInStore: 1,
  failuresInStore: [{ error: 'gave up after 5 attempts: HTTP 503', count: 1 }],
  fatal: null,
  costUsd: 0.0012,
  budget: null,
};

describe('run hooks', () => {
  it('llmq run --on-job URL --on-done CMD: a signed post per job with its answer or error, the summary on stdin once', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const store = new SqliteStore(db);
    const keys = await seedJobs(store, 8);
    const requests = new Map((await all(store.copier.dumpJobs())).map((r) => [r.key, r.request]));
    // a second document with doc-0's text: one job, two items, both named in its body
    await store.enqueue(
      [
        {
          itemId: 'doc-0-again',
          source: 'seed',
          meta: null,
          key: keys[0]!,
          request: requests.get(keys[0]!)!,
          model: 'gpt-4o-mini',
          priority: 0,
        },
      ],
      Date.now(),
    );
    await store.close();
    const fake = await startFake({ latencyMs: 5, record: false });
    fake.respond((r) => (r.key === keys[2] ? reply.badRequest() : undefined));
    const hook = await receiver();
    const doneFile = join(dir, 'done.json');

    const r = await runCli(
      [
        'run',
        '--db',
        db,
        '--base-url',
        fake.url,
        '--progress',
        'none',
        '--price',
        '1,2',
        '--on-job',
        hook.url,
        '--on-done',
        `cat > '${doneFile}'`,
      ],
      { env: { LLMQ_API_KEY: 'sk-test-0123456789abcdef', LLMQ_HOOK_SECRET: SECRET } },
    );
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toContain('hooks: --on-job 8 sent; --on-done 1 sent.');

    expect(hook.got).toHaveLength(8);
    for (const g of hook.got) expect(g.signature).toBe(`sha256=${createHmac('sha256', SECRET).update(g.body).digest('hex')}`);
    const bodies = hook.got.map((g) => JSON.parse(g.body));
    const failed = bodies.filter((b) => b.state === 'failed');
    expect(failed).toEqual([
      expect.objectContaining({
        event: 'job',
        key: keys[2],
        items: ['doc-2'],
        moreItems: false,
        attempts: 1,
        error: expect.stringContaining('HTTP 400'),
      }),
    ]);
    for (const b of bodies.filter((x) => x.state === 'done')) expect(b.output).toBe(answerFor(requests.get(b.key)!));
    // each body names the documents its job answers: the hook's reader needs no export to know them
    for (const b of bodies) {
      const n = keys.indexOf(b.key);
      expect([...b.items].sort(), b.key).toEqual(n === 0 ? ['doc-0', 'doc-0-again'] : [`doc-${n}`]);
      expect(b.moreItems).toBe(false);
    }

    const done = JSON.parse(readFileSync(doneFile, 'utf8'));
    expect(done).toMatchObject({
      event: 'done',
      exitCode: 2,
      reason: 'drained',
      counts: { done: 7, failed: 1, remaining: 0, failedInStore: 1 },
      jobHooks: { sent: 8, failed: 0, dropped: 0 },
    });
    expect(done.tokens.prompt).toBeGreaterThan(0);
    expect(done.durationMs).toBeGreaterThan(0);
    // what the run cost, as its summary says it ($1 and $2 per million tokens)
    expect(done.costUsd).toBeCloseTo((done.tokens.prompt * 1 + done.tokens.completion * 2) / 1e6, 12);
    expect(done.mayBeBilled).toEqual({ tries: 0, usd: 0 });
  });

  it(`a job hook body lists at most ${JOB_HOOK_ITEMS} of its job's items, and says there are more`, async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    cleanup.push(() => store.close());
    const [key] = await seedJobs(store, 1);
    const request = (await all(store.copier.dumpJobs()))[0]!.request;
    const row = (itemId: string) => ({ itemId, source: 'seed', meta: null, key: key!, request, model: 'gpt-4o-mini', priority: 0 });
    const itemsOf = jobItemsFrom(store);
    await store.enqueue(
      Array.from({ length: JOB_HOOK_ITEMS - 1 }, (_, i) => row(`same-${i}`)),
      Date.now(),
    );
    expect(await itemsOf(key!)).toMatchObject({ more: false, ids: expect.arrayContaining(['doc-0', 'same-0']) });
    expect((await itemsOf(key!)).ids).toHaveLength(JOB_HOOK_ITEMS);
    await store.enqueue([row('one-more')], Date.now());
    const capped = await itemsOf(key!);
    expect(capped.ids).toHaveLength(JOB_HOOK_ITEMS);
    expect(capped.more).toBe(true);

    // a read that fails leaves the list empty; the body still goes out
    const hook = await receiver();
    const hooks = createRunHooks({
      onJob: parseHookTarget(hook.url, '--on-job'),
      itemsOfJob: () => Promise.reject(new Error('the store is closed')),
    });
    hooks.listener('run:start', { runId: 'run-1', total: 1, alreadyDone: 0, options: {} });
    hooks.listener('job:failed', { key: key!, attempt: 1, status: 400, error: 'HTTP 400', item: null, moreItems: false });
    expect((await hooks.finish(SUMMARY, 2)).job).toMatchObject({ sent: 1 });
    expect(JSON.parse(hook.got[0]!.body)).toMatchObject({ key, items: [], moreItems: false, state: 'failed' });
  });

  it("--on-done's cost is the summary's: unknown (null), never $0, once an answer of a model without a price came", async () => {
    const got = await receiver();
    const hooks = createRunHooks({ onDone: parseHookTarget(got.url, '--on-done'), secret: SECRET });
    await hooks.finish({ ...SUMMARY, costUsd: null }, 0);
    expect(JSON.parse(got.got[0]!.body)).toMatchObject({ costUsd: null });

    const priced = await receiver();
    const all = createRunHooks({ onDone: parseHookTarget(priced.url, '--on-done'), secret: SECRET });
    await all.finish({ ...SUMMARY, costUsd: 0.5 }, 0);
    expect(JSON.parse(priced.got[0]!.body)).toMatchObject({ costUsd: 0.5 });
  });

  it('a hanging hook never holds the run: the listener returns at once, the queue is bounded, drops are counted', async () => {
    const hook = await receiver(() => null);
    const hooks = createRunHooks({ onJob: parseHookTarget(hook.url, '--on-job'), capacity: 100, timeoutMs: 60_000 });
    const t = performance.now();
    hooks.listener('run:start', { runId: 'run-1', total: 500, alreadyDone: 0, options: {} });
    for (let i = 0; i < 500; i++) {
      hooks.listener('job:done', {
        key: `k${i}`,
        attempt: 1,
        latencyMs: 5,
        usage: { promptTokens: 1, completionTokens: 1 },
        output: 'x'.repeat(1000),
      });
    }
    // The hook never answers: a listener that waited for it would not be back within a minute.
    expect(performance.now() - t).toBeLessThan(5000);
    expect(hook.got.length).toBeLessThanOrEqual(2);
    const report = await hooks.finish(SUMMARY, 2, { jobDeadlineMs: 300 });
    // 2 workers hold one body each, 100 wait, the other 398 were refused by the full queue; at the
    // deadline the waiting ones and the two still being tried are dropped: every body counted once.
    expect(report.job).toMatchObject({ sent: 0, failed: 0, dropped: 500, queueFull: 398 });
    expect(report.done).toBeNull();
    // the line says which were which: the full queue while the run went on, the deadline after it
    expect(hookReportLine(report)).toContain(
      'Of the dropped job hooks, 398 did not fit the queue while the run went on (the hook was slower than the jobs); 102 were still waiting or being sent when the 5 s allowed after the run ran out.',
    );
  });

  it('retries a URL post with backoff until it is taken; a dead URL fails after its tries, within the deadline', async () => {
    const flaky = await receiver((n) => (n < 3 ? 503 : 200));
    const hooks = createRunHooks({ onDone: parseHookTarget(flaky.url, '--on-done'), secret: SECRET, retryDelayMs: 20 });
    expect((await hooks.finish(SUMMARY, 2)).done).toMatchObject({ sent: 1, failed: 0 });
    expect(flaky.got).toHaveLength(3);
    expect(new Set(flaky.got.map((g) => g.body)).size).toBe(1);
    expect(JSON.parse(flaky.got[2]!.body)).toMatchObject({
      event: 'done',
      runId: 'run-1',
      exitCode: 2,
      counts: { done: 3, failed: 1 },
      tokens: { prompt: 30, completion: 12 },
      durationMs: 1234,
    });

    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const dead = createRunHooks({ onDone: parseHookTarget(`http://127.0.0.1:${port}/x`, '--on-done'), retryDelayMs: 20, attempts: 3 });
    const t = Date.now();
    const report = await dead.finish(SUMMARY, 0);
    expect(report.done).toMatchObject({ sent: 0, failed: 1, lastError: expect.stringMatching(/ECONNREFUSED/) });
    expect(Date.now() - t).toBeLessThan(5000);
  });

  it('a URL post still retrying at the deadline is dropped, and the report says why its tries failed', async () => {
    const failing = await receiver(() => 500);
    const hooks = createRunHooks({ onJob: parseHookTarget(failing.url, '--on-job'), retryDelayMs: 2000 });
    hooks.listener('run:start', { runId: 'r', total: 1, alreadyDone: 0, options: {} });
    hooks.listener('job:done', { key: 'k', attempt: 1, latencyMs: 1, usage: { promptTokens: 1, completionTokens: 1 }, output: 'x' });
    const report = await hooks.finish(SUMMARY, 0, { jobDeadlineMs: 500, doneDeadlineMs: 500 });
    expect(failing.got).toHaveLength(1);
    expect(report.job).toEqual({ sent: 0, failed: 0, dropped: 1, queueFull: 0, lastError: 'HTTP 500' });
    expect(hookReportLine(report)).toContain('--on-job 0 sent, 1 dropped (last error: HTTP 500)');
  });

  it('at the deadline a hook still being tried is given up: the process exits at once, and no command it started is left', async () => {
    const hook = await receiver(() => null); // takes the post, never answers
    const marker = `${(600 + Math.random()).toFixed(6)}`; // a sleep only this test starts
    const dist = (m: string) => JSON.stringify(pathToFileURL(fileURLToPath(new URL(`../dist/hooks/${m}.js`, import.meta.url))).href);
    const script = `
      const { createRunHooks } = await import(${dist('run-hooks')});
      const { parseHookTarget } = await import(${dist('target')});
      const hooks = createRunHooks({
        onJob: parseHookTarget(${JSON.stringify(hook.url)}, '--on-job'),
        onDone: parseHookTarget('sleep ${marker} & sleep ${marker}', '--on-done'),
        timeoutMs: 60000,
      });
      hooks.listener('run:start', { runId: 'r', total: 1, alreadyDone: 0, options: {} });
      hooks.listener('job:done', { key: 'k', attempt: 1, latencyMs: 1, usage: { promptTokens: 1, completionTokens: 1 }, output: 'x' });
      const report = await hooks.finish(${JSON.stringify(SUMMARY)}, 0, { jobDeadlineMs: 300, doneDeadlineMs: 500 });
      console.log(JSON.stringify(report));`;
    const t = Date.now();
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    const killer = setTimeout(() => child.kill('SIGKILL'), 8000);
    const code = await new Promise((resolve) => child.on('exit', resolve));
    clearTimeout(killer);
    // the deadlines are 0.3 s and 0.5 s: a post or a command still under way held the process for its
    // own timeout (60 s here) and retries
    expect(code).toBe(0);
    expect(Date.now() - t).toBeLessThan(4000);
    expect(JSON.parse(out)).toMatchObject({ job: { sent: 0, dropped: 1 }, done: { sent: 0, dropped: 1 } });
    expect(hook.got).toHaveLength(1);
    const left = spawnSync('pgrep', ['-f', `sleep ${marker}`], { encoding: 'utf8' }).stdout.trim();
    expect(left, "the done hook's commands are still running").toBe('');
  }, 15_000);

  it('a dead --on-job URL is said while the run goes on, and the drops at the end are put down to it', async () => {
    const port = await closedPort();
    const db = await seededQueue(30);
    const r = await runCli(
      [
        'run',
        '--db',
        db,
        '--provider',
        'mock',
        '--mock-latency',
        '20',
        '-c',
        '4',
        '--progress',
        'plain',
        '--on-job',
        `http://127.0.0.1:${port}/job`,
      ],
      { timeoutMs: 60_000 },
    );
    expect(r.code, r.stderr).toBe(0);
    const warned = r.stderr.indexOf(`warning: --on-job hook failing: connect ECONNREFUSED 127.0.0.1:${port}`);
    expect(warned, r.stderr).toBeGreaterThan(-1);
    expect(warned).toBeLessThan(r.stderr.indexOf('finished in'));
    expect(r.stderr.split('--on-job hook failing').length - 1).toBe(1);
    expect(r.stderr).toContain(`ECONNREFUSED 127.0.0.1:${port}; each post is tried again`);
    expect(r.stderr).toMatch(
      /dropped \(last error: connect ECONNREFUSED[^)]*\)\. Of the dropped job hooks, (\d+ did not fit the queue [^;]*; )?\d+ were still waiting behind failing deliveries/,
    );
  }, 90_000);

  it('a failing --on-job command is said as run once, not tried again', async () => {
    const db = await seededQueue(5);
    const tries = join(dirname(db), 'tries.log');
    const r = await runCli(['run', '--db', db, ...MOCK_NOW, '--on-job', `echo x >> ${tries}; exit 1`]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('warning: --on-job hook failing: exit code 1; a command is not run again');
    expect(readFileSync(tries, 'utf8').trim().split('\n')).toHaveLength(5); // once a job
  }, 30_000);

  it('under --json, what the hooks delivered is a last event after run:end, not only a line on stderr', async () => {
    const db = await seededQueue(3);
    const r = await runCli([
      'run',
      '--db',
      db,
      '--provider',
      'mock',
      '--mock-latency',
      '0',
      '--json',
      '--on-job',
      'exit 1',
      '--on-done',
      'cat > /dev/null',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const events = r.stdout
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(events.map((e) => e.event).slice(-2)).toEqual(['run:end', 'hooks']);
    expect(events.at(-1)).toMatchObject({
      job: { sent: 0, failed: 3, dropped: 0, lastError: 'exit code 1' },
      alert: null,
      done: { sent: 1, failed: 0, dropped: 0, lastError: null },
    });
  }, 30_000);

  it("a command gets each body as one line: --on-job 'cat >> jobs.jsonl' keeps JSON Lines", async () => {
    const db = await seededQueue(4);
    const log = join(dirname(db), 'jobs.jsonl');
    const r = await runCli(['run', '--db', db, ...MOCK_NOW, '--on-job', `cat >> ${log}`]);
    expect(r.code, r.stderr).toBe(0);
    const lines = readFileSync(log, 'utf8').split('\n');
    expect(lines.pop()).toBe('');
    expect(lines.map((l) => JSON.parse(l).state)).toEqual(['done', 'done', 'done', 'done']);
  }, 30_000);

  it("a job hook slower than the run still names each job's documents: the queue is read as each body goes out, after the run too", async () => {
    const db = await seededQueue(6);
    const log = join(dirname(db), 'jobs.jsonl');
    // two at a time, 0.3 s each: most bodies go out after the run has ended
    const r = await runCli(['run', '--db', db, ...MOCK_NOW, '--on-job', `sleep 0.3; cat >> ${log}`]);
    expect(r.code, r.stderr).toBe(0);
    const bodies = readFileSync(log, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(bodies.map((b) => b.items).sort()).toEqual([0, 1, 2, 3, 4, 5].map((n) => [`doc-${n}`]));
  }, 30_000);

  it('a Ctrl-C while llmq waits for its hooks ends llmq and the hook commands with it, with the exit code of the run (it had ended)', async () => {
    const marker = `${(700 + Math.random()).toFixed(6)}`;
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 2);
    await store.close();
    // in a script, so only the hook's processes have the marker in their command line, not llmq's
    const hook = join(dir, 'hook.sh');
    writeFileSync(hook, `sleep ${marker} & sleep ${marker}\nwait\n`);
    const child = spawnCli(['run', '--db', db, '--provider', 'mock', '--mock-latency', '1', '--on-done', `sh ${hook}`]);
    const done = collect(child, 20_000);
    const hooked = () => spawnSync('pgrep', ['-f', `sleep ${marker}`], { encoding: 'utf8' }).stdout.trim();
    for (let i = 0; i < 100 && hooked() === ''; i++) await new Promise((r) => setTimeout(r, 100));
    expect(hooked(), 'the done hook started').not.toBe('');
    // a wait past a second is said, with how to end it
    let said = '';
    child.stderr!.on('data', (d) => (said += String(d)));
    await waitFor(() => said.includes('hooks: delivering what is queued'), { what: 'the wait for the hooks to be said' });
    // what it waits for is the hooks given: no job hooks here
    expect(said).toContain('hooks: delivering what is queued (--on-done up to 15 s); Ctrl-C quits at once');
    child.kill('SIGINT');
    const r = await done;
    // the run drained: 130 said its unfinished jobs went back to pending
    expect([r.code, r.signal], r.stderr).toEqual([0, null]);
    expect(r.stderr).toContain('hooks: quit before they were all delivered (--on-done not sent, or cut short)');
    await new Promise((r) => setTimeout(r, 200));
    expect(hooked(), "the done hook's commands outlived llmq").toBe('');
  }, 30_000);

  it("a run stopped by its budget says so before the hooks' wait, and a Ctrl-C during it keeps exit 3", async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 20);
    await store.close();
    const hook = join(dir, 'hook.sh');
    writeFileSync(hook, 'sleep 30\n');
    const child = spawnCli(['run', '--db', db, ...MOCK_NOW, '--price', '1000,2000', '--budget', '0.5', '--on-done', `sh ${hook}`]);
    const done = collect(child, 20_000);
    let said = '';
    child.stderr!.on('data', (d) => (said += String(d)));
    await waitFor(() => said.includes('hooks: delivering what is queued'), { what: 'the wait for the hooks to be said' });
    expect(said).toContain('budget reached');
    child.kill('SIGINT');
    const r = await done;
    expect([r.code, r.signal], r.stderr).toEqual([3, null]);
  }, 30_000);

  it('a command hook run many times adds one exit listener, not one per command', async () => {
    const before = process.listenerCount('exit');
    const deliver = deliverTo(parseHookTarget('true', '--on-job'));
    const stop = new AbortController().signal;
    for (let i = 0; i < 12; i++) await deliver('{}', stop);
    expect(process.listenerCount('exit') - before).toBeLessThanOrEqual(1);
  });

  it("a command hook gets llmq's environment without the API key or the hook secret", async () => {
    const out = join(tempDir(), 'env.txt');
    const saved = { ...process.env };
    Object.assign(process.env, {
      LLMQ_API_KEY: 'sk-hook-leak-0123456789',
      OPENAI_API_KEY: 'sk-other-0123456789',
      LLMQ_HOOK_SECRET: 's3cret',
      HOOK_KEEPS: 'yes',
    });
    try {
      await deliverTo({ kind: 'command', command: `env > '${out}'` })('{}', new AbortController().signal);
    } finally {
      for (const name of ['LLMQ_API_KEY', 'OPENAI_API_KEY', 'LLMQ_HOOK_SECRET', 'HOOK_KEEPS']) {
        if (saved[name] === undefined) delete process.env[name];
        else process.env[name] = saved[name];
      }
    }
    const env = readFileSync(out, 'utf8');
    expect(env).toContain('HOOK_KEEPS=yes');
    expect(env).not.toMatch(/LLMQ_API_KEY|OPENAI_API_KEY|LLMQ_HOOK_SECRET|sk-hook-leak|s3cret/);
    const failed = deliverTo({ kind: 'command', command: 'no-such-hook-command-xyz' })('{}', new AbortController().signal);
    await expect(failed).rejects.toThrow(/^exit code 127: .*no-such-hook-command-xyz.*not found$/);
  });

  it("a failing command's message ends with the last line it wrote to stderr, or what the shell's code means", async () => {
    const stop = new AbortController().signal;
    const said = deliverTo({
      kind: 'command',
      command: `echo first >&2; echo 'no route to https://u:pw@example.test/x' >&2; echo; exit 3`,
    });
    await expect(said('{}', stop)).rejects.toThrow(/^exit code 3: no route to https:\/\/u:\*\*\*@example\.test\/x$/);
    const silent = deliverTo({ kind: 'command', command: 'exit 127' });
    await expect(silent('{}', stop)).rejects.toThrow(/^exit code 127 \(command not found\)$/);
    expect(commandFailure(1, null, `${'x'.repeat(300)}\n`)).toBe(`exit code 1: ${'x'.repeat(199)}…`);
    expect(commandFailure(null, 'SIGKILL', '')).toBe('killed by SIGKILL');
    // cleaned, then cut: a password near the cut is masked all the same, and a key shape goes
    const long = `${'x'.repeat(180)} https://user:secretpw@example.test/x sk-${'a'.repeat(20)}`;
    expect(commandFailure(1, null, long)).not.toMatch(/secretpw|sk-a/);
  });

  it("a failing command's last line is read after it exits, but a process it left holding stderr does not hold the hook", async () => {
    const stop = new AbortController().signal;
    // the line comes after the shell's exit, from a process it left: as the shell's own last write
    // can, when 'exit' is handled before the pipe is read
    const late = deliverTo({ kind: 'command', command: `(sleep 0.03; echo 'late word' >&2) & exit 4` });
    await expect(late('{}', stop)).rejects.toThrow(/^exit code 4: late word$/);
    const held = deliverTo({ kind: 'command', command: `sleep 3 & echo 'said first' >&2; exit 5` });
    const from = Date.now();
    await expect(held('{}', stop)).rejects.toThrow(/^exit code 5: said first$/);
    expect(Date.now() - from).toBeLessThan(1500);
  });

  it('posts to any port, the Fetch standard\'s blocked ones too (a receiver on 6000 was refused as "bad port")', async () => {
    let server: Server | null = null;
    const got: string[] = [];
    for (const port of [6000, 6665, 6666, 6667, 6668, 6669, 5060, 10080]) {
      const s = createServer((req, res) => {
        req.on('data', (d) => got.push(String(d))).on('end', () => res.writeHead(204).end());
      });
      const listening = await new Promise<boolean>((resolve) => {
        s.once('error', () => resolve(false));
        s.listen(port, '127.0.0.1', () => resolve(true));
      });
      if (listening) {
        server = s;
        break;
      }
    }
    expect(server, 'no blocked port was free on 127.0.0.1').not.toBeNull();
    cleanup.push(() => new Promise((resolve) => server!.close(resolve)));
    const port = (server!.address() as AddressInfo).port;
    await deliverTo(parseHookTarget(`http://127.0.0.1:${port}/hook`, '--on-done'))('{"event":"done"}', new AbortController().signal);
    expect(got).toEqual(['{"event":"done"}']);
  });

  it('says why a try failed in words a user can act on: a redirect (not followed), no answer in time, a command over its time', async () => {
    const moved = await receiver(() => null);
    const redirecting = createServer((_req, res) => res.writeHead(301, { location: moved.url }).end());
    await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
    cleanup.push(() => new Promise((resolve) => redirecting.close(resolve)));
    const from = `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/old`;
    const tries: string[] = [];
    const stop = new AbortController().signal;
    // a POST redirected by 301 would arrive as a GET without its body: not followed, not retried
    await expect(deliverTo(parseHookTarget(from, '--on-done'), { retryDelayMs: 10 })('{}', stop, (why) => tries.push(why))).rejects.toThrow(
      `HTTP 301: redirected to ${moved.url}; hooks do not follow redirects, give that URL`,
    );
    expect(tries).toHaveLength(1);
    expect(moved.got).toHaveLength(0);

    const silent = await receiver(() => null);
    await expect(deliverTo(parseHookTarget(silent.url, '--on-done'), { attempts: 1, timeoutMs: 200 })('{}', stop)).rejects.toThrow(
      /^no answer within 0\.2 s$/,
    );
    await expect(deliverTo(parseHookTarget('sleep 5', '--on-done'), { timeoutMs: 200 })('{}', stop)).rejects.toThrow(
      /^still running after 0\.2 s, the most a hook command may take: stopped$/,
    );
  });

  it('refuses a hook URL of another scheme instead of running it as a command', () => {
    expect(() => parseHookTarget('ftp://u:secret@host/x', '--on-done')).toThrow(/http:\/\/ or https:\/\/ URLs only/);
    expect(() => parseHookTarget('ftp://u:secret@host/x', '--on-done')).not.toThrow(/secret/);
    expect(parseHookTarget('notify-send done', '--on-done')).toEqual({ kind: 'command', command: 'notify-send done' });
    expect(() => parseHookTarget('http://', '--on-job')).toThrow('--on-job http://: not a whole URL (write it as http://host:port/path)');
  });

  it('refuses a hook URL with a user or password (they would never be sent), without quoting the password', async () => {
    expect(() => parseHookTarget('http://user:hookpass123@127.0.0.1:9/x', '--on-done')).toThrow(/cannot carry a user or password/);
    expect(() => parseHookTarget('http://user:hookpass123@127.0.0.1:9/x', '--on-done')).not.toThrow(/hookpass123/);
    expect(() => parseHookTarget('https://token@127.0.0.1:9/x', '--on-job')).toThrow(/cannot carry a user or password/);
    const db = join(tempDir(), 'q.db');
    const r = await runCli(['run', '--db', db, '--provider', 'mock', '--on-done', 'http://user:hookpass123@127.0.0.1:9/x']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('--on-done http://user:***@127.0.0.1:9/x: a hook URL cannot carry a user or password');
    expect(r.stderr).not.toContain('hookpass123');
    // a password with characters that end a URL in free text ( ( ' ) is masked all the same
    for (const url of ['https://hook:S3c(r3t@127.0.0.1:9/x', "https://hook:it's9@127.0.0.1:9/x"]) {
      const odd = await runCli(['run', '--db', db, '--provider', 'mock', '--on-job', url]);
      expect(odd.code).toBe(1);
      expect(odd.stderr).toContain('--on-job https://hook:***@127.0.0.1:9/x: a hook URL cannot carry a user or password');
      expect(odd.stderr).not.toMatch(/S3c\(r3t|it's9/);
    }
  });
});
