import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { runCli } from './helpers/cli.js';
import { reply } from './helpers/fake-openai-replies.js';
import { startFake } from './helpers/start-fake.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';

describe('a long rate-limit pause', () => {
  it('is told in plain progress and --json as paused, then resumed; a short one is left to the pace', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 4);
    await store.close();
    // the first request is told to wait 3.5 s; later 429s ask 200 ms, and are not told
    const fake = await startFake({
      respond: (req) => (req.index === 1 ? reply.rateLimited(3500) : req.index === 3 ? reply.rateLimited(200) : undefined),
    });
    const plain = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'plain', '-c', '1'], { timeoutMs: 30_000 });
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stderr).toMatch(/^paused: rate limited, resuming in [34]s \(retry-after 4s\)$/m);
    expect(plain.stderr).toMatch(/^resumed after the rate limit$/m);
    expect(plain.stderr.match(/^paused: /gm)).toHaveLength(1);
    expect(plain.stderr).toContain('4 done');

    const again = new SqliteStore(db);
    await again.retryFailed({}, Date.now());
    await again.db.prepare(`UPDATE jobs SET state = 'pending', attempts = 0`).run();
    await again.close();
    fake.clear();
    const json = await runCli(['run', '--db', db, '--base-url', fake.url, '--json', '-c', '1'], { timeoutMs: 30_000 });
    const events = json.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { event: string; reason?: string; detail?: string });
    expect(events.filter((e) => e.event === 'paused')).toEqual([
      expect.objectContaining({ event: 'paused', reason: 'rate_limit', detail: 'retry-after 4s' }),
    ]);
    expect(events.filter((e) => e.event === 'resumed')).toEqual([expect.objectContaining({ event: 'resumed', reason: 'rate_limit' })]);
  }, 40_000);

  it("asked in a 429's body (Google's RetryInfo), told as the 429 asks, not as a retry-after; its quota told as learned from 429s", async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 3);
    await store.close();
    const google = [
      {
        error: {
          code: 429,
          message: 'You exceeded your current quota.\nPlease retry in 3.2s.',
          details: [
            {
              '@type': 'type.googleapis.com/google.rpc.QuotaFailure',
              violations: [{ quotaId: 'GenerateRequestsPerMinutePerProjectPerModel', quotaValue: '600' }],
            },
            { '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '3s' },
          ],
        },
      },
    ];
    const fake = await startFake({ respond: (req) => (req.index === 1 ? reply.raw(429, google) : undefined) });
    const plain = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'plain', '-c', '1'], { timeoutMs: 30_000 });
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stderr).toMatch(/^paused: rate limited, resuming in [34]s \(the 429 asks 3s\)$/m);
    expect(plain.stderr).toMatch(/\(600 rpm learned from 429s\)/);
    expect(plain.stderr).not.toContain('from headers');
  }, 40_000);
});
