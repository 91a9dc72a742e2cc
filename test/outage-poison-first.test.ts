import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OutageBreaker } from '../src/scheduler/outage.js';
import { runCli } from './helpers/cli.js';
import { reply } from './helpers/fake-openai.js';
import { startFake } from './helpers/start-fake.js';
import { tempDir } from './helpers/tmp.js';

// Documents that always get a 500, first in the queue: their failures in a row open the outage
// breaker, and a failed job's retry comes due with the next probe. Were each probe one of them,
// the healthy jobs behind them would wait until --max-outage ended the run, every run.
describe('documents that always get a 5xx ahead of healthy ones', () => {
  it('are not the only probes: a healthy job probes, the provider is found up, and they fail on their own attempts', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const lines = (n: number, tag: string) =>
      Array.from({ length: n }, (_, i) => JSON.stringify({ id: `${tag}-${i}`, text: `${tag} document ${i}` })).join('\n');
    writeFileSync(join(dir, 'poison.jsonl'), lines(20, 'POISON'));
    writeFileSync(join(dir, 'fine.jsonl'), lines(100, 'fine'));
    expect((await runCli(['enqueue', join(dir, 'poison.jsonl'), '--db', db])).code).toBe(0);
    // lower runs first: the poisoned documents are claimed and sent before these
    expect((await runCli(['enqueue', join(dir, 'fine.jsonl'), '--db', db, '--priority', '5'])).code).toBe(0);
    const fake = await startFake({ latencyMs: 20 });
    fake.respond((r) => (r.body.includes('POISON') ? reply.serverError(500, 'poisoned') : undefined));
    const run = () =>
      runCli(
        ['run', '--db', db, '--base-url', fake.url, '-c', '16', '--max-outage', '30s', '--retry-delay', '50ms', '--progress', 'none'],
        {
          timeoutMs: 60_000,
        },
      );
    const r = await run();
    // it ran out its 30 s of --max-outage with 120 pending and none failed
    expect(r.stderr).toMatch(/finished in \d+s: 100 done, 20 failed/);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).not.toContain('has been failing for');

    // Put back (as status proposes), they are all the next run has: with nothing answered, their
    // failures in a row looked like a provider down, and the run probed with them until
    // --max-outage ended it (exit 1, all 20 pending), every run. Their earlier tries say the 500s are theirs.
    expect((await runCli(['retry-failed', '--db', db])).code).toBe(0);
    const again = await run();
    expect(again.stderr).toMatch(/finished in \d+s: 0 done, 20 failed/);
    expect(again.code, again.stderr).toBe(2);
    expect(again.stderr).not.toContain('paused');
  }, 90_000);
});

describe('the outage probe', () => {
  it('goes to a request whose job has not failed in the outage before one whose job has', async () => {
    const breaker = new OutageBreaker({ consecutive: 1, probeDelayMs: 20 });
    breaker.failure('HTTP 500', { sentAt: Date.now(), unreachable: false });
    const signal = new AbortController().signal;
    const order: string[] = [];
    // a job not failed yet is on its way (its lane's pace holds it); the failed job comes to the gate
    // first, as its retry is due with the probe
    breaker.admitting(1);
    const failed = breaker.gate(signal, null).then((probe) => order.push(`failed:${probe}`));
    await new Promise((r) => setTimeout(r, 60));
    expect(order).toEqual([]);
    const fresh = breaker.gate(signal, 1).then((probe) => order.push(`fresh:${probe}`));
    await new Promise((r) => setTimeout(r, 10));
    breaker.admitted(1);
    expect(order).toEqual(['fresh:true']);
    // the fresh one's probe answered: the provider is up, everyone goes
    breaker.success({ probe: true });
    await Promise.all([failed, fresh]);
    expect(order).toEqual(['fresh:true', 'failed:false']);
    breaker.dispose();
  });

  it('goes to a job that failed when no other is on its way: a real outage is probed all the same', async () => {
    const breaker = new OutageBreaker({ consecutive: 1, probeDelayMs: 20 });
    breaker.failure('HTTP 500', { sentAt: Date.now(), unreachable: false });
    expect(await breaker.gate(new AbortController().signal, null)).toBe(true);
    breaker.dispose();
  });

  it('goes to a job that failed once the probe is late by UNTRIED_FIRST_MS, when the other never comes (its lane paused)', async () => {
    const breaker = new OutageBreaker({ consecutive: 1, probeDelayMs: 20 });
    breaker.failure('HTTP 500', { sentAt: Date.now(), unreachable: false });
    breaker.admitting(1);
    const started = Date.now();
    expect(await breaker.gate(new AbortController().signal, null)).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(OutageBreaker.UNTRIED_FIRST_MS);
    breaker.admitted(1);
    breaker.dispose();
  });
});
