import type { QueueReader } from './types.js';

/** Some items of one job, in the order they were enqueued, and whether it has others. */
export interface JobItems {
  readonly ids: readonly string[];
  readonly more: boolean;
}

/** The first `max` items of the job `key` (a range of the items' key index, `max + 1` read to know of more). */
export async function jobItems(store: Pick<QueueReader, 'itemsByKeyPrefix'>, key: string, max: number): Promise<JobItems> {
  const ids = (await store.itemsByKeyPrefix(key, max + 1)).filter((r) => r.key === key).map((r) => r.itemId);
  return { ids: ids.slice(0, max), more: ids.length > max };
}
