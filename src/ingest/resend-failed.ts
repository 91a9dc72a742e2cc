import { canonicalJson, jobKey } from '../request.js';
import type { EnqueueRow, FailedJobCursor, FailedJobToResend, JobQueue, QueueReader, RetryFailedFilter } from '../store/types.js';
import { requestedCompletionTokens } from '../provider/tokens.js';
import { completionLimitField } from './completion-limit.js';
import { CUT_OFF_TEXT } from '../provider/finish.js';

/** Failed jobs read and enqueued again at a time. */
const PAGE = 500;

export interface ResentFailed {
  /** Failed jobs whose items now wait on a request with the new limit. */
  readonly jobs: number;
  /** Their items, moved to those requests. */
  readonly items: number;
  /** Failed jobs whose request already had that limit or more: left failed (sent again, they would end the same way). */
  readonly alreadyAt: number;
  /**
   * Of `jobs`, those whose new request was queued already (another item's): their items joined its
   * job, answered or waiting (or failed, left as it is).
   */
  readonly joined: number;
}

/**
 * The failed jobs the filter takes, their items enqueued again with the request's completion limit
 * set to `maxTokens`: answers cut off at max_tokens (a JSON answer then fails) are asked again with
 * room, and only those. Enqueueing the documents again with a higher --max-tokens moved every item
 * of a folder to a new request, and the next run paid for all of them again. Each item moves to its
 * new job as an enqueue moves it (a job of that request already answered answers it), and the failed
 * job no item needs any more is dropped, what its billed tries cost carried to the new job in the
 * same transaction (the queue's cost in status keeps it, a crash or not).
 */
export async function resendFailedWithMaxTokens(
  store: Pick<JobQueue, 'enqueue'> & Pick<QueueReader, 'failedJobsToResend'>,
  filter: RetryFailedFilter,
  maxTokens: number,
  now: number,
): Promise<ResentFailed> {
  return resendWithMaxTokens(store, maxTokens, now, async (after) => {
    const jobs = await store.failedJobsToResend(filter, after, PAGE);
    return { jobs, last: jobs.at(-1) ?? null };
  });
}

/**
 * The done jobs whose answer was cut off at max_tokens (kept as done: a plain text cut short), sent
 * again as `resendFailedWithMaxTokens` sends failed ones: their items move to the request with more
 * room, the cut-off answers stay kept (paid for; no item needs them now). Enqueueing just their
 * documents again made a second item of a file in a subfolder (its id is its path in the folder
 * enqueued), and left the cut-off answer as the first's.
 */
export async function resendCutOffAnswers(
  store: Pick<JobQueue, 'enqueue'> & Pick<QueueReader, 'cutOffAnswersToResend'>,
  maxTokens: number,
  now: number,
): Promise<ResentFailed> {
  return resendWithMaxTokens(store, maxTokens, now, (after) => store.cutOffAnswersToResend(after, PAGE));
}

async function resendWithMaxTokens(
  store: Pick<JobQueue, 'enqueue'>,
  maxTokens: number,
  now: number,
  pageAfter: (after: FailedJobCursor | null) => Promise<{ jobs: readonly FailedJobToResend[]; last: FailedJobCursor | null }>,
): Promise<ResentFailed> {
  let jobs = 0;
  let items = 0;
  let alreadyAt = 0;
  let joined = 0;
  let after: FailedJobCursor | null = null;
  for (;;) {
    const { jobs: page, last } = await pageAfter(after);
    if (last === null) break;
    after = last;
    const rows: EnqueueRow[] = [];
    for (const job of page) {
      // never lowered: asked again with as much room or less, it would end the same way
      // no item needs it (a cut-off answer whose documents moved on): nothing to send again
      if (job.items.length === 0) continue;
      if (requestedCompletionTokens(JSON.parse(job.request)) >= maxTokens) {
        alreadyAt++;
        continue;
      }
      const request = withMaxTokens(job.request, job.model, maxTokens);
      const key = jobKey(request);
      jobs++;
      items += job.items.length;
      for (const item of job.items) {
        // not positional: the item is moved on purpose, whatever stream it came from; and an enqueue
        // computing the cut-off request again later keeps it here (src/store/superseded.ts)
        rows.push({
          itemId: item.id,
          source: item.source,
          meta: item.meta,
          key,
          request,
          model: job.model,
          priority: job.priority,
          // remembered for a cut-off answer only: an enqueue then says the old request's answers were cut off
          ...(job.error === null || job.error.includes(CUT_OFF_TEXT) ? { supersedes: job.key } : {}),
        });
      }
    }
    if (rows.length > 0) {
      const result = await store.enqueue(rows, now);
      // a request of that limit queued already (another item's): the items joined its job
      joined += Math.max(0, new Set(rows.map((r) => r.key)).size - result.newJobs);
    }
  }
  return { jobs, items, alreadyAt, joined };
}

/**
 * `request` (canonical JSON) with its completion limit set to `maxTokens`: the field it has
 * (`max_tokens` or `max_completion_tokens`), else the one its model takes. The rest stays byte for
 * byte, so a schema keeps the order of its fields (canonical JSON would sort them, and a strict
 * answer writes its fields in the schema's order).
 */
export function withMaxTokens(request: string, model: string, maxTokens: number): string {
  const body = JSON.parse(request) as Record<string, unknown>;
  // the field the limit is read from (`requestedCompletionTokens`: max_tokens first)
  const field =
    'max_tokens' in body ? 'max_tokens' : 'max_completion_tokens' in body ? 'max_completion_tokens' : completionLimitField(model);
  if (field in body) {
    // in canonical JSON the top-level field is its first occurrence (keys before it sort before
    // "max_"; none of them holds objects with such keys): checked, not assumed
    const was = `"${field}":${JSON.stringify(body[field])}`;
    const at = request.indexOf(was);
    if (at >= 0) {
      const changed = `${request.slice(0, at)}"${field}":${maxTokens}${request.slice(at + was.length)}`;
      const check = JSON.parse(changed) as Record<string, unknown>;
      if (check[field] === maxTokens && canonicalJson({ ...check, [field]: body[field] }) === canonicalJson(body)) return changed;
    }
  }
  return canonicalJson({ ...body, [field]: maxTokens });
}
