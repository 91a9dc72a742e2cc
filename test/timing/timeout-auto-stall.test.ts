import { describe, expect, it } from 'vitest';
import { runQueue } from '../../src/scheduler/run-queue.js';
import { reply } from '../helpers/fake-openai.js';
import { seedJobs } from '../helpers/seed.js';
import { fast, provider, setup } from '../helpers/governor-setup.js';

// Here, in the serial timing phase, not beside other test files: what --timeout auto learns is the
// latency this process sees, and a neighbour's load (a browser test on the other core) made answers of
// 50 ms look like a second's, the limit 6 s, where the stall it is about would make it over 3.

describe('--timeout auto under a stall of this process', () => {
  it('--timeout auto learns the latency of the provider, not of a stall in this process', async () => {
    const { fake, store } = await setup({ latencyMs: 50 });
    const keys = await seedJobs(store, 300);
    const last = keys[299]!; // hangs once, long after the stall
    let hung = false;
    let arrivals = 0;
    fake.respond((r) => {
      // Synchronous work mid-run (as loading a large module on first use is): just after the 100th
      // request arrives, with the others of -c 8 on the wire, the event loop is held for 600 ms, and
      // every answer then in flight looks 600 ms slow.
      if (++arrivals === 100) {
        setTimeout(() => {
          const until = performance.now() + 600;
          while (performance.now() < until);
        }, 10);
      }
      if (r.key !== last || hung) return undefined;
      hung = true;
      return reply.hang();
    });
    const summary = await runQueue({ store, provider: provider(fake, 600_000) }, { ...fast, concurrency: 8, timeout: 'auto' });
    expect(summary).toMatchObject({ reason: 'drained', done: 300, failed: 0 });
    const cut = (await store.item('doc-299'))!.attempts[0]!.error!; // job `last`
    const limit = /the limit was ([\d.]+) (m?s)/.exec(cut);
    // Answers take ~50 ms: the limit is the 500 ms floor on a quiet machine (1.5 s seen at load 8,
    // where the scheduler delays answers too); the stalled latencies would make it over 6 x 550 ms.
    expect(Number(limit?.[1]) * (limit?.[2] === 's' ? 1000 : 1)).toBeLessThan(3000);
    await store.close();
  });
});
