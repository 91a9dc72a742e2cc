import { LlmqError } from '../errors.js';
import { finishReasonOf } from '../provider/finish.js';
import { jobItems } from '../store/job-items.js';
import type { ItemDetail, QueueReader } from '../store/types.js';

export interface FoundItem {
  readonly detail: ItemDetail;
  /** Set when it was found by its job's key: the key, and how many items share the job (at most MORE_ITEMS + 1 counted). */
  readonly byKey: { readonly key: string; readonly items: number } | null;
  /** The other items whose documents rendered the same request (one job: one call, one bill), at most MORE_ITEMS; `more` when there are others still. */
  readonly sharedWith: { readonly ids: readonly string[]; readonly more: boolean };
}

/**
 * An item as `show --json` and the dashboard's `/api/item` give it: with its job's `finishReason`
 * (how the answer ended, as export's finish_reason, read from the response) and `sharedWith`.
 */
export function itemJson(found: FoundItem): ItemDetail & { job: { finishReason: string | null }; sharedWith: FoundItem['sharedWith'] } {
  const { detail } = found;
  const finishReason = detail.job.state === 'done' ? finishReasonOf(detail.job.response) : null;
  return { ...detail, job: { ...detail.job, finishReason }, sharedWith: found.sharedWith };
}

/** Job keys are SHA-256 hex; fewer characters than this are taken for an item id only. */
export const MIN_KEY_PREFIX = 8;
const MORE_ITEMS = 10;

/** Could name a job by its key (or the start of it): 8 to 64 hex characters (keys are lowercase; either case is taken). */
export function isKeyPrefix(s: string): boolean {
  return s.length >= MIN_KEY_PREFIX && s.length <= 64 && /^[0-9a-f]+$/i.test(s);
}

/**
 * The item `show` means: the item with this id, or else the item of the job whose key starts with
 * it (at least 8 hex characters), because `run` names a failed job by the first 12 of its key and
 * the user's next step is to look at it. Null when neither is there.
 */
export async function findItem(store: Pick<QueueReader, 'item' | 'itemsByKeyPrefix'>, idOrKey: string): Promise<FoundItem | null> {
  // an id holding a control character is shown with it escaped (`printable`): taken back as shown too
  const escaped = unescapedId(idOrKey);
  const detail = (await store.item(idOrKey)) ?? (escaped === null ? null : await store.item(escaped));
  if (detail) return { detail, byKey: null, sharedWith: await sharedWith(store, detail) };
  if (!isKeyPrefix(idOrKey)) return null;
  const prefix = idOrKey.toLowerCase();
  const rows = await store.itemsByKeyPrefix(prefix, MORE_ITEMS + 1);
  if (rows.length === 0) return null;
  const keys = [...new Set(rows.map((r) => r.key))];
  // the first job may have filled the rows: is there another with this prefix after it?
  if (keys.length === 1) keys.push(...(await store.itemsByKeyPrefix(prefix, 1, keys[0])).map((r) => r.key));
  if (keys.length > 1) {
    throw new LlmqError(
      `'${idOrKey}' starts the keys of several jobs (${keys.map((k) => `${k.slice(0, idOrKey.length + 4)}…`).join(', ')}): give more of the key.`,
    );
  }
  const first = await store.item(rows[0]!.itemId);
  return first ? { detail: first, byKey: { key: keys[0]!, items: rows.length }, sharedWith: await sharedWith(store, first) } : null;
}

/**
 * `id` with the escapes `printable` writes for control characters (`new\u000aline.txt`) turned back
 * into them, or null when it has none: what llmq printed of an id then finds it.
 */
export function unescapedId(id: string): string | null {
  const back = id.replace(/\\u(00[01][0-9a-f]|007f|00[89][0-9a-f]|202[89])/gi, (_, hex: string) =>
    String.fromCharCode(Number.parseInt(hex, 16)),
  );
  return back === id ? null : back;
}

/** The items other than `item` that share its job (a range of the key index, at most MORE_ITEMS + 2 read). */
async function sharedWith(store: Pick<QueueReader, 'itemsByKeyPrefix'>, item: ItemDetail): Promise<FoundItem['sharedWith']> {
  const { ids, more } = await jobItems(store, item.job.key, MORE_ITEMS + 1);
  const others = ids.filter((id) => id !== item.id);
  return { ids: others.slice(0, MORE_ITEMS), more: more || others.length > MORE_ITEMS };
}

/** "job 3f2a9c… is shared by 3 items; showing the first, docs/a.md": said on stderr beside what `show` prints. */
export function byKeyNote(found: FoundItem): string | null {
  const k = found.byKey;
  if (!k) return null;
  const n = k.items > MORE_ITEMS ? `more than ${MORE_ITEMS}` : String(k.items);
  return k.items === 1
    ? `item ${found.detail.id} (job ${k.key.slice(0, 12)})`
    : `job ${k.key.slice(0, 12)} is shared by ${n} items; showing the first, ${found.detail.id}`;
}

/**
 * An item whose id is a tail of `path` (`docs/a.md` -> `a.md`): ids of documents in a folder are
 * relative to the folder enqueued, and a newcomer gives the path as typed then. Null when none is.
 */
export async function itemOfPath(store: Pick<QueueReader, 'item'>, path: string): Promise<ItemDetail | null> {
  const parts = path.replace(/^\.\//, '').split('/');
  for (let i = 1; i < parts.length && i <= 8; i++) {
    const detail = await store.item(parts.slice(i).join('/'));
    if (detail) return detail;
  }
  return null;
}

/** Extensions tried after an id given without one (`n1` for `n1.txt`): those of the text files folders hold most. */
const USUAL_EXTENSIONS = ['.txt', '.md', '.markdown', '.html', '.htm', '.json', '.csv', '.xml', '.rst', '.tex', '.log', '.yaml', '.yml'];

/**
 * An item whose id is `id` and a usual extension (`n1` -> `n1.txt`): ids of files keep their
 * extension, which a newcomer leaves off. Null when `id` has an extension already, or none is found.
 */
export async function itemWithExtension(store: Pick<QueueReader, 'item'>, id: string): Promise<ItemDetail | null> {
  if (/\.[^/]*$/.test(id)) return null;
  for (const ext of USUAL_EXTENSIONS) {
    const detail = await store.item(id + ext);
    if (detail) return detail;
  }
  return null;
}

/** Past this many items (by input order's span), an id is not looked for in subfolders: a scan of them all. */
const MOST_ITEMS_SCANNED = 2_000_000;

/**
 * The item an id that names none is likely a slip for: a path given from outside the folder
 * enqueued (`notes/a.txt` for `a.txt`), an id without its extension (`a` for `a.txt`), in another
 * case (`t00001` for `T00001`), or a file's
 * name without the subfolder it is in (`n4.txt` for `sub/n4.txt`; the first of several, said so).
 */
export async function slipFor(
  store: Pick<QueueReader, 'item' | 'itemsEndingIn' | 'itemSeqSpan'>,
  id: string,
): Promise<{ id: string; source: string; why: string; several?: boolean } | null> {
  // `./b.txt` is `b.txt` typed as a path: that item first, and the rest looked for without the `./`
  const bare = id.replace(/^(\.\/)+/, '');
  if (bare === '') return null;
  const same = bare !== id ? await store.item(bare) : null;
  if (same) return { id: same.id, source: same.source, why: 'Ids do not start with ./' };
  const tail = bare.includes('/') ? await itemOfPath(store, bare) : null;
  if (tail) return { id: tail.id, source: tail.source, why: 'Ids of files are relative to the folder enqueued' };
  const extended = await itemWithExtension(store, bare);
  if (extended) return { id: extended.id, source: extended.source, why: 'Ids of files keep their extension' };
  // `t00001` for `T00001`: two lookups, not a scan
  for (const cased of new Set([bare.toUpperCase(), bare.toLowerCase()])) {
    const other = cased === bare ? null : await store.item(cased);
    if (other) return { id: other.id, source: other.source, why: 'Ids are case-sensitive' };
  }
  // `résumé.txt` typed (NFC) for a file named on macOS (NFD), or the other way: the same letters, other code points
  for (const form of new Set([bare.normalize('NFC'), bare.normalize('NFD')])) {
    const other = form === bare ? null : await store.item(form);
    if (other)
      return { id: other.id, source: other.source, why: 'Its name is spelled with other Unicode code points (NFD, as macOS writes names)' };
  }
  const span = await store.itemSeqSpan();
  if (span === null || span.last - span.first > MOST_ITEMS_SCANNED) return null;
  const deeper = await store.itemsEndingIn(bare, 2);
  if (deeper.length === 0) return null;
  return { id: deeper[0]!.id, source: deeper[0]!.source, why: 'Ids of files in subfolders name them', several: deeper.length > 1 };
}
