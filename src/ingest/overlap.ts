import type { QueueReader } from '../store/types.js';

/** A file of a folder just enqueued that the queue held already as an item of another folder. */
export interface SameFileOtherId {
  /** The file, as items' sources spell it. */
  readonly path: string;
  /** Its item id from this folder, and the folder. */
  readonly id: string;
  readonly root: string;
  /** Its item id from the folder it was enqueued from before, and that folder. */
  readonly otherId: string;
  readonly otherRoot: string;
}

/**
 * Whether the folder `root` (as item sources spell it) overlaps one enqueued before: a folder inside
 * it, or one around it. An item's id is its path inside the folder enqueued, so its files are then
 * in the queue twice, under two ids: a user updating "just the notes folder" of `docs/` doubled
 * every row of the export without a word. Looked for with one document (the caller gives the first
 * of each folder walked): its path cut at each folder above it, looked up as an item id (an index),
 * whose item's source is the same file. A few lookups, not a scan of the items.
 */
export async function otherIdOfSameFile(
  store: Pick<QueueReader, 'item'>,
  first: { readonly id: string; readonly path: string },
  root: string,
): Promise<SameFileOtherId | null> {
  const parts = first.path.split('/');
  for (let i = 0; i < parts.length; i++) {
    const otherId = parts.slice(i).join('/');
    if (otherId === first.id) continue;
    const item = await store.item(otherId);
    if (item?.source !== first.path) continue;
    return { path: first.path, id: first.id, root, otherId, otherRoot: parts.slice(0, i).join('/') || '.' };
  }
  return null;
}
