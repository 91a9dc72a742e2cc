import { lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { keysetPages } from '../store/pages.js';
import type { JobState, QueueReader } from '../store/types.js';
import { countStates } from './types.js';

/**
 * Items an earlier walk of a folder made whose file is not there now (`EnqueueSummary.goneFiles`).
 * Enqueue adds and changes items, never removes them: without a word, `llmq run` sends the
 * document of a file the user deleted, and export gives its answer beside the folder's others.
 */
export interface GoneFiles {
  /** Items (a file gone is one item). */
  readonly count: number;
  /** Their jobs' states: `pending` and `running` ones are still sent, `done` ones still exported. */
  readonly states: Readonly<Partial<Record<JobState, number>>>;
  /** The first, in input order: the folder as its items' sources spell it, and the item's id (its path in that folder). */
  readonly first: { readonly folder: string; readonly id: string };
  /** The folders they are from (of those this enqueue walked). */
  readonly folders: number;
  /** The first ids (GONE_IDS_LISTED), in input order. */
  readonly ids: readonly string[];
  /** Only the first MAX_GONE_LOOKED_AT items this enqueue did not read were looked for on disk. */
  readonly partial: boolean;
}

/** A folder this enqueue walked to its end. */
export interface WalkedFolder {
  /** The path to read it by. */
  readonly path: string;
  /** As its items' sources spell it (`sourcePath`). */
  readonly shown: string;
}

/** Ids of `goneFiles` listed, at most. */
export const GONE_IDS_LISTED = 1000;

/**
 * Items not read by this enqueue looked for on disk, at most: a narrower --glob than the last
 * enqueue's leaves every file it no longer matches unread, each one a look at the disk.
 */
export const MAX_GONE_LOOKED_AT = 100_000;

/** Items read in one page of the scan. */
const PAGE = 1000;

/**
 * Of the items earlier walks of `folders` made, those whose file is gone: not read by this enqueue
 * (`read` says which ids it read) and not on disk. A file still there that this walk did not read
 * (left out by --glob or as hidden) is the user's choice, not gone. Scans the queue's items once
 * per folder (about 0.2 s per million items).
 */
export async function goneFiles(
  store: Pick<QueueReader, 'folderItems' | 'itemStates'>,
  folders: readonly WalkedFolder[],
  read: (id: string) => boolean,
  signal?: AbortSignal,
): Promise<GoneFiles | null> {
  const gone: Array<{ folder: string; id: string }> = [];
  const looked = new Set<string>();
  let lookedAt = 0;
  let partial = false;
  for (const folder of folders) {
    if (looked.has(folder.shown)) continue; // named twice
    looked.add(folder.shown);
    const items = keysetPages((after, size) => store.folderItems(folder.shown, size, after as number), 'seq', PAGE);
    for await (const { id } of items) {
      if (signal?.aborted) return null; // stopped: nothing is said of what was not looked at
      if (read(id)) continue;
      if (lookedAt >= MAX_GONE_LOOKED_AT) {
        partial = true;
        break;
      }
      lookedAt++;
      if (await isGone(join(folder.path, id))) gone.push({ folder: folder.shown, id });
    }
  }
  if (gone.length === 0) return null;
  const states = countStates(await store.itemStates(gone.map((g) => g.id)));
  const goneFrom = new Set(gone.map((g) => g.folder)).size;
  return { count: gone.length, states, first: gone[0]!, folders: goneFrom, ids: gone.slice(0, GONE_IDS_LISTED).map((g) => g.id), partial };
}

/** Nothing at `path`, or a file where its folder should be. A dangling link is there: the walk said what was wrong with it. */
async function isGone(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return false;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR';
  }
}
