/** At most `size` holders at once; waiters are served first come, first served. */
export class Semaphore {
  #free: number;
  readonly #waiters: Array<{ grant: () => void }> = [];

  constructor(size: number) {
    this.#free = size;
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
    const next = this.#waiters.shift();
    if (next) next.grant();
    else this.#free++;
  }
}
