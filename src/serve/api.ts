import type { ExportRow, Store } from '../store/types.js';

/** The most failed items one reason lists: enough to see the pattern, cheap with millions. */
export const FAILED_ITEMS_LIMIT = 50;

export interface FailedItem {
  readonly id: string;
  readonly source: string;
  readonly key: string;
  readonly attempts: number;
}

/**
 * Failed items with exactly this error, in input order, at most `limit`. The store has no index by
 * error, so this walks failed jobs' items and stops at the limit; it runs when a user opens a
 * reason, never per update.
 */
export async function failedItems(store: Store, error: string, limit = FAILED_ITEMS_LIMIT): Promise<FailedItem[]> {
  const found: FailedItem[] = [];
  for await (const row of store.exportRows({ states: ['failed'] })) {
    if ((row.error ?? 'unknown error') !== error) continue;
    found.push(pick(row));
    if (found.length >= limit) break;
  }
  return found;
}

function pick(row: ExportRow): FailedItem {
  return { id: row.id, source: row.source, key: row.key, attempts: row.attempts };
}

/** Put failed jobs back to pending: all of them, or those whose error is exactly `error`. */
export async function retryFailedJobs(store: Store, error: string | undefined, now: number): Promise<number> {
  // retryFailed matches a substring, case-insensitively: the dashboard names a whole reason, so a
  // reason that is part of a longer one also takes that one along; the page says how many moved.
  return store.retryFailed(error === undefined ? {} : { errorContains: error }, now);
}
