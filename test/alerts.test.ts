import type { FailureReason } from '../src/provider/types.js';
import { appendFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parseDuration, parseRate } from '../src/alerts/thresholds.js';
import { AlertWatcher, oldestCheckEveryMs, type AlertHookBody } from '../src/alerts/watcher.js';
import type { SchedulerEventMap } from '../src/scheduler/events.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { collect, runCli, spawnCli } from './helpers/cli.js';
import { reply } from './helpers/fake-openai.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';
import { waitFor } from './helpers/wait.js';

const cleanup: Array<() => Promise<unknown>> = [];
afterEach(async () => {
  await Promise.all(cleanup.splice(0).map((c) => c()));
});

function watcher(
  thresholds: ConstructorParameters<typeof AlertWatcher>[0]['thresholds'],
  extra: Partial<ConstructorParameters<typeof AlertWatcher>[0]> = {},
) {
  let clock = 1_000_000;
  const fired: AlertHookBody[] = [];
  const w = new AlertWatcher({ thresholds, fire: (a) => fired.push(a), now: () => clock, ...extra });
  const send = w.listener as (e: keyof SchedulerEventMap, p: unknown) => void;
  send('run:start', { runId: 'run-1', total: 0, alreadyDone: 0, options: {} });
  return {
    w,
    fired,
    advance: (ms: number) => {
      clock += ms;
    },
    done: () => send('job:done', { key: 'k', attempt: 1, latencyMs: 1, usage: { promptTokens: 1, completionTokens: 1 }, output: '' }),
    failed: () => send('job:failed', { key: 'k', attempt: 1, status: 400, error: 'HTTP 400' }),
    retry: (counted: boolean, reason: FailureReason = 'server') =>
      send('job:retry', { key: 'k', attempt: 1, status: reason === 'rate_limit' ? 429 : 500, reason, error: 'HTTP', delayMs: 1, counted }),
  };
}

describe('alerts', () => {
  it('--alert-failed fires once when the count is reached, not again for later failures', () => {
    const t = watcher({ failed: 2 });
    t.failed();
    expect(t.fired).toEqual([]);
    t.failed();
    t.failed();
    t.failed();
    expect(t.fired).toEqual([expect.objectContaining({ event: 'alert', runId: 'run-1', kind: 'failed', value: 2, threshold: 2 })]);
    expect(t.w.active()).toEqual([expect.objectContaining({ kind: 'failed', value: 4, message: '4 jobs failed (alert at 2)' })]);
    const one = watcher({ failed: 1 });
    one.failed();
    expect(one.w.active()).toEqual([expect.objectContaining({ message: '1 job failed (alert at 1)' })]);
  });

  it('--alert-error-rate fires per crossing over the window, ignores rate-limit retries and small samples', () => {
    const t = watcher({ errorRate: 0.25, windowMs: 60_000 });
    for (let i = 0; i < 10; i++) t.retry(true);
    expect(t.fired).toHaveLength(0); // 10 tries: too few to mean anything
    for (let i = 0; i < 30; i++) t.retry(false, 'rate_limit'); // given back (429): not tries
    for (let i = 0; i < 10; i++) t.done();
    expect(t.fired).toHaveLength(1); // 10 errors in 20 tries = 50%
    for (let i = 0; i < 40; i++) t.done();
    expect(t.w.active()).toEqual([]); // 10 in 60 = 17%: cleared, re-armed
    t.advance(61_000); // the window moves past all of them
    for (let i = 0; i < 20; i++) t.retry(true);
    expect(t.fired.map((a) => a.kind)).toEqual(['error-rate', 'error-rate']);
    expect(t.fired[1]!.message).toBe('100% of tries failed in the last 1 min (alert at 25%)');
  });

  it("--alert-error-rate counts an outage's failures, which use no attempt: the run paused on them is what it should tell", () => {
    const t = watcher({ errorRate: 0.5, windowMs: 60_000 });
    for (let i = 0; i < 10; i++) t.done();
    for (let i = 0; i < 6; i++) t.retry(false, 'server'); // the failures in a row that opened it
    for (let i = 0; i < 4; i++) t.retry(false, 'network'); // probes: refused, reset
    expect(t.fired.map((a) => a.kind)).toEqual(['error-rate']);
    expect(t.fired[0]!.message).toBe('50% of tries failed in the last 1 min (alert at 50%)');
    // a local limit (EMFILE) says nothing of the provider, a 429 wait is no try
    const u = watcher({ errorRate: 0.5, windowMs: 60_000 });
    for (let i = 0; i < 10; i++) u.done();
    for (let i = 0; i < 10; i++) u.retry(false, 'local');
    for (let i = 0; i < 10; i++) u.retry(false, 'rate_limit');
    expect(u.fired).toEqual([]);
  });

  it('--alert-oldest reads the real queue and fires when its oldest pending job is old enough', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    cleanup.push(() => store.close());
    await seedJobs(store, 3);
    const enqueuedAt = (await store.status()).oldestPendingAt!;
    let looks = 0;
    const t = watcher(
      { oldestMs: 60_000 },
      {
        oldestPendingAt: async () => {
          looks++;
          return (await store.status()).oldestPendingAt;
        },
        oldestEveryMs: 20,
      },
    );
    // A second look means the first one's answer was judged.
    await waitFor(() => looks >= 2, { what: 'the watcher to look at the queue twice' });
    // The watcher's clock (1_000_000) is long before the enqueue: nothing has waited.
    expect(t.fired).toEqual([]);
    t.advance(enqueuedAt - 1_000_000 + 61_000);
    await waitFor(() => t.fired.length > 0, { what: 'the oldest-pending alert to fire' });
    t.w.stop();
    expect(t.fired).toEqual([expect.objectContaining({ kind: 'oldest', threshold: 60_000 })]);
  });

  it('--alert-oldest never fires on a queue with nothing pending, even at 0s; the error-rate window reads as set', async () => {
    let looks = 0;
    const t = watcher(
      { oldestMs: 0 },
      {
        oldestPendingAt: async () => {
          looks++;
          return null;
        },
        oldestEveryMs: 20,
      },
    );
    await waitFor(() => looks >= 2, { what: 'the watcher to look at the queue twice' });
    t.w.stop();
    expect(t.fired).toEqual([]);
    const rate = watcher({ errorRate: 0.25, windowMs: 20_000 });
    for (let i = 0; i < 20; i++) rate.retry(true);
    expect(rate.fired[0]!.message).toBe('100% of tries failed in the last 20s (alert at 25%)');
  });

  it('--alert-oldest looks at the queue a quarter of its threshold apart, between 1 and 15 s', async () => {
    expect([1_000, 4_000, 20_000, 60_000, 3_600_000].map(oldestCheckEveryMs)).toEqual([1_000, 1_000, 5_000, 15_000, 15_000]);
    // A queue enqueued just now, a 1 s threshold: the first look finds nothing old, the next one (1 s later, not 15) fires.
    const enqueuedAt = Date.now();
    const fired: AlertHookBody[] = [];
    let looks = 0;
    const oldestPendingAt = async () => {
      looks++;
      return enqueuedAt;
    };
    const w = new AlertWatcher({ thresholds: { oldestMs: 1_000 }, fire: (a) => fired.push(a), oldestPendingAt });
    const send = w.listener as (e: keyof SchedulerEventMap, p: unknown) => void;
    send('run:start', { runId: 'run-1', total: 0, alreadyDone: 0, options: {} });
    try {
      await waitFor(() => looks >= 1, { what: 'the first look at the queue' });
      await new Promise((r) => setImmediate(r)); // its answer judged
      expect(fired).toEqual([]);
      // The interval is the wall clock under test: the next look comes 1 s later; 15 s would time out here.
      await waitFor(() => fired.length > 0, { what: 'the oldest-pending alert, at the next look 1 s later', timeoutMs: 5_000 });
      expect(fired).toEqual([expect.objectContaining({ kind: 'oldest', threshold: 1_000 })]);
    } finally {
      w.stop();
    }
  });

  it('parses durations and shares, and says what it expected', () => {
    expect(parseDuration('1h30m', '--alert-oldest')).toBe(5_400_000);
    expect(parseDuration('90', '--alert-oldest')).toBe(90_000);
    expect(() => parseDuration('soon', '--alert-oldest')).toThrow(/expected a duration such as 90s/);
    expect(parseRate('5%', '--alert-error-rate')).toBeCloseTo(0.05);
    expect(() => parseRate('150%', '--alert-error-rate')).toThrow(/at most 100%/);
  });

  it('llmq run refuses --on-alert without a threshold and --alert-window without --alert-error-rate, before anything is sent', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 2);
    await store.close();
    const fake = await startFake({ record: false });
    const run = (...args: string[]) =>
      runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none', ...args], {
        env: { LLMQ_API_KEY: 'sk-test-0123456789abcdef' },
      });
    const cases: Array<[string[], string]> = [
      [['--on-alert', 'true'], '--on-alert has nothing to send: no --alert-* threshold is set'],
      [['--alert-window', '10m'], '--alert-window is the window --alert-error-rate looks at, and no --alert-error-rate is set'],
      [['--alert-failed', '3', '--alert-window', '10m'], '--alert-window is the window --alert-error-rate looks at'],
    ];
    for (const [args, said] of cases) {
      const r = await run(...args);
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(said);
    }
    expect(fake.received).toBe(0);
    // with its threshold, each is taken
    const ok = await run('--alert-error-rate', '50%', '--alert-window', '10m', '--on-alert', 'true');
    expect(ok.code, ok.stderr).toBe(0);
    expect(fake.received).toBe(2);
  });

  it('llmq run --alert-failed: said on the progress display, sent once to --on-alert, shown by status while the run is live', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const store = new SqliteStore(db);
    // 80 jobs at 150 ms, two at a time: the run stays live for ~4 s after the heartbeat (every 2 s) that
    // stores the alert; with 40, that window was ~1 s, which two status commands on a loaded machine missed
    const keys = await seedJobs(store, 80, { priority: (n) => (n < 3 ? -1 : 0) });
    await store.close();
    const fake = await startFake({ latencyMs: 150, record: false });
    const failing = new Set(keys.slice(0, 3));
    fake.respond((r) => (failing.has(r.key) ? reply.badRequest() : undefined));
    const alertsFile = join(dir, 'alerts.ndjson');
    appendFileSync(alertsFile, '');

    const child = spawnCli(
      [
        'run',
        '--db',
        db,
        '--base-url',
        fake.url,
        '--concurrency',
        '2',
        '--progress',
        'plain',
        '--alert-failed',
        '2',
        '--on-alert',
        `cat >> '${alertsFile}'; echo >> '${alertsFile}'`,
      ],
      { env: { LLMQ_API_KEY: 'sk-test-0123456789abcdef' } },
    );
    cleanup.push(async () => child.kill('SIGKILL'));
    const run = collect(child);
    // Both views read together while the run is live (read one after the other, the run could end in between).
    const [seen, text] = await waitFor(
      async () => {
        const [json, text] = await Promise.all([runCli(['status', '--db', db, '--json']), runCli(['status', '--db', db])]);
        const s: { alerts: Array<{ kind: string; message: string }> } = JSON.parse(json.stdout);
        return s.alerts.length > 0 && /^ {2}alerts /m.test(text.stdout) && ([s, text.stdout] as const);
      },
      { what: "llmq status (JSON and text) to show the live run's alert", timeoutMs: 30_000, intervalMs: 100 },
    );
    expect(seen.alerts).toEqual([
      expect.objectContaining({ kind: 'failed', message: expect.stringMatching(/^[23] jobs failed \(alert at 2\)$/) }),
    ]);
    expect(text).toMatch(/alerts\s+[23] jobs failed \(alert at 2\)/);

    const r = await run;
    expect(r.code).toBe(2);
    expect(r.stderr.match(/warning: alert: 2 jobs failed \(alert at 2\)/g)).toHaveLength(1);
    const sent = readFileSync(alertsFile, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(sent).toEqual([expect.objectContaining({ event: 'alert', kind: 'failed', value: 2, threshold: 2 })]);
    expect(r.stderr).toContain('hooks: alerts 1 sent.');
  });
});
