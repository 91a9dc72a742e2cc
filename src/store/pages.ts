/**
 * A table read a page at a time by its order key (keyset paging: each page starts after the last
 * row of the one before, so no page rescans what came before). `page(after, size)` reads up to
 * `size` rows whose key is above `after`, in key order; a page shorter than `size` is the last.
 */
export async function* keysetPages<R extends object>(
  page: (after: unknown, size: number) => readonly R[] | Promise<readonly R[]>,
  orderKey: keyof R & string,
  size: number,
): AsyncIterable<R> {
  let after: unknown = 0;
  for (;;) {
    const rows = await page(after, size);
    yield* rows;
    if (rows.length < size) return;
    after = rows[rows.length - 1]![orderKey];
  }
}

/** What a walk of `folder` puts before an id to make its item's source (`QueueReader.folderItems`). */
export function folderPrefix(folder: string): string {
  return folder === '.' ? '' : `${folder.replace(/\/+$/, '')}/`;
}

/** Ids asked about in one query (`QueueReader.itemStates`): one statement's parameter stays small. */
export const ITEM_STATES_PER_QUERY = 1000;
