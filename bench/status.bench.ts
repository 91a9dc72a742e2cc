// llmq status on a large queue: the counts come from a covering index, not a scan of the request text.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { fmt, verdict } from './helpers.js';

const JOBS = 1_000_000;
const dir = mkdtempSync(join(tmpdir(), 'llmq-bench-status-'));
const store = new SqliteStore(join(dir, 'q.db'));
const t0 = performance.now();
// Rows made inside SQLite: the point here is reading a big queue, not writing one (see enqueue.bench.js).
store.db.exec(`
  WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${JOBS})
  INSERT INTO jobs (key, request, model, priority, created_at, updated_at)
  SELECT lower(hex(randomblob(32))), printf('{"max_tokens":64,"messages":[{"content":"%s %d","role":"user"}],"model":"gpt-4o-mini"}', substr(hex(zeroblob(500)), 1, 1000), i),
         'gpt-4o-mini', 0, ${Date.now()} + i, ${Date.now()} + i FROM n;
  INSERT INTO items (id, source, job_key, meta, created_at, updated_at) SELECT 'doc-' || seq, 'bench', key, NULL, created_at, created_at FROM jobs;
`);
// a realistic mix: a third done with usage, a few failed
store.db.prepare(`UPDATE jobs SET state = 'done', prompt_tokens = 250, completion_tokens = 60, output = 'ok' WHERE seq % 3 = 0`).run();
store.db.prepare(`UPDATE jobs SET state = 'failed', error = 'HTTP 400: bad' WHERE seq % 1000 = 1`).run();
console.log(`built a queue of ${fmt(JOBS)} jobs (~1 KB requests) in ${fmt((performance.now() - t0) / 1000, 1)} s`);
const times: number[] = [];
for (let i = 0; i < 5; i++) {
  const t = performance.now();
  await store.status(Date.now());
  times.push(performance.now() - t);
}
times.sort((a, b) => a - b);
const median = times[2]!;
console.log(`status on ${fmt(JOBS)} jobs: median ${fmt(median)} ms over 5 calls (min ${fmt(times[0]!)} ms)  target < 1000 ms  ${verdict(median < 1000)}`);
await store.close();
rmSync(dir, { recursive: true, force: true });
