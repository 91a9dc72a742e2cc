import { beforeEach, describe, expect, it } from 'vitest';
import { STORE_KINDS, T0, skipUnavailable } from './helpers/stores.js';

// Store.keepRejections, for every store kind: what the last enqueue of each input rejected, kept
// until an enqueue reads that input again, and read back by status.

describe.each(STORE_KINDS)('store contract: rejections kept [$name]', (kind) => {
  beforeEach((ctx) => skipUnavailable(kind, ctx));

  it("an input's rejections replace its earlier ones, one with none clears them, others stay; status reads them newest first", async () => {
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
      {
        source: 'in.jsonl',
        rejected: 250,
        first: [bad, { path: 'in.jsonl', line: 3, reason: 'no "text" field\n(it has "id")' }],
        at: T0 + 1,
      },
      { source: 'notes', rejected: 1, first: [bin], at: T0 },
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

  it('keeps the 100 inputs enqueued last; an input named twice in one call is one row, the later', async () => {
    const { store } = await kind.fresh();
    const one = (source: string, at: number) => ({ source, rejected: 1, first: [{ path: source, reason: 'binary file' }], at });
    await store.keepRejections(Array.from({ length: 101 }, (_, i) => one(`f${String(i).padStart(3, '0')}.bin`, T0 + i)));
    const kept = (await store.status()).rejected;
    expect(kept).toHaveLength(100);
    expect([kept[0]!.source, kept.at(-1)!.source]).toEqual(['f100.bin', 'f001.bin']);
    await store.keepRejections([one('twice', T0 + 200), { ...one('twice', T0 + 200), rejected: 7 }]);
    expect((await store.status()).rejected[0]).toMatchObject({ source: 'twice', rejected: 7 });
  });

  it('forget --source clears the lists of that input and of the inputs inside it, not of one that only starts alike', async () => {
    const { store } = await kind.fresh();
    const one = (source: string) => ({ source, rejected: 1, first: [{ path: `${source}/x.bin`, reason: 'binary file' }], at: T0 });
    await store.keepRejections([one('notes'), one('notes/2019'), one('notesmore'), one('data.jsonl')]);
    // a dry run changes nothing
    await store.forgetItems({ source: 'notes' }, { now: T0, dryRun: true });
    expect((await store.status()).rejected).toHaveLength(4);
    await store.forgetItems({ source: 'notes' }, { now: T0 });
    expect((await store.status()).rejected.map((r) => r.source)).toEqual(['data.jsonl', 'notesmore']);
  });
});
