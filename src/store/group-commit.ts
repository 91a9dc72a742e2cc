/**
 * Group commit: writes that arrive in the same turn of the event loop are committed together, as
 * one transaction, which costs about what one write costs. Each caller's promise settles only once
 * the transaction holding its write has committed (or failed: then every write of it rejects).
 *
 * `commit` takes the batch in arrival order and gives one result per write, in the same order. It
 * may answer synchronously (SQLite: the promises settle in the same turn) or with a promise.
 */
export class GroupCommit<T, R> {
  readonly #commit: (batch: readonly T[]) => R[] | Promise<R[]>;
  /** Writes per commit at most; more wait for the next one. */
  readonly #maxBatch: number;
  #queued: Array<Queued<T, R>> = [];
  /** Commits sent and not yet answered, so `drain` can wait for them. */
  readonly #committing = new Set<Promise<void>>();

  constructor(commit: (batch: readonly T[]) => R[] | Promise<R[]>, maxBatch = Number.POSITIVE_INFINITY) {
    this.#commit = commit;
    this.#maxBatch = maxBatch;
  }

  add(write: T): Promise<R> {
    return new Promise((resolve, reject) => {
      this.#queued.push({ write, resolve, reject });
      if (this.#queued.length === 1) setImmediate(this.#flush);
    });
  }

  /** Commit what is queued now, and wait for every commit still in flight (for `close`). */
  async drain(): Promise<void> {
    if (this.#queued.length > 0) this.#flush();
    await Promise.allSettled([...this.#committing]);
  }

  readonly #flush = (): void => {
    const all = this.#queued;
    this.#queued = [];
    for (let i = 0; i < all.length; i += this.#maxBatch) this.#settle(all.slice(i, i + this.#maxBatch));
  };

  #settle(batch: Array<Queued<T, R>>): void {
    let results: R[] | Promise<R[]>;
    try {
      results = this.#commit(batch.map((b) => b.write));
    } catch (error) {
      for (const b of batch) b.reject(error);
      return;
    }
    if (!(results instanceof Promise)) {
      for (const [i, b] of batch.entries()) b.resolve(results[i]!);
      return;
    }
    const done = results
      .then(
        (r) => {
          for (const [i, b] of batch.entries()) b.resolve(r[i]!);
        },
        (error: unknown) => {
          for (const b of batch) b.reject(error);
        },
      )
      .finally(() => this.#committing.delete(done));
    this.#committing.add(done);
  }
}

interface Queued<T, R> {
  readonly write: T;
  resolve(result: R): void;
  reject(error: unknown): void;
}
