import { setTimeout as sleep } from 'node:timers/promises';

/** SQLite's busy and locked codes, extended ones included (SQLITE_BUSY_SNAPSHOT ...). */
const SQLITE_TRANSIENT = /^SQLITE_(BUSY|LOCKED)(_|$)/;

/**
 * PostgreSQL SQLSTATEs that pass: the connection lost or refused (class 08), the server shutting
 * down or starting (57P01-57P03), too many connections, a serialization failure or deadlock.
 */
const PG_TRANSIENT = new Set(['08000', '08001', '08003', '08004', '08006', '57P01', '57P02', '57P03', '53300', '40001', '40P01']);

/** The socket to the database server went away. */
const NET_TRANSIENT = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * A store failure that passes: SQLite busy or locked past its busy timeout (another process holding
 * the file: a long enqueue, a retry-failed), a PostgreSQL connection lost or refused, its server
 * restarting. The same call a little later succeeds. Known causes wrapped by `knownError` are
 * looked at through their `cause`.
 */
export function isTransientStoreError(error: unknown): boolean {
  let e: unknown = error;
  for (let depth = 0; e !== null && typeof e === 'object' && depth < 5; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && (SQLITE_TRANSIENT.test(code) || PG_TRANSIENT.has(code) || NET_TRANSIENT.has(code))) return true;
    // node-postgres, when the server closes the connection under a query
    if (e instanceof Error && /^Connection terminated/i.test(e.message)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/** How long a run keeps asking a store that fails transiently before it gives up: about a lease. */
export const TRANSIENT_RETRY_MS = 60_000;

/**
 * `call`, asked again after each transient failure (`isTransientStoreError`), waiting 0.1 s, then
 * twice as long each time up to 5 s, until `forMs` have passed; any other failure, or one past
 * that time, is thrown.
 */
export async function retryTransient<T>(call: () => Promise<T>, forMs = TRANSIENT_RETRY_MS): Promise<T> {
  const until = Date.now() + forMs;
  for (let delay = 100; ; delay = Math.min(delay * 2, 5000)) {
    try {
      return await call();
    } catch (error) {
      if (!isTransientStoreError(error) || Date.now() + delay > until) throw error;
      await sleep(delay);
    }
  }
}
