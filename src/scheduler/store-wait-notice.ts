import { TRANSIENT_RETRY_MS, type TransientWait, transientCode } from '../store/transient.js';

/**
 * Says once when the run's store calls begin to wait on a database that is locked or refuses
 * connections, and once when they are through. SQLite waits out another process's lock for its busy
 * timeout (10 s) before a call fails and is asked again; the run said nothing meanwhile, and its
 * progress stood still, which read as a hang. A serialization failure or deadlock between runs
 * sharing a PostgreSQL queue is asked again at once and says nothing: it is routine there.
 */
export class StoreWaitNotice {
  readonly #warn: (message: string) => void;
  /** After how long without a heartbeat the run stops (half its lease): what the wait is told to last at most. */
  readonly #stopsAfterMs: number;
  /** Calls waiting now, whether the wait was told, and whether a call went through since. */
  #waiting = 0;
  #told = false;
  #answered = false;

  /** Who holds the database's lock, when the store can tell (a stopped run of this machine). */
  readonly #lockHolder: () => string | null;

  constructor(warn: (message: string) => void, stopsAfterMs: number, lockHolder: () => string | null = () => null) {
    this.#warn = warn;
    this.#stopsAfterMs = stopsAfterMs;
    this.#lockHolder = lockHolder;
  }

  readonly wait: TransientWait = {
    waiting: (error) => {
      this.#waiting++;
      if (this.#told) return;
      // read only when it is to be said: naming a lock's holder reads the runs and /proc
      const text = waitText(error, this.#stopsAfterMs, this.#lockHolder);
      if (text !== null) {
        this.#told = true;
        this.#answered = false;
        this.#warn(text);
      }
    },
    doneWaiting: (ok) => {
      if (ok) this.#answered = true;
      if (--this.#waiting > 0 || !this.#told) return;
      this.#told = false;
      // a call that gave up is the run's to tell; one through since says the database is back
      if (this.#answered) this.#warn("the queue's database answers again.");
    },
  };
}

function waitText(error: unknown, stopsAfterMs: number, lockHolder: () => string | null): string | null {
  const code = transientCode(error);
  // the heartbeat renews the run's leases: past half the lease without one, the run stops taking work
  const upTo = `up to ${Math.round(Math.min(stopsAfterMs, TRANSIENT_RETRY_MS) / 1000)}s, then the run stops (what it holds kept)`;
  if (code === null) return `the connection to the queue's database was lost: asking again, ${upTo}.`;
  // what to know first: a terminal's warning line is cut at its width
  if (code.startsWith('SQLITE_')) {
    const holder = lockHolder();
    if (holder !== null) return `the queue's database is locked (${code}): waiting for it, ${upTo}; ${holder}.`;
    return (
      `the queue's database is locked (${code}): waiting for it, ${upTo}; ` +
      'a program holding the file in a transaction (sqlite3, a backup, a long enqueue) keeps it waiting.'
    );
  }
  if (code === '40001' || code === '40P01') return null;
  return `the queue's database refuses connections (${code}): waiting for it, ${upTo}.`;
}
