import type { EnqueueRow } from './types.js';

/**
 * A request that `retry-failed --max-tokens` superseded (its answers were cut off at its max_tokens,
 * and its items went to the same request with more room), and the one that superseded it.
 *
 * A later enqueue of the same documents with the same options computes the old request again: it
 * moved the items back to it, byte for byte the request that was cut off and billed, and the next run
 * paid for the same cut-off answers again while the good ones went unused. So an enqueue row whose
 * request was superseded goes to the superseding one instead (`EnqueueResult.keptRaised`). Only that
 * exact request: a changed document or option is a request of its own.
 */
export interface Superseding {
  readonly key: string;
  readonly request: string;
}

/**
 * `rows` with each row whose key `superseding` names moved to its superseding request, and how many
 * were. A row that itself supersedes (retry-failed's own) is left as it is.
 */
export function withSuperseding(
  rows: readonly EnqueueRow[],
  superseding: ReadonlyMap<string, Superseding>,
): { rows: readonly EnqueueRow[]; kept: number } {
  if (superseding.size === 0) return { rows, kept: 0 };
  let kept = 0;
  const out = rows.map((r) => {
    const by = r.supersedes === undefined ? superseding.get(r.key) : undefined;
    if (by === undefined) return r;
    kept++;
    return { ...r, key: by.key, request: by.request };
  });
  return { rows: out, kept };
}
