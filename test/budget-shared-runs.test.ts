import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { worstCaseUsage } from '../src/pricing/cost.js';
import { loadPriceTable } from '../src/pricing/price-table.js';
import { MockProvider } from '../src/provider/mock.js';
import { runQueue } from '../src/scheduler/run-queue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { gatedProvider } from './helpers/gated-provider.js';
import { requestFor, seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';

// $1 per thousand tokens: a seeded request's worst case (prompt and 64 max_tokens) is about $0.10,
// what the mock answers it with about half of that.
const prices = loadPriceTable({ price: [1000, 1000], catalog: false });
const worst = (worstCaseUsage(requestFor(0)).promptTokens + 64) / 1000;

describe('runs sharing --budget-total', () => {
  it('a run with nothing out waits while another holds the budget for requests out, and goes on once they settle', async () => {
    const store = new SqliteStore(join(tempDir(), 'q.db'));
    await seedJobs(store, 12);
    const budget = { runUsd: null, totalUsd: 3.5 * worst };
    // run A: three requests out, held at the provider, their worst cases reserved: no fourth fits
    const a = gatedProvider(3);
    const runA = runQueue({ store, provider: a.provider, prices, runId: 'run-a' }, { concurrency: 3, budget, retryDelayMs: 10 });
    await a.firstSent;
    // run B starts with nothing of its own out: its first reservation does not fit beside A's
    const runB = runQueue(
      { store, provider: new MockProvider({ latencyMs: 1 }), prices, runId: 'run-b' },
      { concurrency: 3, budget, retryDelayMs: 10 },
    );
    await new Promise((r) => setTimeout(r, 500));
    a.release();
    const [, sb] = await Promise.all([runA, runB]);
    // B sent once A's requests settled (far below their worst case); it used to stop at once, done 0
    expect(sb.done).toBeGreaterThan(0);
    expect((await store.committed('run-b')).total).toBeLessThanOrEqual(3.5 * worst);
    await store.close();
  });
});
