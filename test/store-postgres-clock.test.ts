import { describe, expect, it, vi } from 'vitest';
import { clockSkewMs, MAX_CLOCK_SKEW_MS, refuseSkewedClock } from '../src/store/postgres/clock.js';
import { PostgresStore } from '../src/store/postgres/store.js';
import { STORE_KINDS, freshPgUrl, skipUnavailable, T0 } from './helpers/stores.js';

// Leases are written and compared with each machine's own clock (docs/architecture.md, "Running on
// several machines"): a run on a machine whose clock is far from the server's must not start.
describe('postgres: a run on a machine whose clock is far off', () => {
  it('reads this machine against the server: in step here, 90 s off when told so, refused past the limit', async (ctx) => {
    skipUnavailable(STORE_KINDS.find((k) => k.name === 'postgres')!, ctx);
    const store = await PostgresStore.open(freshPgUrl());
    try {
      expect(Math.abs(await clockSkewMs(store.pool))).toBeLessThan(1000);
      const ahead = () => Date.now() + 90_000;
      expect(await clockSkewMs(store.pool, ahead)).toBeGreaterThan(89_000);
      await expect(refuseSkewedClock(store.pool, 'postgres://db/q', ahead)).rejects.toThrow(
        /^This machine's clock is 9\d s ahead of the database server's \(postgres:\/\/db\/q\)\. .*this run would take jobs other runs are still answering, and they would be sent and paid for twice\. Set the clock right/,
      );
      await expect(refuseSkewedClock(store.pool, 'postgres://db/q', () => Date.now() - 90_000)).rejects.toThrow(
        /9\d s behind .*other runs would take jobs this one is still answering/,
      );
      const within = () => Date.now() - (MAX_CLOCK_SKEW_MS - 2000);
      await expect(refuseSkewedClock(store.pool, 'postgres://db/q', within)).resolves.toBeUndefined();
      // a run starts on a machine in step (its own times may be anything: the check reads the real clock)
      await store.startRun({ id: 'r', host: 'h', pid: 1, startedAt: T0, options: {} });
      // and not on one a minute and a half ahead: this machine's clock can only be moved here in-process
      const real = Date.now;
      const spy = vi.spyOn(Date, 'now').mockImplementation(() => real() + 90_000);
      try {
        await expect(store.startRun({ id: 'r2', host: 'h', pid: 1, startedAt: T0, options: {} })).rejects.toThrow(/9\d s ahead/);
      } finally {
        spy.mockRestore();
      }
      expect((await store.activeRuns()).map((r) => r.id)).toEqual(['r']);
    } finally {
      await store.close();
    }
  });
});
