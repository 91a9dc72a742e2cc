import { describe, expect, it } from 'vitest';
import { OutageBreaker } from '../src/scheduler/outage.js';

/**
 * The breaker wakes its gate waiters from one setTimeout(delay) and they re-check `now() >=
 * nextProbeAt`. Node's timers can fire up to ~1 ms before Date.now() reaches the deadline (about 3%
 * of 20 ms timers on Node 20 in a quick check), and a wall clock may step back: when that happens
 * no waiter may probe, nothing re-arms a timer, and every job of the run waits at the gate forever.
 */
/** What the gate does within `ms`: lets the caller probe, lets it pass, or holds it ('stuck'). */
async function gateWithin(breaker: OutageBreaker, ms: number): Promise<string> {
  const controller = new AbortController();
  const gate = breaker.gate(controller.signal);
  const outcome = await Promise.race([
    gate.then((probe) => (probe ? 'probe' : 'passed')),
    new Promise<string>((resolve) => setTimeout(() => resolve('stuck'), ms)),
  ]);
  controller.abort();
  gate.catch(() => {});
  return outcome;
}

describe('the outage gate lets a probe through after an early wake-up', () => {
  it('still lets a probe through when the wake-up timer fires before now() reaches nextProbeAt', async () => {
    let skew = 0;
    const breaker = new OutageBreaker({ consecutive: 1, probeDelayMs: 30, now: () => Date.now() - skew });
    breaker.failure('connect ECONNREFUSED', { sentAt: Date.now(), unreachable: true }); // opens; nextProbeAt = now + 30, timer in 30 ms
    skew = 5; // the timer will fire "5 ms early" as the breaker's clock sees it
    const outcome = await gateWithin(breaker, 1000);
    breaker.dispose();
    expect(outcome).toBe('probe');
  });
});

describe('a wall clock set back while the breaker is open', () => {
  it('lets the probe go when it was due, not an hour later, and keeps the outage as long as it was', async () => {
    let skew = 0;
    const breaker = new OutageBreaker({ consecutive: 1, probeDelayMs: 50, now: () => Date.now() - skew });
    breaker.failure('connect ECONNREFUSED', { sentAt: Date.now(), unreachable: true });
    const opened = breaker.openSince!;
    skew = 3_600_000; // NTP (or a user) sets the clock an hour back
    const outcome = await gateWithin(breaker, 1000);
    // open for about as long as it really was, on the clock as it reads now
    const openFor = Date.now() - skew - breaker.openSince!;
    breaker.dispose();
    expect(outcome).toBe('probe');
    expect(openFor).toBeGreaterThanOrEqual(0);
    expect(openFor).toBeLessThan(2000);
    expect(opened).toBeGreaterThan(0);
  });
});

describe('how long the provider has been down', () => {
  it('counts from when the first request of the failures in a row left, not from when the breaker opened', () => {
    let now = 1_000_000;
    const breaker = new OutageBreaker({ now: () => now });
    breaker.success();
    // three requests sent at once hang until a 10-minute timeout cuts them
    const sentAt = now + 1;
    now += 600_000;
    for (let i = 0; i < 3; i++) breaker.failure('Timed out after 600 s', { sentAt, unreachable: false });
    expect(breaker.isOpen).toBe(true);
    // --max-outage counts from here: the provider has not answered since
    expect(breaker.openSince).toBe(sentAt);
    breaker.dispose();
  });

  it('an answer to a request sent before the failures in a row began ends neither the row nor the outage', () => {
    let now = 1_000_000;
    const breaker = new OutageBreaker({ now: () => now });
    const slowOne = now; // sent first, answered last
    now += 10;
    breaker.failure('HTTP 503', { sentAt: now, unreachable: false });
    breaker.failure('HTTP 503', { sentAt: now + 1, unreachable: false });
    now += 300;
    breaker.success({ sentAt: slowOne });
    breaker.failure('HTTP 503', { sentAt: now, unreachable: false });
    // still three in a row: the slow answer was the provider before it began failing
    expect(breaker.isOpen).toBe(true);
    breaker.success({ sentAt: slowOne });
    expect(breaker.isOpen).toBe(true);
    expect(breaker.lastSuccessAt).toBe(-Infinity);
    // a 429 or a 4xx ends the row of failures, not the outage: an old answer after it still does not close it
    breaker.neutral();
    breaker.success({ sentAt: slowOne });
    expect(breaker.isOpen).toBe(true);
    // a request sent since is the provider answering now
    breaker.success({ sentAt: now - 5 });
    expect(breaker.isOpen).toBe(false);
    breaker.dispose();
  });

  it("the probe's answer closes the outage, whenever its failures began (a clock set back, a 4xx in between)", async () => {
    let skew = 0;
    const breaker = new OutageBreaker({ consecutive: 3, probeDelayMs: 30, now: () => Date.now() - skew });
    for (let i = 0; i < 3; i++) breaker.failure('HTTP 503', { sentAt: Date.now(), unreachable: false });
    expect(breaker.isOpen).toBe(true);
    skew = 3_600_000; // the wall clock set back an hour
    expect(await gateWithin(breaker, 1000)).toBe('probe');
    // sent an hour "before" the outage by the clock as it reads now: still the probe, the provider answering now
    breaker.success({ sentAt: Date.now() - skew, probe: true });
    expect(breaker.isOpen).toBe(false);
    breaker.dispose();
  });

  it('a 429 or a 4xx is the provider answering: requests that hung while it answered those date no outage', () => {
    let now = 1_000_000;
    const breaker = new OutageBreaker({ now: () => now });
    const hungSince = now;
    now += 300_000;
    breaker.neutral(); // a 429, five minutes in
    now += 300_000;
    // the hung request times out; two sent after the 429 fail too
    breaker.failure('Timed out after 600 s', { sentAt: hungSince, unreachable: false });
    breaker.failure('HTTP 503', { sentAt: now - 10, unreachable: false });
    breaker.failure('HTTP 503', { sentAt: now - 5, unreachable: false });
    expect(breaker.isOpen).toBe(false);
    breaker.failure('HTTP 503', { sentAt: now - 1, unreachable: false });
    expect(breaker.isOpen).toBe(true);
    // not since the hung request left, ten minutes ago: --max-outage would end the run 10 minutes early
    expect(breaker.openSince).toBe(now - 10);
    breaker.dispose();
  });

  it('counts from the opening when the failures that opened it came between answers', () => {
    let now = 1_000_000;
    const breaker = new OutageBreaker({ now: () => now, consecutive: 3, window: 4, windowFailures: 3 });
    // failures of requests sent before an answer are not in a row; "mostly failing" opens it
    breaker.failure('HTTP 500', { sentAt: now - 10, unreachable: false });
    breaker.success();
    now += 50;
    for (let i = 0; i < 3; i++) breaker.failure('HTTP 500', { sentAt: now - 100, unreachable: false });
    expect(breaker.isOpen).toBe(true);
    expect(breaker.openSince).toBe(now);
    breaker.dispose();
  });
});

describe('failures read after the provider answered again', () => {
  it('of requests sent before it did: no second outage, and no attempt used', () => {
    let now = 1_000_000;
    const changes: boolean[] = [];
    const breaker = new OutageBreaker({ probeDelayMs: 100, now: () => now });
    breaker.onChange = (open) => changes.push(open);
    // an outage: three failures in a row open the breaker
    for (let i = 0; i < 3; i++) breaker.failure('HTTP 503', { sentAt: now + i, unreachable: false });
    expect(breaker.isOpen).toBe(true);
    // the probe is answered: closed
    now += 500;
    breaker.success({ sentAt: now - 10, probe: true });
    expect(breaker.isOpen).toBe(false);
    // then the failures of requests sent during the outage are read (late, on a busy event loop):
    // eight of the last ten failing opened the breaker again, a second pause with the provider up
    for (let i = 0; i < 10; i++) expect(breaker.failure('HTTP 503', { sentAt: now - 400 + i, unreachable: false })).toBe(true);
    expect(breaker.isOpen).toBe(false);
    expect(changes).toEqual([true, false]);
    // a failure of a request sent since is read as before
    now += 10;
    expect(breaker.failure('HTTP 503', { sentAt: now, unreachable: false })).toBe(false);
    breaker.dispose();
  });
});
