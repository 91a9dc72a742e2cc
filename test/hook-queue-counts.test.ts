import { describe, expect, it } from 'vitest';
import { HookQueue } from '../src/hooks/queue.js';

// Every body pushed is counted once, as sent, failed or dropped, whatever the drain's deadline cuts:
// a report of "0 sent, 1 failed, 2 dropped" for four hooks left the reader guessing about the fourth.

describe('HookQueue counts', () => {
  it('counts a delivery still being tried at the deadline as dropped, and never again when it ends', async () => {
    const slow = new Set<string>(['b', 'c']);
    const queue = new HookQueue(
      async (body) => {
        if (body === 'a') throw new Error('HTTP 500');
        if (slow.has(body)) await new Promise((r) => setTimeout(r, 300));
      },
      { workers: 2 },
    );
    for (const body of ['a', 'b', 'c', 'd']) queue.push(body);
    const counts = await queue.drain(100);
    expect(counts.sent + counts.failed + counts.dropped).toBe(4);
    expect(counts).toMatchObject({ failed: 1, lastError: 'HTTP 500' });
    await new Promise((r) => setTimeout(r, 400)); // the slow ones end after the report
    expect(queue.counts()).toEqual(counts);
  });
});

describe('HookQueue last error', () => {
  it('is not a failed try of a delivery that then went through', async () => {
    let tries = 0;
    const queue = new HookQueue(
      async (body, _stop, tryFailed) => {
        if (body === 'a' && ++tries === 1) tryFailed?.('HTTP 500');
        if (body === 'b') await new Promise((r) => setTimeout(r, 300));
      },
      { workers: 1, capacity: 1 },
    );
    queue.push('a');
    await new Promise((r) => setTimeout(r, 20));
    queue.push('b');
    queue.push('c'); // waits behind b: both dropped at the deadline, with no error of their own
    const counts = await queue.drain(100);
    expect(counts).toEqual({ sent: 1, failed: 0, dropped: 2, queueFull: 0, lastError: null });
  });
});
