import { describe, expect, it, vi } from 'vitest';
import { clockOffsetMs, MAX_CLOCK_APART_MS, refuseClockApart } from '../src/store/postgres/clock.js';
import { PostgresStore } from '../src/store/postgres/store.js';
import { STORE_KINDS, freshPgUrl, skipUnavailable, T0 } from './helpers/stores.js';

// Leases are written and compared with each machine's own clock (docs/scale-out.md, "Clocks"): a run must not start on a machine whose clock is far from a live run's on another.
describe('postgres: runs on machines whose clocks disagree', () => {
  it("reads this machine's clock against the server's, and refuses a run far from a live run's clock", async (ctx) => {
    skipUnavailable(STORE_KINDS.find((k) => k.name === 'postgres')!, ctx);
    const store = await PostgresStore.open(freshPgUrl());
    try {
      expect(Math.abs(await clockOffsetMs(store.pool))).toBeLessThan(1000);
      expect(await clockOffsetMs(store.pool, () => Date.now() + 90_000)).toBeGreaterThan(89_000);
      // a run on a machine 90 s ahead, beating (by its own clock); one that stopped beating long ago, 300 s behind
      const now = Date.now();
      await store.pool.query(
        `INSERT INTO runs (id, host, pid, started_at, heartbeat_at, options, clock_offset_ms) VALUES
          ('ahead-run', 'fast-box', 1, $1, $1, '{}', 90000), ('gone-run', 'slow-box', 2, $2, $2, '{}', -300000)`,
        [now + 90_000, now - 300_000 - 200_000],
      );
      // this machine (in step with the server) against them: the live one is 90 s ahead of it
      await expect(store.startRun({ id: 'here', host: 'h', pid: 3, startedAt: T0, options: {} })).rejects.toThrow(
        /^This machine's clock is 9\d s behind that of run ahead-ru on fast-box, which works the same queue \(.*\), as the database server's clock measures both\. .*one would take jobs the other is still answering, and they would be sent and paid for twice\. Set the clocks right/,
      );
      // within the margin of it, a run starts (the dead one's clock is not asked)
      await refuseClockApart(store.pool, 90_000 - (MAX_CLOCK_APART_MS - 2000), 'q');
      const real = Date.now;
      const spy = vi.spyOn(Date, 'now').mockImplementation(() => real() + 90_000);
      try {
        await store.startRun({ id: 'also-ahead', host: 'h', pid: 3, startedAt: T0, options: {} });
      } finally {
        spy.mockRestore();
      }
      const started = await store.pool.query<{ clock_offset_ms: number }>(`SELECT clock_offset_ms FROM runs WHERE id = 'also-ahead'`);
      expect(Math.abs(started.rows[0]!.clock_offset_ms - 90_000)).toBeLessThan(1000);
      // once the fast machine's runs end, this one runs
      await store.pool.query(`UPDATE runs SET ended_at = heartbeat_at WHERE host = 'fast-box' OR id = 'also-ahead'`);
      await store.startRun({ id: 'here', host: 'h', pid: 3, startedAt: T0, options: {} });
    } finally {
      await store.close();
    }
  });
});
