import { describe, expect, it } from 'vitest';
import { StoreWaitNotice } from '../src/scheduler/store-wait-notice.js';

const failure = (code?: string) => Object.assign(new Error('x'), code ? { code } : {});

/** A notice of a run whose lease is a minute, and what it said. */
function notice() {
  const said: string[] = [];
  return { said, wait: new StoreWaitNotice((m) => said.push(m), 30_000).wait };
}

describe('StoreWaitNotice: waits on a locked or unreachable database said once, and their end', () => {
  it('says a wait once however many calls wait, and that it is over once the last is through', () => {
    const { said, wait } = notice();
    wait.waiting(failure('SQLITE_BUSY'));
    wait.waiting(failure('SQLITE_BUSY_SNAPSHOT'));
    wait.doneWaiting(true);
    expect(said).toHaveLength(1);
    wait.doneWaiting(true);
    expect(said).toEqual([expect.stringContaining('locked (SQLITE_BUSY): waiting for it'), "the queue's database answers again."]);
  });

  it('names a PostgreSQL that refuses connections, and a connection lost; a wait that failed after all says no "again"', () => {
    const { said, wait } = notice();
    wait.waiting(failure('57P03'));
    wait.doneWaiting(false);
    wait.waiting(failure());
    wait.doneWaiting(true);
    expect(said).toEqual([
      expect.stringMatching(
        /^the queue's database refuses connections \(57P03\): waiting for it, up to 30s, then the run stops \(what it holds kept\)/,
      ),
      expect.stringMatching(/^the connection to the queue's database was lost: asking again/),
      "the queue's database answers again.",
    ]);
  });

  it('says nothing of a serialization failure or deadlock between runs sharing a PostgreSQL queue (routine, asked again at once)', () => {
    const { said, wait } = notice();
    wait.waiting(failure('40001'));
    wait.waiting(failure('40P01'));
    wait.doneWaiting(true);
    wait.doneWaiting(true);
    expect(said).toEqual([]);
  });

  it('says the database answers again when a call went through, even if the last one to finish gave up', () => {
    const { said, wait } = notice();
    wait.waiting(failure('SQLITE_BUSY'));
    wait.waiting(failure('SQLITE_BUSY'));
    wait.doneWaiting(true);
    wait.doneWaiting(false);
    expect(said).toEqual([expect.stringContaining('locked'), "the queue's database answers again."]);
  });
});
