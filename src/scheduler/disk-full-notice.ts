import { DISK_FULL_RETRY_MS, type DiskFullWait, diskFullCode } from '../store/transient.js';

/**
 * Says once when the run's writes begin to wait for disk space, and once when they are through. While
 * the disk is full the answers in hand (paid for, at most --concurrency) wait in memory and nothing
 * new is claimed: freeing space lets the run go on with nothing lost or sent twice.
 */
export class DiskFullNotice {
  readonly #warn: (message: string) => void;
  /** Writes waiting now. */
  #waiting = 0;

  constructor(warn: (message: string) => void) {
    this.#warn = warn;
  }

  /** The waiter for writes that give up when `givenUp` aborts. */
  waitUntil(givenUp: AbortSignal): DiskFullWait {
    return {
      waiting: (error) => {
        if (this.#waiting++ === 0) this.#warn(fullText(error));
      },
      doneWaiting: (stored) => {
        if (--this.#waiting === 0 && stored) this.#warn('space again: what the run held is stored, and it goes on.');
      },
      givenUp,
    };
  }
}

function fullText(error: unknown): string {
  // the driver's code, under a known error's wording if one wraps it
  const code = diskFullCode(error);
  const why = code === null ? '' : ` (${code})`;
  return (
    `no space left for the queue's database${why}: the run keeps the answers it holds (paid for) and takes no new work ` +
    `until space is freed, trying again every ${DISK_FULL_RETRY_MS / 1000}s. Free some space where the database is; ` +
    'Ctrl-C quits without them (the next run sends them again).'
  );
}
