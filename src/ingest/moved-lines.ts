import type { JobState, QueueReader } from '../store/types.js';
import { countStates } from './types.js';

/**
 * Items named by their line in a JSONL file (`file:N`, a line without an id) whose line is no line
 * without an id now (`EnqueueSummary.movedLines`): a line added or taken out above it moved the
 * lines after it, and each of those documents is under its new `file:N` now, while the old item
 * keeps it too (export gives it twice, a run sends what only the old item holds). Enqueue adds and
 * changes items, never removes them: it says so, with the `llmq forget` that takes them out.
 */
export interface MovedLines {
  /** Items (of the first MAX_MOVED_LOOKED_AT of the files' items named by their line, when `partial`). */
  readonly count: number;
  /** Their jobs' states. */
  readonly states: Readonly<Partial<Record<JobState, number>>>;
  /** The files they are of (of those this enqueue read). */
  readonly files: number;
  /** The first ids (MOVED_IDS_LISTED), by file and line. */
  readonly ids: readonly string[];
  /** Only the first MAX_MOVED_LOOKED_AT items not read again were counted. */
  readonly partial: boolean;
}

/** Ids of `movedLines` listed, at most. */
export const MOVED_IDS_LISTED = 1000;

/** Items not read again counted, at most: a file whose every line was given an id leaves all of them. */
export const MAX_MOVED_LOOKED_AT = 100_000;

const PAGE = 1000;

/**
 * Of the items named by their line in each of `files` (JSONL files whose lines this enqueue read, as
 * their items' sources spell them), those it did not read again (`read`: read, or rejected now,
 * which is said apart). A range of the items' id index per file (`lineItemIds`).
 */
export async function movedLines(
  store: Pick<QueueReader, 'lineItemIds' | 'itemStates'>,
  files: readonly string[],
  read: (id: string) => boolean,
  signal?: AbortSignal,
): Promise<MovedLines | null> {
  const moved: string[] = [];
  let from = 0;
  let partial = false;
  for (const file of new Set(files)) {
    const ofFile: string[] = [];
    for (let after = ''; !partial; ) {
      if (signal?.aborted) return null; // stopped: nothing is said of what was not looked at
      const ids = await store.lineItemIds(file, PAGE, after);
      for (const id of ids) {
        if (read(id)) continue;
        if (moved.length + ofFile.length >= MAX_MOVED_LOOKED_AT) {
          partial = true;
          break;
        }
        ofFile.push(id);
      }
      if (ids.length < PAGE) break;
      after = ids.at(-1)!;
    }
    if (ofFile.length === 0) continue;
    from++;
    // by line, not as the index has them (`m.jsonl:10` before `m.jsonl:9`)
    const line = (id: string) => Number(id.slice(file.length + 1));
    moved.push(
      ...ofFile
        .map((id) => ({ id, n: line(id) }))
        .sort((a, b) => a.n - b.n)
        .map((x) => x.id),
    );
  }
  if (moved.length === 0) return null;
  const states = countStates(await store.itemStates(moved));
  return { count: moved.length, states, files: from, ids: moved.slice(0, MOVED_IDS_LISTED), partial };
}
