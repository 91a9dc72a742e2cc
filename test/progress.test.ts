import { EventEmitter } from 'node:events';
import { PassThrough } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { attachProgress, progressMode, type ProgressMode } from '../src/cli/progress/index.js';
import { countsText, detailText, failureText, pauseText, startText, summaryText } from '../src/cli/progress/lines.js';
import { ProgressState } from '../src/cli/progress/state.js';
import { loadPriceTable } from '../src/pricing/price-table.js';
import { NO_PAINT } from '../src/report/format.js';
import { stripAnsi } from '../src/report/format.js';
import type { ProgressSnapshot, RunSummary, SchedulerEventMap, SchedulerEventName } from '../src/scheduler/events.js';

const T = 1_754_000_000_000;

function snapshot(over: Partial<ProgressSnapshot> = {}): ProgressSnapshot {
  return {
    startedAt: T,
    now: T + 60_000,
    total: 40_000,
    alreadyDone: 0,
    done: 31_204,
    failed: 148,
    retried: 1_020,
    inFlight: 8,
    waiting: 3,
    backingOff: 2,
    requests: 32_400,
    rateLimited: 12,
    promptTokens: 14_200_000,
    completionTokens: 3_100_000,
    jobsPerSecond: 4.6,
    tokensPerSecond: 612,
    etaSeconds: 1_860,
    shared: null,
    paused: null,
    lanes: [],
    concurrency: 8,
    ...over,
  };
}

const summary: RunSummary = {
  mayBeBilled: { tries: 0, usd: 0 },
  answersNotStored: 0,
  unreachable: false,
  wrongEndpoint: null,
  runId: 'r1',
  cutOff: 0,
  refused: 0,
  empty: 0,
  reason: 'drained',
  done: 31_204,
  failed: 148,
  retried: 1_020,
  requests: 32_400,
  probes: 0,
  rateLimited: 12,
  strayRateLimited: 0,
  promptTokens: 14_200_000,
  completionTokens: 3_100_000,
  wallMs: 6_780_000,
  remaining: 0,
  uncollected: [],
  failedInStore: 148,
  failuresInStore: [{ error: 'gave up after 5 attempts: HTTP 503', count: 148 }],
  costUsd: 4.2,
  budget: null,
  fatal: null,
};

/** A stream that records what was written; `tty` makes it look like a terminal to cli-progress. */
function sink(tty = false): PassThrough & { text: () => string; isTTY?: boolean; columns?: number } {
  const s = new PassThrough() as PassThrough & { text: () => string; isTTY?: boolean; columns?: number };
  let out = '';
  const write = s.write.bind(s);
  s.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
    out += chunk.toString();
    return write(chunk, ...rest);
  }) as typeof s.write;
  s.resume();
  s.text = () => out;
  if (tty) Object.assign(s, { isTTY: true, columns: 80 });
  return s;
}

/** A whole small run's events, in order. */
function feed(emit: <E extends SchedulerEventName>(e: E, p: SchedulerEventMap[E]) => void): void {
  emit('run:start', { runId: 'r1', total: 40_000, alreadyDone: 0, options: { model: 'gpt-4o-mini' } });
  emit('job:start', { key: 'k1'.padEnd(64, '0'), attempt: 1, model: 'gpt-4o-mini' });
  emit('progress', snapshot({ now: T + 1000, done: 0, failed: 0 }));
  emit('job:done', {
    key: 'k1'.padEnd(64, '0'),
    attempt: 1,
    latencyMs: 800,
    usage: { promptTokens: 1_000_000, completionTokens: 1_000_000 },
    output: 'an answer',
  });
  emit('job:start', { key: 'k2'.padEnd(64, '0'), attempt: 1, model: 'gpt-4o-mini' });
  emit('job:retry', {
    key: 'k2'.padEnd(64, '0'),
    attempt: 1,
    status: 503,
    reason: 'server',
    error: '503 Service Unavailable',
    delayMs: 1000,
    counted: true,
  });
  emit('paused', { reason: 'rate_limit', untilMs: Date.now() + 12_000, detail: 'retry-after 12s' });
  emit('progress', snapshot({ now: T + 2000, paused: { reason: 'rate_limit', until: Date.now() + 12_000 } }));
  emit('resumed', { reason: 'rate_limit' });
  emit('job:failed', {
    key: 'k2'.padEnd(64, '0'),
    attempt: 3,
    status: 400,
    error: '400 context_length_exceeded: too long',
    item: 'notes/long report.md',
    moreItems: false,
  });
  emit('progress', snapshot({ now: T + 10_000 }));
  emit('progress', snapshot({ now: T + 10_500, done: 31_205 }));
  emit('run:end', summary);
}

function run(mode: ProgressMode, o: { tty?: boolean; color?: boolean } = {}) {
  const stream = sink(o.tty);
  const emitter = new EventEmitter();
  const progress = attachProgress(emitter, { mode, stream, color: o.color });
  feed((e, p) => emitter.emit(e, p));
  progress.stop();
  return stream.text();
}

describe('progress renderers', () => {
  it('the ETA keeps its seconds under ten minutes and rounds its minutes above, as status tells them', () => {
    const eta = (etaSeconds: number) => countsText(snapshot({ etaSeconds }), 40_000).match(/ETA (.*)$/)![1];
    expect([45, 94, 599, 600, 1790, 3569, 3599, 8040].map(eta)).toEqual([
      '45s',
      '1m 34s',
      '9m 59s',
      '10m',
      '30m',
      '59m',
      '59m 59s',
      '2h 14m',
    ]);
  });

  it("with other runs on the queue: the queue's count, the runs and their pace; this run's own share in the details", () => {
    const shared = { runs: 3, finished: 61_204, left: 18_796, jobsPerSecond: 13.8 };
    const p = snapshot({ shared, etaSeconds: 1362 });
    expect(countsText(p, 40_000)).toBe('61,204/80,000 77% · 3 runs · 13.8 jobs/s · ETA 23m');
    const state = new ProgressState(loadPriceTable({ catalog: false }));
    state.apply('progress', p);
    expect(detailText(state, NO_PAINT)).toBe(
      'this run 31,352 at 4.6 jobs/s · in flight 8 · waiting 3 · backoff 2 · rate-limited 12 · failed 148 · $0.00',
    );
    // alone: this run's own, as before
    state.apply('progress', snapshot());
    expect(detailText(state, NO_PAINT)).toBe('in flight 8 · waiting 3 · backoff 2 · rate-limited 12 · failed 148 · $0.00');
    // the 429s so far, once there are any
    state.apply('progress', snapshot({ rateLimited: 1_204 }));
    expect(detailText(state, NO_PAINT)).toBe('in flight 8 · waiting 3 · backoff 2 · rate-limited 1,204 · failed 148 · $0.00');
  });

  it('the summary says which 429s were stray (no rate-limit headers), so that they do not read as the pace tripping the limit', () => {
    const state = new ProgressState(loadPriceTable({ catalog: false }));
    const stray = (strayRateLimited: number, rateLimited = 12) =>
      summaryText({ ...summary, rateLimited, strayRateLimited }, state, NO_PAINT);
    expect(stray(5)).toContain(
      ' · 12 rate-limited\n  5 of the 12 429s were stray (no rate-limit headers): tried again, the pace kept; the other 7 paused or slowed the lane\n',
    );
    expect(stray(11)).toContain(
      '11 of the 12 429s were stray (no rate-limit headers): tried again, the pace kept; the other paused or slowed the lane\n',
    );
    expect(stray(12)).toContain('\n  the 12 429s were stray (no rate-limit headers): tried again, the pace kept\n');
    expect(stray(1, 1)).toContain('\n  the 429 was stray (no rate-limit headers): tried again, the pace kept\n');
    expect(stray(1, 3)).toContain('\n  1 of the 3 429s was stray (no rate-limit headers)');
    expect(stray(0)).not.toMatch(/stray/);
    // not stray: what they did, and that they were sent again (beside "0 retries" they read as lost)
    expect(stray(0)).toContain(' · 12 rate-limited\n  the 12 429s used no attempt: their jobs are tried again\n');
    expect(stray(0, 1)).toContain('\n  the 429 used no attempt: its job is tried again\n');
    expect(stray(0, 0)).not.toMatch(/429/);
  });

  it('the start line counts one job as a job', () => {
    const where = { db: 'q.db', provider: 'mock' };
    expect(startText({ runId: 'r1', total: 1, alreadyDone: 0 }, where)).toBe('run r1 on q.db via mock: 1 job to do');
    expect(startText({ runId: 'r1', total: 0, alreadyDone: 3 }, where)).toBe('run r1 on q.db via mock: nothing to do, 3 already done');
  });

  it('plain: lines without escape codes, a pause note, the failure, the summary and next commands', () => {
    const out = run('plain', { color: false });
    expect(out).not.toMatch(/\x1B/);
    const lines = out.trimEnd().split('\n');
    expect(lines[0]).toBe('run r1: 40,000 jobs to do');
    // progress lines: the first, then one per 5 s of run time, then the last before the summary
    const progress = lines.filter((l) => /^\[\d/.test(l));
    expect(progress).toEqual([
      '[1s] 0/40,000 0% · 4.6 jobs/s · 612 tok/s · ETA 31m · in flight 8 · waiting 3 · backoff 2 · rate-limited 12 · failed 0 · $0.00',
      '[10s] 31,352/40,000 78% · 4.6 jobs/s · 612 tok/s · ETA 31m · in flight 8 · waiting 3 · backoff 2 · rate-limited 12 · failed 148 · $0.75',
      '[11s] 31,353/40,000 78% · 4.6 jobs/s · 612 tok/s · ETA 31m · in flight 8 · waiting 3 · backoff 2 · rate-limited 12 · failed 148 · $0.75',
    ]);
    expect(out).toMatch(/^paused: rate limited, resuming in 1[12]s \(retry-after 12s\)$/m);
    expect(out).toMatch(/^resumed after the rate limit$/m);
    // named by its document (quoted: the id has a space), not by the job's hash
    expect(out).toMatch(/^failed "notes\/long report\.md" \(attempt 3\): 400 context_length_exceeded: too long$/m);
    expect(out).toContain('finished in 1h 53m: 31,204 done, 148 failed, 1,020 retries\n');
    expect(out).toContain('  tokens 14.2M in · 3.1M out · cost $0.75 · 4.6 jobs/s · 12 rate-limited\n');
    expect(out).toContain('  148 failed jobs in the queue. See why: llmq status\n  Try again: llmq retry-failed && llmq run\n');
  });

  it('names every model answered without a price, not only the first', () => {
    const state = new ProgressState(loadPriceTable({ catalog: false }));
    const usage = { promptTokens: 5, completionTokens: 5 };
    for (const [key, model] of [
      ['k1', 'm-a'],
      ['k2', 'm-b'],
      ['k3', 'm-a'],
    ] as const) {
      state.apply('job:start', { key, model } as SchedulerEventMap['job:start']);
      state.apply('job:done', { key, attempt: 1, latencyMs: 5, usage, output: '', costUsd: null } as SchedulerEventMap['job:done']);
    }
    expect(state.cost).toBeNull();
    expect(summaryText(summary, state, NO_PAINT)).toContain('  no price for m-a, m-b: set one with --price IN,OUT');
  });

  it('says the answers it paid for and did not store (another run answered their jobs meanwhile), and nothing when there are none', () => {
    const state = new ProgressState(loadPriceTable());
    expect(summaryText({ ...summary, answersNotStored: 3 }, state, NO_PAINT)).toContain(
      '  3 answers paid for and not stored: their jobs were answered by another run meanwhile (this run was stopped or frozen past its leases), or forgotten\n',
    );
    expect(summaryText({ ...summary, answersNotStored: 1 }, state, NO_PAINT)).toContain('  1 answer paid for and not stored: its job was');
    expect(summaryText(summary, state, NO_PAINT)).not.toContain('not stored');
  });

  it('a drained run that leaves jobs says they are held elsewhere, not that another run picks them up', () => {
    const state = new ProgressState(loadPriceTable());
    const held = summaryText({ ...summary, remaining: 5 }, state, NO_PAINT, { again: ' --db q.db' });
    expect(held).toContain('  5 jobs held by another run or a batch; see them: llmq status --db q.db\n');
    expect(held).not.toContain('picks them up');
    // after the budget, its own message says to go on with a larger one: a bare llmq run would spend without
    expect(summaryText({ ...summary, reason: 'budget', remaining: 5 }, state, NO_PAINT)).not.toContain('picks them up');
    // after a fatal error, its fix says to run again once it is fixed: not "this picks them up" before it
    expect(summaryText({ ...summary, reason: 'fatal', remaining: 5 }, state, NO_PAINT)).not.toContain('picks them up');
  });

  it('jobs in batches no run collects are named with the command that collects them, not counted as held or left to llmq run', () => {
    const state = new ProgressState(loadPriceTable());
    const uncollected = [{ baseUrl: 'https://api.openai.com/v1', jobs: 5 }];
    const drained = summaryText({ ...summary, remaining: 8, uncollected }, state, NO_PAINT, { again: ' --db q.db' });
    expect(drained).toContain('  5 jobs in batches no run collects: llmq run --via batch --db q.db\n');
    expect(drained).toContain('  3 jobs held by another run or a batch; see them: llmq status --db q.db\n');
    const stopped = summaryText({ ...summary, reason: 'signal', remaining: 5, uncollected }, state, NO_PAINT);
    expect(stopped).toContain('  5 jobs in batches no run collects: llmq run --via batch\n');
    expect(stopped).not.toContain('left pending');
    const elsewhere = [{ baseUrl: 'http://127.0.0.1:8000/v1', jobs: 1 }];
    expect(summaryText({ ...summary, remaining: 1, uncollected: elsewhere }, state, NO_PAINT)).toContain(
      '  1 job in batches no run collects:\n    llmq run --via batch --base-url http://127.0.0.1:8000/v1\n',
    );
  });

  it('the summary suggests commands that reach the queue given with --db, each whole on a line of its own when long', () => {
    const state = new ProgressState(loadPriceTable());
    const left = { ...summary, reason: 'signal' as const, remaining: 12 };
    expect(summaryText(left, state, NO_PAINT)).toContain(
      '  12 jobs left pending; llmq run picks them up\n  148 failed jobs in the queue. See why: llmq status\n  Try again: llmq retry-failed && llmq run\n',
    );
    expect(summaryText(left, state, NO_PAINT, { again: ' --db q.db' })).toContain(
      '  12 jobs left pending; llmq run --db q.db picks them up\n' +
        '  148 failed jobs in the queue. See why: llmq status --db q.db\n' +
        '  Try again: llmq retry-failed --db q.db && llmq run --db q.db\n',
    );
    expect(summaryText({ ...left, remaining: 1 }, state, NO_PAINT)).toContain('  1 job left pending; llmq run picks it up\n');
    const db = ' --db /srv/llmq/queues/customer-support-tickets-2026.db';
    const long = summaryText(left, state, NO_PAINT, { again: db });
    expect(long).toContain(
      `  12 jobs left pending; this picks them up:\n    llmq run${db}\n` +
        `  148 failed jobs in the queue. See why:\n    llmq status${db}\n` +
        `  Try again:\n    llmq retry-failed${db}\n    llmq run${db}\n`,
    );
    for (const line of long.split('\n')) expect(line.length).toBeLessThanOrEqual(80);
    // a suggested run sends where this one sent; too long for a line, it goes on at a flag after a backslash
    const mock = summaryText(left, state, NO_PAINT, { again: ' --db q.db', runAgain: () => ' --provider mock' });
    expect(mock).toContain('  Try again: llmq retry-failed --db q.db && llmq run --provider mock --db q.db\n');
    const endpoint = ' --base-url https://llm-gateway.internal.example.com/openai/v1';
    const both = summaryText(left, state, NO_PAINT, { again: db, runAgain: () => endpoint });
    expect(both).toContain(`  Try again:\n    llmq retry-failed${db}\n    llmq run${endpoint} \\\n      ${db.trim()}\n`);
    for (const line of both.split('\n')) expect(line.length).toBeLessThanOrEqual(80);
    const empty = { ...summary, done: 0, failed: 0, retried: 0, requests: 0, rateLimited: 0, promptTokens: 0, completionTokens: 0 };
    expect(summaryText(empty, state, NO_PAINT)).toBe(
      'nothing was pending: llmq status shows the queue. 148 failed jobs wait: llmq retry-failed && llmq run\n',
    );
    expect(summaryText(empty, state, NO_PAINT, { again: db })).toBe(
      `nothing was pending; this shows the queue:\n    llmq status${db}\n148 failed jobs wait:\n    llmq retry-failed${db}\n    llmq run${db}\n`,
    );
    // every failure refused as sent: a retry would pay for the same refusals, so none is proposed
    const refused = { failuresInStore: [{ error: "HTTP 400: Invalid value for 'temperature'.", count: 148 }] };
    expect(summaryText({ ...empty, ...refused }, state, NO_PAINT)).toBe(
      'nothing was pending: llmq status shows the queue. 148 failed jobs: the provider refused them as sent (HTTP 4xx): sent again, they fail the same way\n',
    );
    const ran = summaryText({ ...left, ...refused }, state, NO_PAINT);
    expect(ran).toContain('  148 failed jobs in the queue. See why: llmq status\n  the provider refused them as sent');
    expect(ran).not.toContain('retry-failed');
    // some refused, not all: retry-failed stays (status says which to retry)
    const mixed = [
      ...refused.failuresInStore.map((f) => ({ ...f, count: 100 })),
      { error: 'gave up after 5 attempts: HTTP 503', count: 48 },
    ];
    expect(summaryText({ ...left, failuresInStore: mixed }, state, NO_PAINT)).toContain('Try again: llmq retry-failed');
  });

  it("answers cut off at max_tokens: more room proposed, but not for the offline mock's stand-ins", () => {
    const state = new ProgressState(loadPriceTable());
    const cut = { ...summary, cutOff: 3, cutOffRoom: 4096 };
    const real = summaryText(cut, state, NO_PAINT, { again: ' --db q.db' });
    expect(real).toContain(
      '  to ask the cut-off ones again with more room:\n    llmq retry-failed --cut-off --max-tokens 4096 --db q.db\n',
    );
    expect(real).not.toContain('offline mock');
    const mock = summaryText(cut, state, NO_PAINT, { again: ' --db q.db', runAgain: () => ' --provider mock', offline: true });
    expect(mock).toContain("  the offline mock's stand-in answers are longer than a short max_tokens allows; a real model's may fit it\n");
    expect(mock).not.toContain('--cut-off');
  });

  it('the summary proposes room for answers cut off at max_tokens, not a retry that is cut off again', () => {
    const state = new ProgressState(loadPriceTable());
    const cut = (limit: number, count: number) => ({
      error: `the answer was cut off at max_tokens before its JSON was whole: llmq retry-failed --error "cut off" --max-tokens ${limit} sends it again with more room (the answer is not JSON)`,
      count,
    });
    const left = { ...summary, reason: 'signal' as const, remaining: 0, failedInStore: 148 };
    // all cut off: the highest limit their errors propose, the queue's --db carried
    const all = summaryText({ ...left, failuresInStore: [cut(2048, 100), cut(4096, 48)] }, state, NO_PAINT, { again: ' --db q.db' });
    expect(all).toContain(
      '  Send them again with more room:\n    llmq retry-failed --error "cut off" --max-tokens 4096 --db q.db\n    llmq run --db q.db\n',
    );
    expect(all).not.toContain('Try again');
    // some cut off: room for those first, then the others (a plain retry-failed leaves the cut-off ones), as status says
    const some = summaryText(
      { ...left, failuresInStore: [cut(2048, 100), { error: 'gave up after 5 attempts: HTTP 503', count: 48 }] },
      state,
      NO_PAINT,
    );
    expect(some).toContain(
      '  The 100 cut off, with more room:\n    llmq retry-failed --error "cut off" --max-tokens 2048\n' +
        '  Then the others: llmq retry-failed && llmq run\n',
    );
    // nothing pending, every failure cut off
    const empty = {
      ...left,
      reason: 'drained' as const,
      done: 0,
      failed: 0,
      retried: 0,
      requests: 0,
      rateLimited: 0,
      promptTokens: 0,
      completionTokens: 0,
    };
    expect(summaryText({ ...empty, failuresInStore: [cut(2048, 148)] }, state, NO_PAINT)).toBe(
      'nothing was pending: llmq status shows the queue.\n148 failed jobs wait:\n    llmq retry-failed --error "cut off" --max-tokens 2048\n    llmq run\n',
    );
  });

  it('plain with color allowed colors, and NO_COLOR (color: false) never does', () => {
    expect(run('plain', { color: true })).toMatch(/\x1B\[3\dm/);
    expect(run('plain', { color: false })).not.toMatch(/\x1B/);
  });

  it('tty: bars drawn with cli-progress, fitting 80 columns, and the summary', () => {
    const out = run('tty', { tty: true, color: false });
    expect(out).toMatch(/\x1B\[/); // cursor movement: drawn in place
    const plain = stripAnsi(out);
    expect(plain).toMatch(/█{5,}░+ 31,353\/40,000 78% · 4\.6 jobs\/s · 612 tok\/s · ETA 31m$/m);
    expect(plain).toContain('in flight 8 · waiting 3 · backoff 2 · rate-limited 12 · failed 148 · $0.75');
    expect(plain).toMatch(/failed "notes\/long report\.md" \(attempt 3\): 400 context_length_exceeded/);
    expect(plain).toContain('finished in 1h 53m: 31,204 done, 148 failed, 1,020 retries');
    for (const line of plain.split('\n')) expect(line.length, line).toBeLessThanOrEqual(80);
    // no color codes (SGR) when color is off, only cursor control
    expect(out).not.toMatch(/\x1B\[\d+(;\d+)*m/);
  });

  it('tty with color: the color codes do not push the ETA off an 80-column line', () => {
    const plain = stripAnsi(run('tty', { tty: true, color: true }));
    expect(plain).toMatch(/█{5,}░+ 31,353\/40,000 78% · 4\.6 jobs\/s · 612 tok\/s · ETA 31m$/m);
  });

  it('tty: a warning longer than the screen is wrapped, not cut: its end says what to do', () => {
    const stream = Object.assign(sink(true), { columns: 60 });
    const p = attachProgress(null, { mode: 'tty', stream, color: false });
    const message =
      'the provider sent no rate-limit headers and answered 429: llmq paces at what it learns from them; give --rpm to pace from the start';
    p.listener('run:start', { runId: 'r1', total: 10, alreadyDone: 0, options: {} });
    p.listener('warning', { message });
    p.stop();
    const text = stripAnsi(stream.text());
    expect(text.replace(/\s+/g, ' ')).toContain(`warning: ${message}`);
    expect(text).not.toContain('…');
  });

  it('tty: a visible note while paused', () => {
    const stream = sink(true);
    const p = attachProgress(null, { mode: 'tty', stream, color: false });
    p.listener('run:start', { runId: 'r1', total: 10, alreadyDone: 0, options: {} });
    p.listener('paused', { reason: 'outage', untilMs: Date.now() + 30_000, detail: '5 connection errors in a row' });
    p.listener('progress', snapshot({ total: 10, done: 2, failed: 0, paused: { reason: 'outage', until: Date.now() + 30_000 } }));
    p.stop();
    expect(stripAnsi(stream.text())).toMatch(/paused: provider failing, next try in (29|30)s \(5 connection errors in…$/m);
  });

  it('a long outage says how long the provider has been down, and how long the run waits for it, before its detail', () => {
    const now = Date.now();
    const paused = { reason: 'outage' as const, untilMs: now + 10_000, detail: 'HTTP 500: Internal Server Error' };
    const state = new ProgressState(loadPriceTable({ catalog: false }));
    state.apply('paused', { ...paused, downSinceMs: now - 432_000, givesUpAtMs: now - 432_000 + 900_000 });
    expect(pauseText(state, now, 300)).toBe(
      'paused: provider down 7m 12s (--max-outage 15m), next try in 10s (HTTP 500: Internal Server Error)',
    );
    // on a terminal the detail goes first
    expect(pauseText(state, now)).toBe('paused: provider down 7m 12s (--max-outage 15m), next try in 10s…');
    // --max-outage ends the run before the next try would go: that is what is said
    state.apply('paused', { ...paused, downSinceMs: now - 4_000, givesUpAtMs: now + 2_000 });
    expect(pauseText(state, now, 300)).toBe('paused: provider down 4s (--max-outage 6s), gives up in 2s (HTTP 500: Internal Server Error)');
  });

  it('json: every line parses, events in order, progress thinned, cost attached', () => {
    const out = run('json');
    const events = out
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(events.map((e) => e.event)).toEqual([
      'run:start',
      'job:start',
      'progress',
      'job:done',
      'job:start',
      'job:retry',
      'paused',
      'progress',
      'resumed',
      'job:failed',
      'progress',
      'progress',
      'run:end',
    ]);
    for (const e of events) expect(typeof e.time).toBe('number');
    expect(events[2]).toMatchObject({ event: 'progress', done: 0, total: 40_000, costUsd: 0 });
    // T+10.5 s came only 0.5 s after the one before: held back, then written before run:end
    expect(events[11]).toMatchObject({ event: 'progress', done: 31_205, costUsd: 0.75 });
    expect(events[12]).toMatchObject({ event: 'run:end', runId: 'r1', reason: 'drained', done: 31_204 });
    // one cost, under one name: the summary's
    expect(events[12]).not.toHaveProperty('cost_usd');
    expect(events[9]).toMatchObject({ event: 'job:failed', status: 400 });
  });

  /**
   * A run of one answer of a model without a price, through a subscribe function as the source: what
   * `mode` wrote, and whether stopping the display unsubscribed it.
   */
  const unpricedRun = (mode: 'plain' | 'json'): { text: string; detached: boolean } => {
    const stream = sink();
    let listener: ((e: SchedulerEventName, p: never) => void) | null = null;
    const p = attachProgress(
      (l) => {
        listener = l as never;
        return () => {
          listener = null;
        };
      },
      { mode, stream, color: false },
    );
    listener!('job:start', { key: 'a', attempt: 1, model: 'llama3.1:8b' } as never);
    listener!('job:done', { key: 'a', attempt: 1, latencyMs: 5, usage: { promptTokens: 10, completionTokens: 5 } } as never);
    listener!('progress', snapshot({ total: 1, done: 1, failed: 0 }) as never);
    // as the scheduler ends such a run (RunSummary.costUsd: unknown, never the sum of the priced answers)
    listener!('run:end', {
      ...summary,
      done: 1,
      failed: 0,
      failedInStore: 0,
      promptTokens: 10,
      completionTokens: 5,
      costUsd: null,
    } as never);
    p.stop();
    return { text: stream.text(), detached: listener === null };
  };

  it('cost is unknown (not 0) for a model without a price; a subscribe function works as a source', () => {
    const run = unpricedRun('plain');
    expect(run.detached).toBe(true);
    expect(run.text).toMatch(/failed 0 · cost unknown$/m);
  });

  it('the run summary says "cost unknown" once for a model without a price', () => {
    const { text } = unpricedRun('plain');
    expect(text).toMatch(/^ {2}tokens 10 in · 5 out · cost unknown · /m);
    expect(text).not.toMatch(/cost cost/);
  });

  it('--json: run:end says the cost is unknown (null), never $0, when an answer of a model without a price came', () => {
    const end = unpricedRun('json')
      .text.trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .find((e) => e.event === 'run:end');
    expect(end.costUsd).toBeNull();
  });

  it("--json: a progress event's cost is its sum without float noise (0.0028, not 0.0028000000000000004)", () => {
    const stream = sink();
    const p = attachProgress(null, { mode: 'json', stream, intervalMs: 0 });
    p.listener('run:start', { runId: 'r1', total: 7, alreadyDone: 0, options: {} });
    for (let i = 0; i < 7; i++) {
      p.listener('job:start', { key: `k${i}`, attempt: 1, model: 'gpt-4o-mini' });
      p.listener('job:done', {
        key: `k${i}`,
        attempt: 1,
        latencyMs: 1,
        usage: { promptTokens: 1, completionTokens: 1 },
        output: '',
        costUsd: 0.0004,
      } as never);
    }
    p.listener('progress', { now: Date.now(), done: 7, failed: 0, total: 7 } as never);
    p.stop();
    const progress = stream
      .text()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l))
      .filter((e) => e.event === 'progress');
    expect(progress.at(-1).costUsd).toBe(0.0028);
  });

  it('takes a typed EventEmitter and detaches from it on stop', () => {
    const typed = new EventEmitter<{ [K in SchedulerEventName]: [SchedulerEventMap[K]] }>();
    const p = attachProgress(typed, { mode: 'json', stream: sink() });
    expect(typed.listenerCount('progress')).toBe(1);
    p.stop();
    expect(typed.listenerCount('progress')).toBe(0);
  });

  it.each([
    ['plain', false],
    ['tty', true],
  ] as const)('%s: lists the first 20 failures, and says the rest go unlisted only when there is a 21st', (mode, tty) => {
    const failures = (n: number) => {
      const stream = sink(tty);
      const p = attachProgress(null, { mode, stream, color: false, again: ' --db q.db' });
      p.listener('run:start', { runId: 'r1', total: n, alreadyDone: 0, options: {} });
      for (let i = 1; i <= n; i++) {
        const item = i <= 20 ? `doc${i}.txt` : null;
        p.listener('job:failed', { key: `key${i}`.padEnd(16, '0'), attempt: 1, error: 'HTTP 400', item, moreItems: false } as never);
      }
      p.stop();
      const text = stripAnsi(stream.text());
      return {
        listed: text.match(/^failed doc\d+\.txt \(attempt 1\)/gm)?.length ?? 0,
        notes: text.match(/further failures are not listed here; llmq status --db q.db/g)?.length ?? 0,
      };
    };
    expect(failures(20)).toEqual({ listed: 20, notes: 0 });
    expect(failures(21)).toEqual({ listed: 20, notes: 1 });
    expect(failures(45)).toEqual({ listed: 20, notes: 1 });
  });

  it('names a failed job by its first item, says when others share it, and by its key when no item points at it', () => {
    const line = (item: string | null, moreItems: boolean) =>
      failureText(1, { key: 'abcdef0123456789', attempt: 2, status: 400, error: 'HTTP 400', item, moreItems }, NO_PAINT, 200, {
        db: 'q.db',
        provider: 'mock',
      });
    expect(line('notes/a.md', false)).toBe('failed notes/a.md (attempt 2): HTTP 400');
    expect(line('notes/a.md', true)).toBe('failed notes/a.md (attempt 2, shared with other items): HTTP 400');
    expect(line(null, false)).toBe('failed job abcdef012345 (attempt 2): HTTP 400');
  });

  it('--progress none: no start line, progress or failure lines, but the warnings and the summary with its next steps', () => {
    const stream = sink();
    const p = attachProgress(null, { mode: 'none', stream, color: false, again: ' --db q.db' });
    p.listener('run:start', { runId: 'r1', total: 3, alreadyDone: 0, options: {} });
    p.listener('job:failed', { key: 'abcdef0123456789', attempt: 1, error: 'HTTP 400: bad request' } as never);
    p.listener('progress', snapshot({ total: 3, done: 2, failed: 1 }) as never);
    p.listener('warning', { message: 'the provider sent no rate-limit headers' } as never);
    p.listener('run:end', { ...summary, done: 2, failed: 1, failedInStore: 1 } as never);
    p.stop();
    const text = stream.text();
    expect(text).not.toMatch(/jobs to do|abcdef012345|\[\d+s\]/);
    expect(text).toMatch(/^warning: the provider sent no rate-limit headers\nfinished in .*: 2 done, 1 failed/);
    expect(text).toContain('See why: llmq status --db q.db');
  });

  it('picks the mode from the stream', () => {
    expect(progressMode(sink(true), false)).toBe('tty');
    expect(progressMode(sink(false), false)).toBe('plain');
    expect(progressMode(sink(true), true)).toBe('json');
  });
});
