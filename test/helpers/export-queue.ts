import type { AttemptRecord, Store } from '../../src/store/types.js';
import { docRow } from './populate.js';

const RUN = 'run-golden';
/** Items in the queue fillExportQueue makes: enough for more than one page of the stores' export reads and a 64 KiB write chunk. */
export const EXPORT_QUEUE_ITEMS = 1_207;

/**
 * A queue whose export is the same bytes every time (fixed times, responses and ids), with the
 * corners each format handles: a job shared by two items, a retried job (latency of the last try),
 * failures with and without an error code, a response that is not JSON, quotes, commas, newlines
 * and non-ASCII text, metadata, running and pending jobs, and filler done jobs after them.
 */
export async function fillExportQueue(store: Store): Promise<void> {
  const t0 = 1_754_000_000_000;
  const filler = Array.from({ length: EXPORT_QUEUE_ITEMS - 7 }, (_, n) => docRow(`filler/${n}.txt`, `Filler document ${n}`));
  const rows = [
    docRow('a.txt', 'Apples are red.', { meta: { lang: 'en', tags: ['fruit', 'crème "brûlée"'] } }),
    docRow('b.txt', 'B, with a comma'),
    docRow('c.txt', 'Apples are red.'),
    docRow('d.txt', 'D, far too long'),
    docRow('e.txt', 'E is running'),
    docRow('g.txt', 'G answered oddly'),
    ...filler,
  ];
  await store.enqueue(rows, t0);
  const key = (id: string) => rows.find((r) => r.itemId === id)!.key;
  await store.startRun({ id: RUN, host: 'h', pid: 1, startedAt: t0, options: {} });
  await store.claim({ owner: RUN, limit: 10_000, now: t0, leaseUntil: t0 + 3_600_000, maxAttempts: 3 });
  const attempt = (
    k: string,
    n: number,
    start: number,
    ms: number,
    status: number | null,
    outcome: AttemptRecord['outcome'],
    error: string | null,
    usage: AttemptRecord['usage'],
  ): AttemptRecord => ({ key: k, runId: RUN, attempt: n, startedAt: start, endedAt: start + ms, status, outcome, error, usage });
  const answer = async (id: string, output: string, response: string, ms: number, costUsd?: number) => {
    const usage = { promptTokens: 100 + (ms % 7), completionTokens: 20 + (ms % 5) };
    await store.complete(key(id), {
      owner: RUN,
      output,
      response,
      usage,
      attempt: { ...attempt(key(id), 1, t0 + ms, ms, 200, 'done', null, usage), ...(costUsd === undefined ? {} : { costUsd }) },
    });
  };
  const body = (content: string) =>
    JSON.stringify({
      id: 'chatcmpl-golden',
      object: 'chat.completion',
      created: 1_754_000_000,
      model: 'gpt-4o-mini-2024-07-18',
      choices: [{ index: 0, message: { role: 'assistant', content }, logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 },
    });
  await answer('a.txt', 'Apples: red, "crisp"\nand sweet — ünïcödé.', body('Apples: red, "crisp"\nand sweet — ünïcödé.'), 1234, 0.000027);
  await answer('b.txt', 'B, answered', body('B, answered'), 987);
  await answer('g.txt', 'G plain', 'not json {', 55);
  for (const [n, r] of filler.entries())
    await answer(r.itemId, `Filler answer ${n}, "quoted"`, body(`Filler answer ${n}`), 100 + n, n % 3 ? 0.0000123 * n : undefined);
  const tooLong = "400 context_length_exceeded: This model's maximum context length is 128000 tokens.";
  await store.recordAttempt(attempt(key('d.txt'), 1, t0, 30_000, 503, 'retry', '503 Service Unavailable', null), {
    countAttempt: true,
    error: '503 Service Unavailable',
  });
  await store.startRetry(key('d.txt'), RUN, t0 + 31_000, t0 + 3_600_000);
  await store.fail(key('d.txt'), RUN, tooLong, attempt(key('d.txt'), 2, t0 + 32_000, 210, 400, 'failed', tooLong, null), t0 + 32_210);
  await store.enqueue([docRow('f.txt', 'F arrived late, still pending')], t0 + 40_000);
}
