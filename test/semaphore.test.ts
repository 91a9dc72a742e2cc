import { describe, expect, it } from 'vitest';
import { Semaphore } from '../src/scheduler/semaphore.js';

describe('Semaphore: the run slots', () => {
  it('grants waiters first come, first served as holders release', async () => {
    const slots = new Semaphore(1, new AbortController().signal);
    await slots.acquire();
    const order: string[] = [];
    const a = slots.acquire().then(() => order.push('a'));
    const b = slots.acquire().then(() => order.push('b'));
    expect(slots.waiting).toBe(2);
    slots.release();
    await a;
    slots.release();
    await b;
    expect(order).toEqual(['a', 'b']);
  });

  it('rejects every waiter with the reason as soon as the run stops, and every later acquire', async () => {
    const stop = new AbortController();
    const slots = new Semaphore(1, stop.signal);
    await slots.acquire(); // a request on the wire that is not answered yet
    const waiters = [slots.acquire(), slots.acquire()];
    const reason = new Error('run stopped');
    stop.abort(reason);
    for (const w of waiters) await expect(w).rejects.toBe(reason);
    expect(slots.waiting).toBe(0);
    await expect(slots.acquire()).rejects.toBe(reason);
  });
});
