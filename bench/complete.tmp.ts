import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { seedJobs } from '../test/helpers/seed.js';
const dir = mkdtempSync(join(tmpdir(), 'llmq-cmp-'));
const N = 20000;
const response = JSON.stringify({ id: 'chatcmpl-x', object: 'chat.completion', created: 1, model: 'gpt-4o-mini', choices: [{ index: 0, message: { role: 'assistant', content: 'A short summary of the document: a quick brown fox jumps over a lazy dog, nothing else.' }, finish_reason: 'stop' }], usage: { prompt_tokens: 52, completion_tokens: 24, total_tokens: 76 } });
async function once(variant: string, i: number) {
  const store = new SqliteStore(join(dir, `${variant}-${i}.db`));
  await seedJobs(store, N);
  if (variant === 'notrigger') store.db.exec('DROP TRIGGER attempts_latency');
  await store.startRun({ id: 'r', host: 'h', pid: process.pid, startedAt: Date.now(), options: {} });
  const { jobs } = await store.claim({ owner: 'r', limit: N, now: Date.now(), leaseUntil: Date.now() + 600_000, maxAttempts: 3 });
  const c0 = process.cpuUsage(); const t0 = performance.now();
  for (let k = 0; k < jobs.length; k += 64) {
    await Promise.all(jobs.slice(k, k + 64).map((j) => {
      const usage = { promptTokens: 52, completionTokens: 24 };
      return store.complete(j.key, { owner: 'r', output: 'A short summary', response, usage, attempt: { key: j.key, runId: 'r', attempt: 1, startedAt: 1, endedAt: 2, status: 200, outcome: 'done', error: null, usage } });
    }));
  }
  const c = process.cpuUsage(c0);
  console.log(variant, ((performance.now() - t0) / N * 1000).toFixed(1), 'µs wall/job', ((c.user + c.system) / N).toFixed(1), 'µs cpu/job');
  await store.close();
}
for (let i = 0; i < 3; i++) for (const v of ['trigger', 'notrigger']) await once(v, i);
