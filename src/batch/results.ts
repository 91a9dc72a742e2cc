import { classifyHttpError } from '../provider/classify.js';
import { answerKind } from '../provider/finish.js';
import { parseCompletion } from '../provider/openai.js';
import { checkAnswer, cutOffRoom } from '../provider/structured-output.js';
import { ProviderError, triedError } from '../provider/types.js';
import { exhaustedMessage } from '../scheduler/decide.js';
import type { BilledAnswer } from '../scheduler/events.js';
import { batchOwner } from '../store/batches.js';
import type { AttemptRecord, BatchLedger, JobQueue, Usage } from '../store/types.js';

/** The error codes of lines a batch never ran (it expired or was cancelled first). */
const NOT_RUN_CODES: ReadonlySet<unknown> = new Set(['batch_expired', 'batch_cancelled']);

export interface AppliedResults {
  readonly done: number;
  readonly failed: number;
  /** Lines with a retryable error (5xx, 429): their jobs went back to pending, the attempt counted. */
  readonly retried: number;
  readonly promptTokens: number;
  readonly completionTokens: number;
  /** Answers cut off at max_tokens, and refusals (src/provider/finish.ts): kept as done, as online. */
  readonly cutOff: number;
  readonly refused: number;
  readonly empty: number;
  /** The --max-tokens to propose for the cut-off ones (`cutOffRoom`, as online); 0 when none was cut off. */
  readonly cutOffRoom: number;
  /** USD of the answers at the batch price, those with a known price. */
  readonly costUsd: number;
  /** Answers of a model with no batch price known: not in `costUsd`. */
  readonly unpriced: number;
}

interface Held {
  readonly attempts: number;
  readonly model: string;
  /** Only when it asks for JSON (`HeldJob.request`). */
  readonly request: string | null;
}

/** What a batch answer costs: the model's batch price; null when none is known (shown as unknown). */
export type BatchCost = (model: string, usage: Usage) => number | null;

/**
 * Store the lines of a batch's output and error files, each exactly as an online answer would be:
 * `complete` with the response body and usage, or `fail` with the provider's message, each with its
 * attempt row (run id `batch:<submission>`, which is how spend tells batch prices from online ones).
 * Lines whose `custom_id` is not a job this submission holds are ignored: they cannot be ours.
 */
export async function applyResults(
  store: BatchLedger & JobQueue,
  submissionId: string,
  files: readonly string[],
  startedAt: number,
  now: number,
  secret?: string,
  costOf: BatchCost = () => null,
  maxAttempts = Number.POSITIVE_INFINITY,
): Promise<AppliedResults> {
  const owner = batchOwner(submissionId);
  const held = new Map<string, Held>(
    (await store.batches.held(submissionId)).map((j) => [j.key, { attempts: j.attempts, model: j.model, request: j.request }]),
  );
  const incomplete = { cutOff: 0, refused: 0, empty: 0 };
  let room = 0;
  let done = 0,
    failed = 0,
    retried = 0,
    promptTokens = 0,
    completionTokens = 0,
    costUsd = 0,
    unpriced = 0;
  const writes: Array<Promise<unknown>> = [];
  for (const text of files) {
    for (const raw of text.split('\n')) {
      if (raw.trim() === '') continue;
      let line: any;
      try {
        line = JSON.parse(raw);
      } catch {
        continue; // a damaged line answers nothing; its job goes back to pending when the batch ends
      }
      const key = typeof line?.custom_id === 'string' ? line.custom_id : null;
      const job = key === null ? undefined : held.get(key);
      if (!key || !job) continue;
      held.delete(key);
      // A line the batch never ran (OpenAI writes them to the error file: `batch_expired`,
      // `batch_cancelled`) is unanswered, as a line in neither file: the job stays held, and the
      // batch's end hands it back as the batch ended (collect.ts). Taken as the line's own error, it
      // failed every job an expiry or a --via auto deadline's cancel left unrun.
      if (line.response == null && NOT_RUN_CODES.has(line.error?.code)) continue;
      const attempt = (
        status: number | null,
        outcome: AttemptRecord['outcome'],
        error: string | null,
        usage: AttemptRecord['usage'],
      ): AttemptRecord => ({ key, runId: owner, attempt: job.attempts, startedAt, endedAt: now, status, outcome, error, usage });
      const status = Number(line?.response?.status_code);
      const bodyText = line?.response?.body === undefined ? '' : JSON.stringify(line.response.body);
      let error: ProviderError;
      // an answer that came and was billed, though not what the request asks for: its try records it
      let billedAnswer: BilledAnswer | null = null;
      const tried = (status: number | null, outcome: AttemptRecord['outcome'], message: string): AttemptRecord =>
        billedAnswer
          ? { ...attempt(status, outcome, message, billedAnswer.usage), costUsd: billedAnswer.costUsd }
          : attempt(status, outcome, message, null);
      if (status >= 200 && status < 300) {
        try {
          const c = parseCompletion(bodyText, status, null, '{}', secret);
          // an answer came: billed, whether it is kept or not
          const cost = costOf(job.model, c.usage);
          if (cost === null) unpriced++;
          else costUsd += cost;
          promptTokens += c.usage.promptTokens;
          completionTokens += c.usage.completionTokens;
          // not the JSON its request asks for: a failed try, as online (src/provider/structured-output.ts),
          // whose attempt says what its answer used and cost
          const checked =
            job.request === null ? { output: c.output, failure: null } : checkAnswer(job.request, c.output, c.finishReason ?? null, status);
          if (checked.failure !== null) {
            billedAnswer = { usage: c.usage, costUsd: cost };
            throw checked.failure;
          }
          const answered = { ...attempt(status, 'done', null, c.usage), costUsd: cost };
          writes.push(store.complete(key, { owner, output: checked.output, response: c.body, usage: c.usage, attempt: answered }));
          done++;
          const kind = answerKind(c.finishReason ?? null, checked.output);
          if (kind !== null) incomplete[kind]++;
          // the request is held only for those asking for JSON: cut off at a limit, an answer used all of it
          if (kind === 'cutOff') room = Math.max(room, cutOffRoom(job.request, c.usage.completionTokens));
          continue;
        } catch (bad) {
          // a 200 whose body is no completion: retried as online (it may answer next time)
          if (!(bad instanceof ProviderError)) throw bad;
          error = bad;
        }
      } else {
        error =
          Number.isFinite(status) && status > 0
            ? classifyHttpError(status, bodyText, new Headers(), null, secret)
            : new ProviderError({ message: lineErrorMessage(line?.error), scope: 'job', reason: 'bad_request' });
      }
      if (error.scope === 'retryable' && job.attempts >= maxAttempts) {
        // its last attempt: failed now, worded as online (not left pending for the next claim to fail)
        const message = exhaustedMessage(job.attempts, error.message);
        writes.push(store.fail(key, owner, message, tried(status || null, 'failed', triedError(error)), now));
        failed++;
      } else if (error.scope === 'retryable') {
        // Counted like an online retry, so a line that always fails ends at --max-attempts.
        writes.push(
          store
            .recordAttempt(tried(status, 'retry', triedError(error)), { countAttempt: true, error: error.message })
            .then(() => store.release(owner, { refund: false, now, keys: [key] })),
        );
        retried++;
      } else {
        writes.push(store.fail(key, owner, error.message, tried(status || null, 'failed', triedError(error)), now));
        failed++;
      }
    }
  }
  await Promise.all(writes);
  return { done, failed, retried, promptTokens, completionTokens, ...incomplete, cutOffRoom: room, costUsd, unpriced };
}

/** `{"code","message"}` of an error-file line, as one message. */
function lineErrorMessage(error: any): string {
  const message = typeof error?.message === 'string' ? error.message : 'the provider gave no reason';
  return typeof error?.code === 'string' ? `${error.code}: ${message}` : message;
}
