/**
 * What both stores' paged export reads share: items are read a page at a time, and their jobs
 * mostly as a run in jobs' seq order, since jobs are made in the order of the first item that asks
 * for each. A run pairs with the items by position (compared by key); jobs it does not pair are kept
 * a while by key for the items that share an older job or come out of order.
 */

/** Fewer jobs missing from a page than this are looked up by key: a run from the first would mostly read others. */
export const RANGE_MIN = 16;

/** An item as the export reads it: seq, id, source, meta, its job's key. */
export type RawItem = readonly [seq: number, id: string, source: string, meta: string | null, jobKey: string];

/** A job's values as a read returns them, its key first. */
export type KeyedJob = readonly [key: string, ...rest: unknown[]];

/**
 * How many of the page's items, from its first, have the job at the same position in `run`: the
 * usual page, each item with a job of its own made in the items' order. Compared by key, with no
 * lookup in a map: hashing two 64-character keys per row was a twentieth of a JSON Lines export's CPU.
 */
export function pairedInOrder(page: readonly RawItem[], run: readonly KeyedJob[]): number {
  const most = Math.min(page.length, run.length);
  let n = 0;
  while (n < most && run[n]![0] === page[n]![4]) n++;
  return n;
}

/** Jobs read for a page's items that a run did not pair, by key, the newest read evicted last. */
export class KeptJobs<J extends KeyedJob> {
  readonly #jobs = new Map<string, J>();
  readonly #most: number;

  /** `most`: how many are kept from earlier pages (for items that share a job or come a little out of order). */
  constructor(most: number) {
    this.#most = most;
  }

  has(key: string): boolean {
    return this.#jobs.has(key);
  }

  get(key: string): J | undefined {
    return this.#jobs.get(key);
  }

  keep(job: J): void {
    this.#jobs.delete(job[0]); // re-inserted last: the newest read is the last evicted
    this.#jobs.set(job[0], job);
  }

  /**
   * After a page: the jobs it used go (the next page rarely shares one, and the few that do are
   * looked up), then the oldest beyond the limit. A job kept across pages outlives the young
   * generation and costs the collector a copy. Nothing to forget when the run paired every item.
   */
  pageDone(page: readonly RawItem[], paired: number): void {
    if (paired < page.length) for (const i of page) this.#jobs.delete(i[4]);
    for (const key of this.#jobs.keys()) {
      if (this.#jobs.size <= this.#most) break;
      this.#jobs.delete(key);
    }
  }
}
