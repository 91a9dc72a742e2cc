import { setTimeout as sleep } from 'node:timers/promises';

/** SQLite's busy and locked codes, extended ones included (SQLITE_BUSY_SNAPSHOT ...): the statement did not run. */
const SQLITE_TRANSIENT = /^SQLITE_(BUSY|LOCKED)(_|$)/;

/**
 * PostgreSQL failures that say the statement never ran, or was rolled back whole: no connection
 * made (08001, 08004, ECONNREFUSED), the server starting (57P03) or full (53300), a serialization
 * failure or deadlock (40001, 40P01). A connection lost under a statement is not one of them: its
 * COMMIT may have happened, and a write asked again would be made twice (an answer and its money
 * recorded twice).
 */
const PG_TRANSIENT = new Set(['08001', '08004', '57P03', '53300', '40001', '40P01', 'ECONNREFUSED']);

/**
 * A store failure that passes and left nothing written: SQLite busy or locked past its busy timeout
 * (another process holding the file: a long enqueue, a retry-failed), PostgreSQL refusing
 * connections for a while (restarting, too many clients). The same call a little later succeeds.
 * Known causes wrapped by `knownError` are looked at through their `cause`.
 */
export function isTransientStoreError(error: unknown): boolean {
  return transientCode(error) !== null;
}

/** The code of a transient store failure (`SQLITE_BUSY`, `57P03` ...), from `error` or a cause; null when none is. */
export function transientCode(error: unknown): string | null {
  let found: string | null = null;
  someCause(error, ({ code }) => {
    if (typeof code === 'string' && (SQLITE_TRANSIENT.test(code) || PG_TRANSIENT.has(code))) found = code;
    return found !== null;
  });
  return found;
}

/**
 * No space for the write: SQLite's SQLITE_FULL (the disk, or its own size limit), PostgreSQL's disk_full
 * (53100), the system's ENOSPC and EDQUOT. The transaction was rolled back whole, so the same write
 * may be asked again once space is freed.
 */
export function isDiskFull(error: unknown): boolean {
  return diskFullCode(error) !== null;
}

/** The code that says the disk is full (`SQLITE_FULL` ...), from `error` or a cause; null when none does. */
export function diskFullCode(error: unknown): string | null {
  let found: string | null = null;
  someCause(error, ({ code }) => {
    if (typeof code === 'string' && DISK_FULL.has(code)) found = code;
    return found !== null;
  });
  return found;
}

const DISK_FULL = new Set(['SQLITE_FULL', '53100', 'ENOSPC', 'EDQUOT']);

/** Whether `error` or one of its first causes (a known error wraps the driver's) passes `test`. */
function someCause(error: unknown, test: (e: { code?: unknown; message?: unknown }) => boolean): boolean {
  let e: unknown = error;
  for (let depth = 0; e !== null && typeof e === 'object' && depth < 5; depth++) {
    if (test(e as { code?: unknown; message?: unknown })) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * PostgreSQL's connection lost under a statement: the server ended it (57P01 an administrator or a
 * restart, 57P02 a crash) or the socket closed. Whether the statement committed is not known, so
 * only a statement that may run twice (a read, a heartbeat, a release) is asked again after it
 * (`retryTransient`'s `alsoAfterLoss`); a write that may not is checked first (the PostgreSQL
 * store's `complete`).
 */
export function isConnectionLost(error: unknown): boolean {
  return isBackendGone(error) || someCause(error, ({ code, message }) => code === 'ECONNRESET' || code === 'EPIPE' || isPgClosed(message));
}

/** pg's own words for a socket that closed under it, with no code. */
export function isPgClosed(message: unknown): boolean {
  return typeof message === 'string' && /^Connection terminated( unexpectedly)?$/.test(message);
}

/**
 * The server ended the connection (57P01 an administrator or a shutdown, 57P02 a crash): its
 * backend is gone and its transaction ended with it, committed or rolled back, so what it wrote
 * can be looked up on another connection and is final. A socket that closed alone (a reset) says
 * nothing of the kind: the backend may still be working the statement.
 */
export function isBackendGone(error: unknown): boolean {
  return someCause(error, ({ code }) => code === '57P01' || code === '57P02');
}

/** How long a run keeps asking a store that fails transiently before it gives up: about a lease. */
export const TRANSIENT_RETRY_MS = 60_000;

/** How often a write that met a full disk is asked again. */
export const DISK_FULL_RETRY_MS = 2000;

/**
 * Who waits out a full disk (`retryTransient`'s `diskFull`): told when a write meets one and when it
 * goes through after all, and asked whether to go on waiting.
 */
export interface DiskFullWait extends TransientWait {
  /** Waiting is over: the write's failure is thrown (the run quits without its writes). */
  readonly givenUp: AbortSignal;
}

export interface RetryTransientOptions {
  /** Ask again for this long at most. @default TRANSIENT_RETRY_MS */
  readonly forMs?: number;
  /** A lost connection passes too: for calls that may run twice. */
  readonly alsoAfterLoss?: boolean;
  /** Wait out a full disk, asking every DISK_FULL_RETRY_MS for as long as it lasts, unless given up. */
  readonly diskFull?: DiskFullWait;
  /** Told when the call first fails transiently (it waits and asks again), and when it is through. */
  readonly transient?: TransientWait;
}

/** A call's waits (on a full disk, or a store failing transiently: busy, locked, refusing connections), for a notice. */
export interface TransientWait {
  /** The call met the failure and will be asked again: once per call, on its first such failure. */
  waiting(error: unknown): void;
  /** A call `waiting` was told of waits no more: it went through (`ok`), or failed after all. */
  doneWaiting(ok: boolean): void;
}

/**
 * `call`, asked again after each transient failure (`isTransientStoreError`; with `alsoAfterLoss`,
 * a lost connection too), waiting 0.1 s, then twice as long each time up to 5 s, until `forMs`
 * have passed; with `diskFull`, after a full disk too, for as long as it is not given up. Any other
 * failure, or one past that time, is thrown.
 */
export async function retryTransient<T>(call: () => Promise<T>, o: RetryTransientOptions = {}): Promise<T> {
  const forMs = o.forMs ?? TRANSIENT_RETRY_MS;
  let until = Date.now() + forMs;
  // told `waiting` once, and `doneWaiting` once, when the call is through or thrown
  let waitedForSpace = false;
  let waitedForStore = false;
  const done = (stored: boolean): void => {
    if (waitedForSpace) o.diskFull?.doneWaiting(stored);
    if (waitedForStore) o.transient?.doneWaiting(stored);
    waitedForSpace = waitedForStore = false;
  };
  for (let delay = 100; ; delay = Math.min(delay * 2, 5000)) {
    try {
      const result = await call();
      done(true);
      return result;
    } catch (error) {
      const wait = o.diskFull;
      if (wait && !wait.givenUp.aborted && isDiskFull(error)) {
        if (!waitedForSpace) wait.waiting(error);
        waitedForSpace = true;
        await sleep(DISK_FULL_RETRY_MS, undefined, { signal: wait.givenUp }).catch(() => {});
        // the time for transient failures starts again once there is space: every writer that
        // waited asks at once then, and a moment's lock must not lose what was kept
        until = Date.now() + forMs;
        if (!wait.givenUp.aborted) continue;
      }
      const passes = isTransientStoreError(error) || (o.alsoAfterLoss === true && isConnectionLost(error));
      if (!passes || Date.now() + delay > until) {
        done(false);
        throw error;
      }
      if (!waitedForStore) o.transient?.waiting(error);
      waitedForStore = true;
      await sleep(delay);
    }
  }
}
