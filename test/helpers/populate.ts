import { join } from 'node:path';
import { canonicalJson, jobKey, type ChatRequest } from '../../src/request.js';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import type { AttemptRecord, EnqueueRow, RunStats } from '../../src/store/types.js';

/** An enqueue row for a document, rendered the way `llmq enqueue` renders it. */
export function docRow(
  itemId: string,
  text: string,
  o: { model?: string; meta?: Record<string, unknown>; priority?: number } = {},
): EnqueueRow {
  const model = o.model ?? 'gpt-4o-mini';
  const body: ChatRequest = { model, messages: [{ role: 'user', content: `Summarize in one sentence:\n\n${text}` }], max_tokens: 200 };
  const request = canonicalJson(body);
  return { itemId, source: `docs/${itemId}`, meta: o.meta ?? null, key: jobKey(request), request, model, priority: o.priority ?? 0 };
}

/** A response body shaped like OpenAI's chat completion. */
export function openAiResponse(model: string, content: string, prompt: number, completion: number): string {
  return JSON.stringify({
    id: `chatcmpl-${Math.random().toString(36).slice(2, 12)}`,
    object: 'chat.completion',
    created: 1_754_000_000,
    model,
    choices: [{ index: 0, message: { role: 'assistant', content }, logprobs: null, finish_reason: 'stop' }],
    usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
  });
}

export const RUN = 'run-0001-aaaa-bbbb';
/** USD stored with a.txt's answer: 100 prompt and 20 completion tokens at $0.15/$0.60 per million. */
export const A_COST = 0.000027;
export const T0 = Date.now() - 10 * 60_000;

export const ANSWERS: Record<string, string> = {
  'a.txt': 'A is about apples.',
  'sub/b.txt': 'B says "hello", then, a comma\nand a second line.',
  'sub/deeper/g.txt': 'G is deep.',
  '../escape.txt': 'should stay inside',
  '/abs/x.txt': 'absolute',
};

/**
 * A queue with every state and every corner the readers must handle:
 *  - done: a.txt, c.txt (shares a.txt's job), sub/b.txt (commas, quotes, newline), sub/deeper/g.txt,
 *    ../escape.txt and /abs/x.txt (ids that must not escape --out-dir)
 *  - failed: d.txt (a 503 retry, then a 400 context_length_exceeded), h.txt (same reason)
 *  - running: f.txt (held by the run); pending: e.txt (enqueued after the claim)
 *  - a.txt's answer has its cost stored (A_COST, gpt-4o-mini's price); the others were answered
 *    without one, as before llmq kept costs, so readers price them with the prices they are given
 * The run is left active with a fresh heartbeat unless `finished`.
 */
export async function populate(
  dir: string,
  o: { finished?: boolean; heartbeatAt?: number; host?: string; pid?: number } = {},
): Promise<{ db: string; keys: Record<string, string> }> {
  const db = join(dir, 'q.db');
  const store = new SqliteStore(db);
  const shared = 'Apples are red.';
  const rows = [
    docRow('a.txt', shared, { meta: { lang: 'en' } }),
    docRow('sub/b.txt', 'B doc'),
    docRow('c.txt', shared),
    docRow('d.txt', 'D doc, far too long'),
    docRow('f.txt', 'F doc'),
    docRow('sub/deeper/g.txt', 'G doc'),
    docRow('../escape.txt', 'escape doc'),
    docRow('/abs/x.txt', 'abs doc'),
    docRow('h.txt', 'H doc, also too long'),
  ];
  const keys = Object.fromEntries(rows.map((r) => [r.itemId, r.key]));
  await store.enqueue(rows, T0);
  await store.startRun({ id: RUN, host: o.host ?? 'testhost', pid: o.pid ?? 4242, startedAt: T0 + 1000, options: { concurrency: 4 } });
  const claimed = await store.claim({ owner: RUN, limit: 100, now: T0 + 1000, leaseUntil: Date.now() + 600_000, maxAttempts: 3 });
  if (claimed.jobs.length !== rows.length - 1) throw new Error(`expected ${rows.length - 1} claimed jobs, got ${claimed.jobs.length}`);
  const attempt = (
    key: string,
    n: number,
    start: number,
    ms: number,
    status: number | null,
    outcome: AttemptRecord['outcome'],
    error: string | null,
    usage: AttemptRecord['usage'],
  ): AttemptRecord => ({ key, runId: RUN, attempt: n, startedAt: start, endedAt: start + ms, status, outcome, error, usage });
  let t = T0 + 2000;
  for (const id of ['a.txt', 'sub/b.txt', 'sub/deeper/g.txt', '../escape.txt', '/abs/x.txt']) {
    const usage = { promptTokens: 100, completionTokens: 20 };
    await store.complete(keys[id]!, {
      owner: RUN,
      output: ANSWERS[id]!,
      response: openAiResponse('gpt-4o-mini-2024-07-18', ANSWERS[id]!, 100, 20),
      usage,
      attempt: { ...attempt(keys[id]!, 1, t, 1234, 200, 'done', null, usage), ...(id === 'a.txt' ? { costUsd: A_COST } : {}) },
    });
    t += 1500;
  }
  const tooLong = "400 context_length_exceeded: This model's maximum context length is 128000 tokens.";
  await store.recordAttempt(attempt(keys['d.txt']!, 1, t, 30_000, 503, 'retry', '503 Service Unavailable', null), {
    countAttempt: true,
    error: '503 Service Unavailable',
  });
  await store.startRetry(keys['d.txt']!, RUN, t + 31_000, Date.now() + 600_000);
  await store.fail(keys['d.txt']!, RUN, tooLong, attempt(keys['d.txt']!, 2, t + 32_000, 210, 400, 'failed', tooLong, null), t + 32_210);
  await store.fail(keys['h.txt']!, RUN, tooLong, attempt(keys['h.txt']!, 1, t + 33_000, 190, 400, 'failed', tooLong, null), t + 33_190);
  await store.enqueue([docRow('e.txt', 'E doc, arrived late')], t + 40_000);
  const stats: RunStats = {
    done: 5,
    failed: 2,
    retried: 1,
    requests: 8,
    rateLimited: 0,
    promptTokens: 500,
    completionTokens: 100,
    jobsPerSecond: 0.5,
  };
  if (o.finished) await store.finishRun(RUN, t + 60_000, 'drained', stats);
  else await store.heartbeat(RUN, o.heartbeatAt ?? Date.now(), Date.now() + 600_000, stats);
  await store.close();
  return { db, keys };
}
