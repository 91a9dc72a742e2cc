/**
 * `llmq run` as a person and as a program see it: the real built CLI against the HTTP fake, under a
 * real pseudo-terminal (util-linux `script`), through a plain pipe, and with --json.
 */
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { enqueueJsonl, jsonLines, playTerminal, readDb, runInPty, SGR, stripAnsi } from './helpers/e2e.js';
import { answerFor, reply, type FakeRequest } from './helpers/fake-openai.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';

const DOCS = 24;

const content = (req: FakeRequest): string => String(req.json?.messages?.at(-1)?.content ?? '');

/**
 * 24 documents on a fake that answers in 150 ms: doc 5 is refused (400), doc 9 gets a 500 once and
 * then succeeds. With concurrency 2 the run lasts about 2 s, long enough for several frames.
 */
async function setup() {
  const fake = await startFake({ latencyMs: 150 });
  fake.respond((req) => {
    if (content(req).includes('doc-FAIL')) return reply.badRequest("Invalid value for 'temperature': must be between 0 and 2.");
    if (content(req).includes('doc-FLAKY') && req.attempt === 1) return reply.serverError(500);
    return undefined;
  });
  const lines = Array.from({ length: DOCS }, (_, i) => ({
    id: `d${String(i).padStart(2, '0')}`,
    text:
      i === 5
        ? 'doc-FAIL: this one is refused'
        : i === 9
          ? 'doc-FLAKY: the first try gets a 500'
          : `document ${i}: the quick brown fox jumps over the lazy dog ${i} times.`,
  }));
  const dir = tempDir();
  const { db } = await enqueueJsonl(dir, lines);
  // Run where the queue is, as people do (`cd work && llmq run`): the header names a short path.
  const args = ['run', '--db', 'q.db', '--base-url', fake.url, '--concurrency', '2', '--retry-delay', '0.05'];
  return { fake, db, dir, args };
}

/** What every human display must end with for this run. */
function expectSummary(text: string): void {
  expect(text).toMatch(/finished in \d+(\.\d+)?s: 23 done, 1 failed, 1 retry/);
  expect(text).toMatch(/ {2}tokens [\d.,kM]+ in · [\d.,kM]+ out · cost \$[\d.]+ · [\d.]+ jobs\/s/);
  expect(text).toContain('1 failed job in the queue. See why: llmq status --db q.db');
  // the failure is a 400: sent again it fails the same way, so no retry is proposed
  expect(text).toMatch(/ {2}the provider refused it as sent \(HTTP 4xx\): sent again, it fails the same way\r?\n/);
  expect(text).not.toContain('retry-failed');
}

describe('llmq run on a terminal (pseudo-terminal via script)', () => {
  it('draws bars in place with colors: percentage, jobs/s, tok/s, ETA, details, the failure and the summary, within 80 columns', async () => {
    const { fake, dir, args } = await setup();
    const r = await runInPty(args, { cwd: dir, env: { NO_COLOR: undefined } });
    expect(r.code, r.stdout).toBe(2); // drained with a failed job
    const raw = r.stdout;
    // drawn in place: cursor hidden then shown, moved up, lines erased
    expect(raw).toContain('\x1b[?25l');
    expect(raw).toContain('\x1b[?25h');
    expect(raw).toMatch(/\x1b\[\d*A/);
    expect(raw).toMatch(/\x1b\[0?K/);
    // colors: a terminal without NO_COLOR gets them (green bar, red failure)
    expect(raw).toMatch(/\x1b\[32m█/);
    expect(raw).toMatch(/\x1b\[31mfailed/);

    const plain = stripAnsi(raw);
    // a frame with the bar, counts, percentage, rates and the ETA while work was left (-- in a run's first 3 s)
    expect(plain).toMatch(/█+░+ \d{1,2}\/24 \d{1,2}(\.\d)?% · [\d.,]+ jobs\/s · [\d.,]+k? tok\/s · ETA (\d+[sm]|--)/);
    // the last frame: all 24 finished (23 done + 1 failed), nothing left to wait for
    expect(plain).toMatch(/█{5,} 24\/24 100% · [\d.,]+ jobs\/s · [\d.,]+k? tok\/s · ETA 0s/);
    expect(plain).toMatch(/in flight \d · waiting \d+ · backoff \d · failed 1 · \$\d/);
    expect(plain).toMatch(/failed d05 \(attempt 1\): HTTP 400: Invalid value for '[^\n]*…/);
    expectSummary(plain);

    // what the terminal ends up showing, played on a model screen: never past column 80
    const term = playTerminal(raw);
    expect(term.maxColumn).toBeGreaterThan(60); // the bar line uses the width
    expect(term.maxColumn, term.widest).toBeLessThanOrEqual(80);
    const screen = term.screen.join('\n');
    expect(screen).toMatch(/^█{10,} 24\/24 100% · /m);
    expect(screen).toMatch(/^finished in .*23 done, 1 failed, 1 retry$/m);
    expect(fake.received).toBe(DOCS + 1);
  });

  it('NO_COLOR: still drawn in place, but not one color code', async () => {
    const { dir, args } = await setup();
    const r = await runInPty(args, { cwd: dir, env: { NO_COLOR: '1' } });
    expect(r.code, r.stdout).toBe(2);
    expect(r.stdout).not.toMatch(SGR);
    expect(r.stdout).toMatch(/\x1b\[\d*A/); // cursor movement is not color
    const plain = stripAnsi(r.stdout);
    expect(plain).toMatch(/█{5,} 24\/24 100% · [\d.,]+ jobs\/s · [\d.,]+k? tok\/s · ETA/);
    expect(plain).toMatch(/ETA \d+[sm]/);
    expectSummary(plain);
    const term = playTerminal(r.stdout);
    expect(term.maxColumn, term.widest).toBeLessThanOrEqual(80);
  });
});

describe('llmq run on a terminal: known problem', () => {
  // KNOWN BUG (src/cli/commands/run.ts, outside this suite's remit): the run command writes its own
  // header line "llmq run: <db> -> <provider> (<url>), concurrency N" uncut, after cli-progress has
  // turned auto-wrap off, so with a long --db path or URL a terminal chops its end (here the line is
  // ~100 columns). Cutting it with oneLine(header, columns - 1) on a TTY, or passing { db, provider }
  // to attachProgress (whose header is cut to the width) instead, fixes it; then un-skip this.
  it('a long --db path keeps the header within 80 columns', async () => {
    const { db, args } = await setup();
    const r = await runInPty(
      args.map((a) => (a === 'q.db' ? db : a)),
      { env: { NO_COLOR: '1' } },
    );
    expect(r.code, r.stdout).toBe(2);
    const term = playTerminal(r.stdout);
    expect(term.maxColumn, term.widest).toBeLessThanOrEqual(80);
  });
});

describe('llmq run through a pipe', () => {
  it('plain lines and the summary, not one escape code, even with colors allowed', async () => {
    const { dir, args } = await setup();
    const r = await runCli(args, { cwd: dir, env: { NO_COLOR: undefined } });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stdout + r.stderr).not.toMatch(/\x1b\[/);
    expect(r.stdout + r.stderr).not.toContain('\x1b');
    expect(r.stdout).toBe(''); // messages go to stderr; a run has no data
    // no key in the environment: said, as a local server may need none
    expect(r.stderr).toMatch(
      /^run [0-9a-f]{8} on q\.db via openai-compatible \(http:\/\/127\.0\.0\.1:\d+\/v1\), no API key \(LLMQ_API_KEY, OPENAI_API_KEY unset\): 24 jobs to do$/m,
    );
    const progress = r.stderr.split('\n').filter((l) => /^\[\d/.test(l));
    expect(progress.length).toBeGreaterThanOrEqual(1);
    for (const l of progress)
      expect(l).toMatch(
        /^\[\d+s\] \d+\/24 \d+(\.\d)?% · [\d.,]+ jobs\/s · [\d.,]+k? tok\/s · ETA (--|\d[\dhms ]*) · in flight \d · waiting \d+ · backoff \d · failed [01] · \$[\d.]+$/,
      );
    expect(progress.at(-1)).toMatch(/ 24\/24 100% .* failed 1 · /);
    // named by its item, what was enqueued and what llmq show takes
    expect(r.stderr).toMatch(/^failed d05 \(attempt 1\): HTTP 400: Invalid value/m);
    expectSummary(r.stderr);
  });
});

describe('llmq run --json', () => {
  it('stdout is only NDJSON events: starts, dones, the retry, the failure, progress, and a run:end that matches the store', async () => {
    const { fake, db, dir, args } = await setup();
    const r = await runCli([...args, '--json'], { cwd: dir });
    expect(r.code, r.stderr).toBe(2);
    expect(r.stdout).not.toContain('\x1b');
    expect(r.stdout.endsWith('\n')).toBe(true);
    const events = jsonLines(r.stdout); // throws on any line that is not JSON
    for (const e of events) {
      expect(typeof e.event).toBe('string');
      expect(typeof e.time).toBe('number');
    }
    const kinds = new Set(events.map((e) => e.event));
    for (const k of ['run:start', 'job:start', 'job:done', 'job:retry', 'job:failed', 'progress', 'run:end']) expect(kinds, k).toContain(k);
    expect(events[0].event).toBe('run:start');
    expect(events.at(-1).event).toBe('run:end');
    expect(events.filter((e) => e.event === 'run:end')).toHaveLength(1);

    const { jobs, attempts } = readDb(db);
    const byState = (s: string) => jobs.filter((j) => j.state === s);
    const of = (name: string) => events.filter((e) => e.event === name);
    // one event per thing that happened, keyed by the job
    expect(of('job:start')).toHaveLength(DOCS + 1);
    expect(new Set(of('job:done').map((e) => e.key))).toEqual(new Set(byState('done').map((j) => j.key)));
    expect(of('job:done')).toHaveLength(23);
    const failedJob = byState('failed')[0]!;
    expect(of('job:failed')).toEqual([
      expect.objectContaining({ key: failedJob.key, attempt: 1, status: 400, error: failedJob.error, item: 'd05', moreItems: false }),
    ]);
    const flaky = jobs.find((j) => j.request.includes('doc-FLAKY'))!;
    expect(of('job:retry')).toEqual([expect.objectContaining({ key: flaky.key, attempt: 1, status: 500, counted: true })]);
    for (const e of of('job:done')) {
      const job = jobs.find((j) => j.key === e.key)!;
      expect(e.usage).toEqual({ promptTokens: job.prompt_tokens, completionTokens: job.completion_tokens });
      expect(job.output).toBe(answerFor(job.request));
    }
    // every job:done comes after that job's start
    const startedAt = new Map<string, number>();
    events.forEach((e, i) => {
      if (e.event === 'job:start' && !startedAt.has(e.key)) startedAt.set(e.key, i);
    });
    events.forEach((e, i) => {
      if (e.event === 'job:done') expect(startedAt.get(e.key)).toBeLessThan(i);
    });

    const end = events.at(-1);
    const sum = (f: (j: (typeof jobs)[number]) => number | null) => jobs.reduce((a, j) => a + (f(j) ?? 0), 0);
    expect(end).toMatchObject({
      reason: 'drained',
      done: byState('done').length,
      failed: byState('failed').length,
      retried: attempts.filter((a) => a.outcome === 'retry').length,
      requests: fake.received,
      rateLimited: 0,
      promptTokens: sum((j) => j.prompt_tokens),
      completionTokens: sum((j) => j.completion_tokens),
      remaining: 0,
      failedInStore: 1,
      fatal: null,
    });
    expect(end.done).toBe(23);
    expect(end.promptTokens).toBeGreaterThan(0);
    expect(end.runId).toBe(readDb(db).runs[0]!.id);
    expect(end).not.toHaveProperty('cost_usd');
    expect(end.costUsd).toBeCloseTo((end.promptTokens * 0.15 + end.completionTokens * 0.6) / 1e6, 12);
    // the last progress snapshot agrees with the end
    expect(of('progress').at(-1)).toMatchObject({ total: DOCS, done: 23, failed: 1, retried: 1 });
  });
});
