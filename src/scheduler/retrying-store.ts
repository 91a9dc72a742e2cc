import { type DiskFullWait, retryTransient } from '../store/transient.js';
import type { RunStore } from './run-queue.js';

/**
 * The run's store with the calls that work the queue asked again after a transient failure
 * (`retryTransient`: SQLite busy past its timeout, PostgreSQL refusing connections), so a long
 * enqueue or a database restart is waited out instead of ending the run. Three are not, and go
 * straight to the store: the heartbeat (on a timer: the next beat is its retry, and a beat held back
 * a minute would let the run's leases lapse), and the lane limits, saved on the heartbeat's beat and
 * read once at the start, both best effort. With `waits`, the calls that work the queue wait out a
 * full disk as well (see `paid` below).
 */
export function retryingTransients(store: RunStore, waits: { forAnswers?: DiskFullWait; forWork?: DiskFullWait } = {}): RunStore {
  const again =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    (...args: A): Promise<R> =>
      retryTransient(() => call(...args));
  // Writes of what was paid for (an answer, a try's record and money) wait out a full disk until the
  // run quits at once; a claim waits until the run stops: nothing new is taken meanwhile.
  const paid =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    (...args: A): Promise<R> =>
      retryTransient(() => call(...args), { diskFull: waits.forAnswers });
  // Calls that may run twice, asked again after a lost connection too (isConnectionLost): reads,
  // and writes that come out the same the second time. A claim that committed unseen leaves its
  // jobs leased to this run, which releases them when it ends: waited for, never sent twice.
  const evenAfterLoss =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    (...args: A): Promise<R> =>
      retryTransient(() => call(...args), { alsoAfterLoss: true });
  return {
    claim: (o) => retryTransient(() => store.claim(o), { alsoAfterLoss: true, diskFull: waits.forWork }),
    startRetry: paid((key, owner, now, leaseUntil) => store.startRetry(key, owner, now, leaseUntil)),
    complete: paid((key, completion) => store.complete(key, completion)),
    recordAttempt: paid((attempt, o) => store.recordAttempt(attempt, o)),
    fail: paid((key, owner, error, attempt, now) => store.fail(key, owner, error, attempt, now)),
    // a job handed back while the disk is full (its lease lapsed in the wait) waits for space with the claims
    release: (owner, o) => retryTransient(() => store.release(owner, o), { alsoAfterLoss: true, diskFull: waits.forWork }),
    nextPendingAt: evenAfterLoss(() => store.nextPendingAt()),
    startRun: again((run) => store.startRun(run)),
    heartbeat: (runId, now, leaseUntil, stats) => store.heartbeat(runId, now, leaseUntil, stats),
    finishRun: evenAfterLoss((runId, now, reason, stats) => store.finishRun(runId, now, reason, stats)),
    activeRuns: evenAfterLoss(() => store.activeRuns()),
    reclaim: evenAfterLoss((now, deadOwners) => store.reclaim(now, deadOwners)),
    reserve: (request) => retryTransient(() => store.reserve(request), { diskFull: waits.forWork }),
    unreserve: paid((runId, usd, now) => store.unreserve(runId, usd, now)),
    committed: evenAfterLoss((runId) => store.committed(runId)),
    saveLaneLimits: (row) => store.saveLaneLimits(row),
    laneLimits: () => store.laneLimits(),
    status: evenAfterLoss(() => store.status()),
  };
}
