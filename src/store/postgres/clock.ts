import type pg from 'pg';
import { StoreError } from '../../errors.js';

/**
 * How far apart the clocks of two machines running on one queue may be before a run refuses to
 * start. Runs share the queue through lease times each writes with its own clock (a lease lasts
 * 60 s and is renewed every 2 s): another run takes a job back once its lease looks over by that
 * run's clock. A run whose clock is a minute ahead of another's takes the jobs the other is still
 * answering, and the other takes its own the same way: either way a job is sent and paid for twice.
 * 15 s leaves the renewals a wide margin and is far beyond clocks kept in sync (NTP keeps them
 * within milliseconds). Only machines against each other matter: a server whose own clock is off
 * harms nothing, and one machine alone cannot disagree with itself.
 */
export const MAX_CLOCK_APART_MS = 15_000;

/** How a run is taken for stopped when it has not ended: no heartbeat for this long (status's STALE_RUN_MS). */
const QUIET_MS = 90_000;

/** This machine's clock against the server's: how far ahead (negative: behind) it is, in ms. */
export async function clockOffsetMs(pool: pg.Pool, now: () => number = Date.now): Promise<number> {
  const before = now();
  const { rows } = await pool.query<{ ms: number }>('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms');
  const after = now();
  // the server read its clock somewhere within the round trip: its middle
  return Math.round((before + after) / 2 - Number(rows[0]!.ms));
}

/**
 * Refuses to start a run whose clock (`offset` from the server's) is more than MAX_CLOCK_APART_MS
 * from that of a live run on the queue (`runs.clock_offset_ms`). A run's heartbeat is in its own
 * clock: taken back to the server's by its offset to tell whether it still beats.
 */
export async function refuseClockApart(pool: pg.Pool, offset: number, location: string, now: () => number = Date.now): Promise<void> {
  const serverNow = now() - offset;
  const { rows } = await pool.query<{ id: string; host: string; offset: number }>(
    `SELECT id, host, clock_offset_ms AS offset FROM runs
    WHERE ended_at IS NULL AND heartbeat_at - clock_offset_ms > $1 AND abs(clock_offset_ms - $2) > $3
    ORDER BY abs(clock_offset_ms - $2) DESC LIMIT 1`,
    [serverNow - QUIET_MS, offset, MAX_CLOCK_APART_MS],
  );
  const other = rows[0];
  if (!other) return;
  const apart = offset - other.offset;
  throw new StoreError(
    `This machine's clock is ${Math.round(Math.abs(apart) / 1000)} s ${apart > 0 ? 'ahead of' : 'behind'} that of run ` +
      `${other.id.slice(0, 8)} on ${other.host}, which works the same queue (${location}), as the database server's clock measures both. ` +
      'Runs compare the lease times each writes with its own clock: this far apart, one would take jobs the other is still ' +
      'answering, and they would be sent and paid for twice. Set the clocks right (NTP: timedatectl set-ntp true, or chrony), then run again.',
  );
}
