import { retryTransient } from '../store/transient.js';
import type { RunStore } from './run-queue.js';

/**
 * The run's store with the calls that work the queue asked again after a transient failure
 * (`retryTransient`: SQLite busy past its timeout, PostgreSQL refusing connections), so a long
 * enqueue or a database restart is waited out instead of ending the run. Three are not, and go
 * straight to the store: the heartbeat (on a timer: the next beat is its retry, and a beat held back
 * a minute would let the run's leases lapse), and the lane limits, saved on the heartbeat's beat and
 * read once at the start, both best effort.
 */
export function retryingTransients(store: RunStore): RunStore {
  const again =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    (...args: A): Promise<R> =>
      retryTransient(() => call(...args));
  // Calls that may run twice, asked again after a lost connection too (isConnectionLost): reads,
  // and writes that come out the same the second time. A claim that committed unseen leaves its
  // jobs leased to this run, which releases them when it ends: waited for, never sent twice.
  const evenAfterLoss =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    (...args: A): Promise<R> =>
      retryTransient(() => call(...args), { alsoAfterLoss: true });
  return {
    claim: evenAfterLoss((o) => store.claim(o)),
    startRetry: again((key, owner, now, leaseUntil) => store.startRetry(key, owner, now, leaseUntil)),
    complete: again((key, completion) => store.complete(key, completion)),
    recordAttempt: again((attempt, o) => store.recordAttempt(attempt, o)),
    fail: again((key, owner, error, attempt, now) => store.fail(key, owner, error, attempt, now)),
    release: evenAfterLoss((owner, o) => store.release(owner, o)),
    nextPendingAt: evenAfterLoss(() => store.nextPendingAt()),
    startRun: again((run) => store.startRun(run)),
    heartbeat: (runId, now, leaseUntil, stats) => store.heartbeat(runId, now, leaseUntil, stats),
    finishRun: evenAfterLoss((runId, now, reason, stats) => store.finishRun(runId, now, reason, stats)),
    activeRuns: evenAfterLoss(() => store.activeRuns()),
    reclaim: evenAfterLoss((now, deadOwners) => store.reclaim(now, deadOwners)),
    reserve: again((request) => store.reserve(request)),
    unreserve: again((runId, usd, now) => store.unreserve(runId, usd, now)),
    committed: evenAfterLoss((runId) => store.committed(runId)),
    saveLaneLimits: (row) => store.saveLaneLimits(row),
    laneLimits: () => store.laneLimits(),
    status: evenAfterLoss(() => store.status()),
  };
}
