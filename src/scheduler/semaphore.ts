/**
 * At most `size` holders at once; waiters are served first come, first served. When `signal`
 * aborts, every waiter is rejected with its reason, and so is each later `acquire`: one listener on
 * the run's signal rather than one per waiter (up to `--concurrency` of them wait at any time).
 */
export class Semaphore {
  // May go below 0 after `shrink`: releases then pay off the difference before anyone is granted.
  #free: number;
  #size: number;
  readonly #waiters: Array<{ resolve: () => void; reject: (reason: unknown) => void }> = [];
  readonly #signal: AbortSignal;

  constructor(size: number, signal: AbortSignal) {
    this.#free = size;
    this.#size = size;
    this.#signal = signal;
    signal.addEventListener(
      'abort',
      () => {
        for (const w of this.#waiters.splice(0)) w.reject(signal.reason);
      },
      { once: true },
    );
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

  acquire(): Promise<void> {
    if (this.#signal.aborted) return Promise.reject(this.#signal.reason);
    if (this.#free > 0) {
      this.#free--;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  release(): void {
    if (this.#free < 0) {
      this.#free++;
      return;
    }
    const next = this.#waiters.shift();
    if (next) next.resolve();
    else this.#free++;
  }
}
