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
  /** Items. */
  readonly count: number;
  /** Their jobs' states. */
  readonly states: Readonly<Partial<Record<JobState, number>>>;
  /** The files they are of (of those this enqueue read to their end). */
  readonly files: number;
  /** The first ids (MOVED_IDS_LISTED), by file and line. */
  readonly ids: readonly string[];
}

/** Ids of `movedLines` listed, at most. */
export const MOVED_IDS_LISTED = 1000;

const PAGE = 1000;

/**
 * Of the items named by their line in each of `files` (JSONL files this enqueue read to their end,
 * as their items' sources spell them), those this enqueue did not read (`read`). Along the items'
 * id index (`lineItemIds`).
 */
export async function movedLines(
  store: Pick<QueueReader, 'lineItemIds' | 'itemStates'>,
  files: readonly string[],
  read: (id: string) => boolean,
  signal?: AbortSignal,
): Promise<MovedLines | null> {
  const moved: string[] = [];
  let from = 0;
  for (const file of new Set(files)) {
    const before = moved.length;
    for (let after = ''; ; ) {
      if (signal?.aborted) return null; // stopped: nothing is said of what was not looked at
      const ids = await store.lineItemIds(file, PAGE, after);
      for (const id of ids) if (!read(id)) moved.push(id);
      if (ids.length < PAGE) break;
      after = ids.at(-1)!;
    }
    if (moved.length > before) from++;
  }
  if (moved.length === 0) return null;
  const states = countStates(await store.itemStates(moved));
  // by line, not as the index has them (`m.jsonl:10` before `m.jsonl:9`)
  const line = (id: string) => Number(id.slice(id.lastIndexOf(':') + 1));
  const listed = moved.sort((a, b) => line(a) - line(b)).slice(0, MOVED_IDS_LISTED);
  return { count: moved.length, states, files: from, ids: listed };
}
