import type pg from 'pg';
import { StoreError } from '../../errors.js';

/**
 * How far this machine's clock may be from the database server's before a run refuses to start.
 * Runs on several machines share one queue through lease times each writes with its own clock (a
 * lease lasts 60 s and is renewed every 2 s): another run takes a job back once its lease looks
 * over by that run's clock. A run whose clock is a minute ahead takes the jobs others are still
 * answering; one a minute behind writes leases that look over to the others as it writes them, and
 * they take its jobs: either way a job is sent and paid for twice. 15 s leaves the renewals a wide
 * margin and is far beyond any clock kept in sync (NTP keeps them within milliseconds).
 */
export const MAX_CLOCK_SKEW_MS = 15_000;

/** This machine's clock against the server's: how far ahead (negative: behind) it is, in ms. */
export async function clockSkewMs(pool: pg.Pool, now: () => number = Date.now): Promise<number> {
  const before = now();
  const { rows } = await pool.query<{ ms: number }>('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms');
  const after = now();
  // the server read its clock somewhere within the round trip: its middle
  return (before + after) / 2 - Number(rows[0]!.ms);
}

/** Refuses a clock too far from the server's to share leases with other machines (MAX_CLOCK_SKEW_MS). */
export async function refuseSkewedClock(pool: pg.Pool, location: string, now: () => number = Date.now): Promise<void> {
  const skew = await clockSkewMs(pool, now);
  if (Math.abs(skew) <= MAX_CLOCK_SKEW_MS) return;
  const seconds = Math.round(Math.abs(skew) / 1000);
  throw new StoreError(
    `This machine's clock is ${seconds} s ${skew > 0 ? 'ahead of' : 'behind'} the database server's (${location}). ` +
      'Runs on several machines compare the lease times each writes with its own clock: with one this far off, ' +
      `${skew > 0 ? 'this run would take jobs other runs are still answering' : 'other runs would take jobs this one is still answering'}, ` +
      'and they would be sent and paid for twice. Set the clock right (timedatectl set-ntp true, or chrony), then run again.',
  );
}
