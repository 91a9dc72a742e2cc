/**
 * The jobs a run holds that no item needs any more, as its heartbeats say (an enqueue moved their
 * documents to other requests, or `forget` removed them): none is sent again, and one waiting out
 * a backoff is woken, to be handed back at once rather than when its wait ends (up to
 * `--max-retry-delay`, `running` all the while).
 */
export class UnneededJobs {
  readonly #keys = new Set<string>();
  /** What a job waiting out a backoff waits on: aborted once it is found unneeded. */
  readonly #waits = new Map<string, AbortController>();

  has(key: string): boolean {
    return this.#keys.has(key);
  }

  /** Found unneeded: false when it was already. */
  add(key: string): boolean {
    if (this.#keys.has(key)) return false;
    this.#keys.add(key);
    this.#waits.get(key)?.abort();
    return true;
  }

  /** Aborted when the job is found unneeded (at once if it is already). */
  signal(key: string): AbortSignal {
    let wait = this.#waits.get(key);
    if (!wait) {
      wait = new AbortController();
      this.#waits.set(key, wait);
    }
    if (this.#keys.has(key)) wait.abort();
    return wait.signal;
  }

  /** The job left the run's hands: a later claim of it starts afresh. */
  forget(key: string): void {
    this.#keys.delete(key);
    this.#waits.delete(key);
  }
}
