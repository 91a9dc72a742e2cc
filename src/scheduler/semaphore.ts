/** At most `size` holders at once; waiters are served first come, first served. */
export class Semaphore {
  // May go below 0 after `shrink`: releases then pay off the difference before anyone is granted.
  #free: number;
  #size: number;
  readonly #waiters: Array<{ grant: () => void }> = [];

  constructor(size: number) {
    this.#free = size;
    this.#size = size;
  }

  get size(): number {
    return this.#size;
  }

  /** Lower the number of holders to `size` (at least 1); holders beyond it finish first. */
  shrink(size: number): void {
    const next = Math.max(1, Math.min(this.#size, Math.floor(size)));
    this.#free -= this.#size - next;
    this.#size = next;
  }

  get waiting(): number {
    return this.#waiters.length;
  }

  acquire(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.#free > 0) {
      this.#free--;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        grant: (): void => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        const i = this.#waiters.indexOf(waiter);
        if (i >= 0) this.#waiters.splice(i, 1);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  release(): void {
    if (this.#free < 0) {
      this.#free++;
      return;
    }
    const next = this.#waiters.shift();
    if (next) next.grant();
    else this.#free++;
  }
}
