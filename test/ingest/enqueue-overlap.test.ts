import { describe, expect, it } from 'vitest';
import type { EnqueueResult, EnqueueRow } from '../../src/store/types.js';
import { count, run, tempStore } from './helpers.js';

// A store that writes elsewhere (PostgreSQL) writes one batch while the next is read: the batches
// still go in one at a time and in order, and a failure on either side is reported as before.

const line = (i: number) => `${JSON.stringify({ id: `d${i}`, text: `document ${i}` })}\n`;

/** A promise and the function that settles it, for waiting on an event. */
function latch(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

/** The SQLite store, its enqueue made to wait for `gate` first (as a remote store's would for the network). */
function slowStore(gate: (call: number) => Promise<void>) {
  const store = tempStore();
  const real = store.enqueue.bind(store);
  let calls = 0;
  store.enqueue = async (rows: readonly EnqueueRow[], now: number): Promise<EnqueueResult> => {
    await gate(++calls);
    return real(rows, now);
  };
  return store;
}

describe('enqueue overlaps reading with writing', () => {
  it('reads the next batch while the store writes the last one', { timeout: 10_000 }, async () => {
    const nextBatchRead = latch();
    // the first write finishes only once the reader has gone on to the second batch: without the overlap this never happens
    const store = slowStore((call) => (call === 1 ? nextBatchRead.promise : Promise.resolve()));
    async function* stdin() {
      for (let i = 0; i < 6; i++) {
        if (i === 3) nextBatchRead.open();
        yield line(i);
      }
    }
    const s = await run(store, ['-'], { stdin: stdin(), batchRows: 2 });
    expect(s).toMatchObject({ documents: 6, newItems: 6, newJobs: 6, batches: 3 });
    expect(store.db.prepare('SELECT id FROM items ORDER BY seq').pluck().all()).toEqual(['d0', 'd1', 'd2', 'd3', 'd4', 'd5']);
  });

  it('reports a failed write while the next batch is read', async () => {
    const store = tempStore();
    store.enqueue = async () => {
      throw new Error('the database went away');
    };
    async function* stdin() {
      for (let i = 0; i < 6; i++) yield line(i);
    }
    await expect(run(store, ['-'], { stdin: stdin(), batchRows: 2 })).rejects.toThrow('the database went away');
  });

  it('finishes the write in flight before reporting a failure, so what came before the failure is kept', async () => {
    const readFailed = latch();
    let writing = false;
    // the first write goes on only a turn of the event loop after the failure
    const store = slowStore(() => {
      writing = true;
      return readFailed.promise.then(() => new Promise((resolve) => setImmediate(resolve)));
    });
    async function* stdin() {
      for (let i = 0; i < 6; i++) yield line(i);
    }
    // what the CLI's wait for stderr to drain would throw
    const backpressure = () => {
      if (!writing) return;
      readFailed.open();
      throw new Error('stderr broke');
    };
    await expect(run(store, ['-'], { stdin: stdin(), batchRows: 2, backpressure })).rejects.toThrow('stderr broke');
    expect(count(store, 'items')).toBe(2);
  });
});
