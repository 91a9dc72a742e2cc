import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadPriceTable } from '../src/pricing/price-table.js';
import { estimateRun } from '../src/report/estimate.js';
import { canonicalJson, jobKey } from '../src/request.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import type { EnqueueRow } from '../src/store/types.js';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

// Counting prompts is most of an estimate's time, so a large one counts them on worker threads. What
// it says must not depend on where they were counted: the same figures, to the last digit.

const now = Date.now();
const PRICES = { 'gpt-a': [2.5, 10], 'gpt-b': [0.15, 0.6] };
const prices = loadPriceTable({ env: JSON.stringify(PRICES), catalog: false });

/** `count` jobs over two models, of varied length; every fifth of gpt-b sets no max_tokens. */
async function mixedQueue(count: number): Promise<{ db: string; store: SqliteStore }> {
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  const rows: EnqueueRow[] = [];
  for (let n = 0; n < count; n++) {
    const model = n % 3 === 0 ? 'gpt-b' : 'gpt-a';
    const request = canonicalJson({
      model,
      ...(model === 'gpt-b' && n % 5 === 0 ? {} : { max_tokens: 32 + (n % 7) * 100 }),
      messages: [
        { role: 'system', content: 'Answer briefly.' },
        { role: 'user', content: `Document ${n}: ${'the quarterly report of a customer '.repeat(1 + (n % 11))}` },
      ],
    });
    rows.push({ itemId: `doc-${n}`, source: 'mixed', meta: null, key: jobKey(request), request, model, priority: n % 4 === 0 ? -1 : 0 });
  }
  for (let i = 0; i < rows.length; i += 1000) await store.enqueue(rows.slice(i, i + 1000), now);
  return { db, store };
}

describe('estimate: prompts counted on worker threads', () => {
  it('says exactly what counting them on this thread says, whatever the threads and the limit', async () => {
    const { store } = await mixedQueue(3060);
    // 60 answered: answer lengths, and the prompt tokens the provider counts on top (counted where the prompts are)
    await store.startRun({ id: 'run-a', host: 'h', pid: 1, startedAt: now, options: {} });
    const { jobs: answered } = await store.claim({ owner: 'run-a', limit: 60, now, leaseUntil: now + 60_000, maxAttempts: 5 });
    for (const [i, job] of answered.entries()) {
      const usage = { promptTokens: 40 + i, completionTokens: 10 + 3 * i };
      const attempt = {
        key: job.key,
        runId: 'run-a',
        attempt: 1,
        startedAt: now,
        endedAt: now + 900,
        status: 200,
        outcome: 'done' as const,
        error: null,
        usage,
      };
      await store.complete(job.key, { owner: 'run-a', output: 'x', response: '{}', usage, attempt });
    }
    const here = await estimateRun(store, { prices, now, baseUrl: 'x', threads: 0 });
    expect(here.jobs).toBe(3000);
    expect(here.uncapped).toBe(200);
    expect(here.models.every((m) => m.completion.basis === 'answers' && m.promptCorrection !== 0)).toBe(true);
    expect(here.cost).not.toBeNull();
    for (const threads of [1, 3]) {
      expect(await estimateRun(store, { prices, now, baseUrl: 'x', threads })).toEqual(here);
    }
    const first = await estimateRun(store, { prices, now, baseUrl: 'x', limit: 1001, threads: 0 });
    expect(await estimateRun(store, { prices, now, baseUrl: 'x', limit: 1001, threads: 2 })).toEqual(first);
    expect(first.jobs).toBe(1001);
    await store.close();
  });

  it('llmq estimate of a large queue (on its threads by default) says what one thread says', async () => {
    const { db, store } = await mixedQueue(21_000);
    const here = await estimateRun(store, { prices, now, baseUrl: 'https://api.openai.com/v1', threads: 0 });
    await store.close();
    const pricesFile = join(tempDir(), 'prices.json');
    writeFileSync(pricesFile, JSON.stringify(PRICES));
    const cli = await runCli(['estimate', '--db', db, '--json', '--prices', pricesFile]);
    expect(cli.code, cli.stderr).toBe(0);
    const e = JSON.parse(cli.stdout);
    expect(e.jobs).toBe(21_000);
    expect(e.models.map((m: { promptTokens: number }) => m.promptTokens)).toEqual(here.models.map((m) => m.promptTokens));
    // --json rounds away floating-point noise
    for (const k of ['low', 'high', 'worst'] as const) expect(e.cost[k]).toBeCloseTo(here.cost![k]!, 9);
  });

  it('a request that cannot be read fails the estimate with its error, on a thread as here, instead of hanging', async () => {
    const { store } = await mixedQueue(600);
    store.db.prepare(`UPDATE job_requests SET request = '{"model": "gpt-a", "messages": [' WHERE seq = 300`).run();
    for (const threads of [0, 2]) {
      await expect(estimateRun(store, { prices, now, baseUrl: 'x', threads })).rejects.toThrow(/JSON/);
    }
    await store.close();
  });
});
