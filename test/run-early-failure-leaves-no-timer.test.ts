import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MockProvider } from '../src/provider/mock.js';
import { runQueue } from '../src/scheduler/run-queue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { tempDir } from './helpers/tmp.js';

const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;

/**
 * runQueue used to build its rate limiter (with --tpm, a 25 ms refill setInterval that was not unref'd)
 * before reclaim/status/startRun, but only stops it in the `finally` of the later `try`. When one of
 * those first store calls throws (SQLITE_BUSY past busy_timeout, a PostgreSQL blip), the interval
 * outlives the run: `llmq run --tpm N` prints the error and then never exits.
 */
describe('runQueue failing before its loop leaves no timer behind', () => {
  it('leaves no timer of its own limiter behind', async () => {
    class FailingStore extends SqliteStore {
      override async startRun(): Promise<void> {
        throw new Error('database is locked');
      }
    }
    const store = new FailingStore(join(tempDir(), 'q.db'));
    const before = timers();
    await expect(runQueue({ store, provider: new MockProvider({ latencyMs: 0 }) }, { tpm: 60_000, timeout: 'auto' })).rejects.toThrow(
      'database is locked',
    );
    const after = timers();
    await store.close();
    expect(after).toBe(before);
  });
});
