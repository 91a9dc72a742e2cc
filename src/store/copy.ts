import { StoreError } from '../errors.js';
import { count, utcTime } from '../report/format.js';
import type { BatchLedger, CopyEnds, CopyInProgress, JobQueue, JobRow, LaneMemory, QueueReader, RunRow, StoreIdentity } from './types.js';
import { redactUrlCredentials } from '../url-credentials.js';

export interface CopyOptions {
  /** The copy's clock: runs still open in the source are closed at this time in the target. */
  readonly now: number;
  /**
   * Rows per write transaction; also bounds what is held in memory.
   * @default 1000
   */
  readonly batchSize?: number;
  /** Called after each batch is written, with the table and the rows of it copied so far. */
  readonly onProgress?: (table: CopyTable, copied: number) => void;
  /**
   * Called once the jobs and items are in, before the target finishes them: a SQLite file loaded in
   * bulk builds its key indexes then (minutes at ten million jobs), and every target marks its
   * orphaned answers.
   */
  readonly onFinishing?: (jobs: number, items: number) => void;
}

export type CopyTable = 'jobs' | 'items' | 'attempts' | 'runs';

export interface CopyResult {
  readonly jobs: number;
  readonly items: number;
  readonly attempts: number;
  readonly runs: number;
  /** Rate limits runs learned per (base URL, model). */
  readonly laneLimits: number;
  /** Inputs whose last enqueue rejected documents (`status`'s `rejected`). */
  readonly rejections: number;
  /** Jobs that were `running` in the source and went over as `pending`. */
  readonly requeued: number;
  /** Runs that had not ended in the source and were closed in the target. */
  readonly closedRuns: number;
}

/**
 * Copy a whole queue (jobs with their states, attempts, answers, usage and errors; items;
 * attempts; runs; the rate limits runs learned; what enqueues rejected) from one store into an empty one, of either kind, a batch at a time.
 *
 * A lease belongs to the source's runs, which will never work the target: running jobs arrive
 * pending (their started attempt stays counted, as when a run dies), and open runs arrive ended.
 * Stop runs on the source first; rows written while the copy reads may be missed.
 */
export async function copyStore(
  from: CopyEnds & BatchLedger & Pick<LaneMemory, 'laneLimits'> & Pick<QueueReader, 'status'> & StoreIdentity,
  to: CopyEnds & Pick<QueueReader, 'status'> & Pick<LaneMemory, 'saveLaneLimits'> & Pick<JobQueue, 'keepRejections'> & StoreIdentity,
  options: CopyOptions,
): Promise<CopyResult> {
  const size = options.batchSize ?? 1000;
  const target = await to.status();
  const targetJobs = target.total + target.orphanedAnswers;
  if (targetJobs > 0 || target.items > 0 || target.lastRun !== null) {
    const stopped = await to.copier.copyInProgress();
    if (stopped) throw new StoreError(`${to.location} ${unfinishedCopy(stopped)}`);
    throw new StoreError(
      `${to.location} is not empty (${count(targetJobs, 'job')}, ${count(target.items, 'item')}); llmq copy only writes into an ` +
        `empty queue. Point --to at a new file or a new schema (?schema=name).`,
    );
  }
  await refuseLiveBatches(from);
  // marked until the end: a copy stopped halfway is not taken for a whole queue
  await to.copier.beginCopy(redactUrlCredentials(from.location), options.now);
  let requeued = 0;
  let closedRuns = 0;
  // Jobs before items (items point at jobs); attempts and runs after.
  const jobs = await pipe(
    from.copier.dumpJobs(),
    (b) => to.copier.loadJobs(b),
    size,
    (j): JobRow => {
      if (j.state !== 'running') return j;
      requeued++;
      return { ...j, state: 'pending', leaseOwner: null, leaseExpiresAt: null };
    },
    (n) => options.onProgress?.('jobs', n),
  );
  const items = await pipe(
    from.copier.dumpItems(),
    (b) => to.copier.loadItems(b),
    size,
    (i) => i,
    (n) => options.onProgress?.('items', n),
  );
  options.onFinishing?.(jobs, items);
  await to.copier.markOrphans();
  const attempts = await pipe(
    from.copier.dumpAttempts(),
    (b) => to.copier.loadAttempts(b),
    size,
    (a) => a,
    (n) => options.onProgress?.('attempts', n),
  );
  const runs = await pipe(
    from.copier.dumpRuns(),
    (b) => to.copier.loadRuns(b),
    size,
    (r): RunRow => {
      if (r.endedAt !== null) return r;
      closedRuns++;
      // Closed here, it is never reclaimed there: its requests out now may be billed, as a dead run's are.
      const s = r.spend;
      const spend = s && {
        ...s,
        reservedUsd: 0,
        inFlight: 0,
        mayBeBilledUsd: s.mayBeBilledUsd + s.reservedUsd,
        mayBeBilledTries: s.mayBeBilledTries + s.inFlight,
      };
      return { ...r, endedAt: options.now, exitReason: 'copied to another database while open', spend };
    },
    (n) => options.onProgress?.('runs', n),
  );
  // a handful of rows (one per base URL and model): the copy's first run starts at their pace
  const limits = await from.laneLimits();
  for (const row of limits) await to.saveLaneLimits(row);
  // one row per input whose enqueue rejected documents: the copy's status names them too
  const { rejected } = await from.status();
  await to.keepRejections(rejected);
  // what retry-failed --max-tokens raised: an enqueue of the copy keeps those documents at the raise too
  const superseded = await from.copier.dumpSuperseded();
  for (let i = 0; i < superseded.length; i += 5000) await to.copier.loadSuperseded(superseded.slice(i, i + 5000));
  // the jobs gone unanswered keep what their billed tries cost in the queue's cost (a row per model)
  await to.copier.loadDroppedCosts(await from.copier.dumpDroppedCosts());
  await to.copier.endCopy();
  return { jobs, items, attempts, runs, laneLimits: limits.length, rejections: rejected.length, requeued, closedRuns };
}

/**
 * What a queue that a copy stopped writing is, after its location: it holds part of the source (jobs
 * without their items, answers without their attempts), and would send jobs no item needs.
 */
export function unfinishedCopy(c: CopyInProgress): string {
  return (
    `is a copy of ${c.source} that llmq copy has not finished (started ${utcTime(c.startedAt)}; ` +
    `stopped, or still at work): it holds part of that queue. Copy again into a new database once no copy is ` +
    `at work, and delete this one.`
  );
}

/** Stream rows into batches of `size`, writing each before reading on; returns the count. */
async function pipe<T>(
  rows: AsyncIterable<T>,
  load: (batch: T[]) => Promise<void>,
  size: number,
  map: (row: T) => T,
  progress: (n: number) => void,
): Promise<number> {
  let batch: T[] = [];
  let n = 0;
  const flush = async () => {
    if (!batch.length) return;
    await load(batch);
    n += batch.length;
    batch = [];
    progress(n);
    // a turn of the event loop between batches: a SQLite copy is synchronous, and Ctrl-C (whose
    // handler says what the stopped copy left) was heard only once it had ended
    await new Promise((resolve) => setImmediate(resolve));
  };
  for await (const row of rows) {
    batch.push(map(row));
    if (batch.length >= size) await flush();
  }
  await flush();
  return n;
}

/**
 * Jobs in a live batch would arrive pending in a copy and be sent again while the provider still
 * answers them in the source's batch (the batches table is not copied): such a source is refused,
 * before anything is written (`llmq copy` asks first, so no empty --to is left behind). `said`: what
 * the commands in the message need to reach the source (` --db q.db`) and each batch's endpoint
 * (` --base-url URL`, from the endpoint as the batches record it); without them a pasted command
 * would act on another queue, or collect at another endpoint.
 */
export async function refuseLiveBatches(
  from: BatchLedger & Pick<StoreIdentity, 'location'>,
  said: { readonly db?: string; readonly endpointArguments?: (baseUrl: string) => string } = {},
): Promise<void> {
  const live = await from.batches.open();
  if (live.length > 0) {
    const db = said.db ?? '';
    const collect = [...new Set(live.map((b) => `llmq run --via batch${said.endpointArguments?.(b.baseUrl) ?? ''}${db}`))].join('; ');
    throw new StoreError(
      `${from.location} has ${live.length} batch${live.length === 1 ? '' : 'es'} still live at the provider; ` +
        `collect them first (${collect}) or cancel them (llmq batches cancel${db}, then ${collect}), then copy.`,
    );
  }
}
