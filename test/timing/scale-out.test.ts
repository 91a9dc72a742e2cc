import { describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/open-store.js';
import { runCli } from '../helpers/cli.js';
import { seedJobs } from '../helpers/seed.js';
import { freshPgUrl } from '../helpers/stores.js';
import { startFake } from '../helpers/start-fake.js';

const REDIS = process.env.LLMQ_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

describe('several runs, one PostgreSQL queue, one Redis budget', () => {
  it('three runs send every job once and together stay within the RPM limit (npm run bench governor measures their combined rate)', async () => {
    const rpm = 1200; // 20 per 1-second window
    const fake = await startFake({ latencyMs: 30, rpm });
    const db = freshPgUrl();
    const store = await openStore(db);
    const jobs = 200; // ~10 s at the limit
    const keys = await seedJobs(store, jobs);
    await store.close();
    // a fresh endpoint path gives this test its own budget in Redis
    const args = [
      'run',
      '--db',
      db,
      '--base-url',
      fake.url,
      '--redis',
      REDIS,
      '--rpm',
      String(rpm),
      '--concurrency',
      '8',
      '--progress',
      'none',
    ];
    const t0 = Date.now();
    const results = await Promise.all([0, 1, 2].map(() => runCli(args, { timeoutMs: 120_000 })));
    const wallS = (Date.now() - t0) / 1000;
    // --progress none: each run's summary (jobs the others hold are named), no warning or error
    for (const r of results) {
      expect(r.stderr).toMatch(/^finished in \S+: \d+ done, 0 failed, \d+ retr(y|ies)\n {2}tokens /);
      expect(r.stderr).not.toMatch(/warning|error/i);
    }
    expect(results.map((r) => r.code)).toEqual([0, 0, 0]);
    // every job answered exactly once (a 429'd try is sent again, and that is no double payment)
    const answered = new Map<string, number>();
    for (const r of fake.requests) if (r.answered === 200) answered.set(r.key, (answered.get(r.key) ?? 0) + 1);
    expect(keys.every((k) => answered.get(k) === 1)).toBe(true);
    // one budget: three runs each pacing alone at 1200 rpm would meet hundreds of 429s; the bench
    // counts the few that scheduling jitter on a loaded machine may still cause
    expect(fake.rateLimited).toBeLessThanOrEqual(4);
    // 200 jobs at 20/s take about 10 s; a budget lost to over-cautious pacing would take minutes
    expect(wallS).toBeLessThan(60);
  });

  it('two runs sharing a Redis budget pace as one: each run alone would go twice as fast', async () => {
    const rpm = 600;
    const fake = await startFake({ latencyMs: 5 });
    const db = freshPgUrl();
    const store = await openStore(db);
    await seedJobs(store, 40);
    await store.close();
    const args = ['run', '--db', db, '--base-url', fake.url, '--redis', REDIS, '--rpm', String(rpm), '--progress', 'none'];
    await Promise.all([runCli(args), runCli(args)]);
    const times = fake.requests.map((r) => r.receivedAt).sort((a, b) => a - b);
    // 40 requests at 10/s shared take ~4 s; two separate budgets would take ~2 s
    expect((times[39]! - times[0]!) / 1000).toBeGreaterThan(3.3);
  });
});
