import { describe, expect, it } from 'vitest';
import { retryTransient } from '../src/store/transient.js';

const coded = (code: string) => Object.assign(new Error(code), { code });

/** A call that fails with each of `failures` in turn (as the store would), then answers "stored". */
function failingThen(failures: string[]) {
  let calls = 0;
  const call = async () => {
    const failure = failures[calls++];
    if (failure) throw coded(failure);
    return 'stored';
  };
  return { call, calls: () => calls };
}

describe('retryTransient waiting out a full disk', () => {
  it('asks again once space is back even past its time for transient failures, and says waiting and done once each', async () => {
    // the disk stays full past forMs; the first try after it meets a moment's lock, as every writer that waited asks at once
    const { call, calls } = failingThen(['SQLITE_FULL', 'SQLITE_BUSY']);
    const told: string[] = [];
    const diskFull = {
      waiting: () => told.push('waiting'),
      doneWaiting: (stored: boolean) => told.push(`done ${stored}`),
      givenUp: new AbortController().signal,
    };
    expect(await retryTransient(call, { forMs: 500, diskFull })).toBe('stored');
    expect(calls()).toBe(3);
    expect(told).toEqual(['waiting', 'done true']);
  }, 10_000);

  it('throws a full disk at once without a waiter, and when the waiter has given up', async () => {
    await expect(retryTransient(failingThen(['SQLITE_FULL']).call)).rejects.toThrow('SQLITE_FULL');
    const quit = new AbortController();
    quit.abort();
    const told: string[] = [];
    const diskFull = { waiting: () => told.push('waiting'), doneWaiting: (s: boolean) => told.push(`done ${s}`), givenUp: quit.signal };
    await expect(retryTransient(failingThen(['SQLITE_FULL']).call, { diskFull })).rejects.toThrow('SQLITE_FULL');
    expect(told).toEqual([]);
  });
});
