import { beforeEach, describe, expect, it } from 'vitest';
import { STORE_KINDS, T0, skipUnavailable } from './helpers/stores.js';

// Store.keepRejections, for every store kind: what the last enqueue of each input rejected, kept
// until an enqueue reads that input again, and read back by status.

describe.each(STORE_KINDS)('store contract: rejections kept [$name]', (kind) => {
  beforeEach((ctx) => skipUnavailable(kind, ctx));

  it("an input's rejections replace its earlier ones, one with none clears them, others stay; status reads them oldest first", async () => {
    const { store, openAnother } = await kind.fresh();
    expect((await store.status()).rejected).toEqual([]);
    const bad = { path: 'in.jsonl', line: 2, reason: 'malformed JSON (Unterminated string)' };
    const bin = { path: 'notes/x.bin', reason: 'binary file (contains NUL bytes)' };
    await store.keepRejections([
      { source: 'notes', rejected: 1, first: [bin], at: T0 },
      // an id, a reason with a quote and a newline, a path beyond ASCII: kept as given
      {
        source: 'in.jsonl',
        rejected: 250,
        first: [bad, { path: 'in.jsonl', line: 3, reason: 'no "text" field\n(it has "id")' }],
        at: T0 + 1,
      },
      { source: 'ok.jsonl', rejected: 0, first: [], at: T0 + 2 },
    ]);
    expect((await store.status()).rejected).toEqual([
      { source: 'notes', rejected: 1, first: [bin], at: T0 },
      {
        source: 'in.jsonl',
        rejected: 250,
        first: [bad, { path: 'in.jsonl', line: 3, reason: 'no "text" field\n(it has "id")' }],
        at: T0 + 1,
      },
    ]);
    // in.jsonl enqueued again with one line still bad, notes with none: another process reads the result
    await store.keepRejections([
      { source: 'in.jsonl', rejected: 1, first: [bad], at: T0 + 10 },
      { source: 'notes', rejected: 0, first: [], at: T0 + 10 },
    ]);
    const other = await openAnother();
    expect((await other.status()).rejected).toEqual([{ source: 'in.jsonl', rejected: 1, first: [bad], at: T0 + 10 }]);
    await other.keepRejections([]);
    await other.keepRejections([{ source: 'in.jsonl', rejected: 0, first: [], at: T0 + 20 }]);
    expect((await store.status()).rejected).toEqual([]);
  });
});
