import { type DiskFullWait, type RetryTransientOptions, retryTransient, type TransientWait } from '../store/transient.js';
import type { RunStore } from './run-queue.js';

/**
 * The run's store with the calls that work the queue asked again after a transient failure
 * (`retryTransient`: SQLite busy past its timeout, PostgreSQL refusing connections), so a long
 * enqueue or a database restart is waited out instead of ending the run. Three are not, and go
 * straight to the store: the heartbeat (on a timer: the next beat is its retry, and a beat held back
 * a minute would let the run's leases lapse), and the lane limits, saved on the heartbeat's beat and
 * read once at the start, both best effort. With `waits`, the calls that work the queue wait out a
 * full disk as well (see `paid` and `work` below).
 */
export function retryingTransients(
  store: RunStore,
  waits: { forAnswers?: DiskFullWait; forWork?: DiskFullWait; forStore?: TransientWait } = {},
): RunStore {
  /** `call`, asked again as `retryTransient` does with options `o`. */
  const retried = (o: RetryTransientOptions) => {
    // once per kind of call, not per call: claims and answers go through here for every job
    const options: RetryTransientOptions = { ...o, transient: waits.forStore };
    return <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
      (...args: A): Promise<R> =>
        retryTransient(() => call(...args), options);
  };
  const again = retried({});
  // Calls that may run twice, asked again after a lost connection too (isConnectionLost): reads,
  // and writes that come out the same the second time. A claim that committed unseen leaves its
  // jobs leased to this run, which releases them when it ends: waited for, never sent twice.
  const evenAfterLoss = retried({ alsoAfterLoss: true });
  // Writes of what was paid for (an answer, a try's record and money) wait out a full disk until the
  // run quits at once. Claims, reservations and hand-backs wait until the run stops: nothing new is
  // taken meanwhile, and a job handed back (its lease lapsed in the wait) waits with the claims.
  const paid = retried({ diskFull: waits.forAnswers });
  const work = retried({ diskFull: waits.forWork });
  const workEvenAfterLoss = retried({ alsoAfterLoss: true, diskFull: waits.forWork });
  return {
    claim: workEvenAfterLoss((o) => store.claim(o)),
    startRetry: paid((key, owner, now, leaseUntil) => store.startRetry(key, owner, now, leaseUntil)),
    complete: paid((key, completion) => store.complete(key, completion)),
    recordAttempt: paid((attempt, o) => store.recordAttempt(attempt, o)),
    fail: paid((key, owner, error, attempt, now) => store.fail(key, owner, error, attempt, now)),
    release: workEvenAfterLoss((owner, o) => store.release(owner, o)),
    nextPendingAt: evenAfterLoss(() => store.nextPendingAt()),
    // once per mock run (it marks them): asked again, it takes back nothing more
    takeBackMockAnswers: evenAfterLoss((now, quietSince) => store.takeBackMockAnswers(now, quietSince)),
    startRun: again((run) => store.startRun(run)),
    heartbeat: (runId, now, leaseUntil, stats, unsent) => store.heartbeat(runId, now, leaseUntil, stats, unsent),
    finishRun: evenAfterLoss((runId, now, reason, stats) => store.finishRun(runId, now, reason, stats)),
    activeRuns: evenAfterLoss(() => store.activeRuns()),
    reclaim: evenAfterLoss((now, deadOwners, spared) => store.reclaim(now, deadOwners, spared)),
    reserve: work((request) => store.reserve(request)),
    unreserve: paid((runId, usd, now) => store.unreserve(runId, usd, now)),
    committed: evenAfterLoss((runId) => store.committed(runId)),
    saveLaneLimits: (row) => store.saveLaneLimits(row),
    laneLimits: () => store.laneLimits(),
    status: evenAfterLoss(() => store.status()),
    // for the progress only: a failed read shows this run's own
    stateCounts: () => store.stateCounts(),
    // for a failure's line only: a failed read names the job by its key
    itemsByKeyPrefix: (prefix, limit) => store.itemsByKeyPrefix(prefix, limit),
    batches: { open: evenAfterLoss(() => store.batches.open()) },
  };
}
