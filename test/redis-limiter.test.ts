import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { RedisRateLimiter } from '../src/scheduler/redis-limiter.js';

const REDIS = process.env.LLMQ_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

describe('RedisRateLimiter', () => {
  it('spaces request starts across two runs as one budget', async () => {
    const baseUrl = `http://127.0.0.1:1/${randomUUID()}`; // a budget no other test shares
    const a = await RedisRateLimiter.connect({ url: REDIS, baseUrl, rpm: 600 });
    const b = await RedisRateLimiter.connect({ url: REDIS, baseUrl, rpm: 600 });
    const starts: number[] = [];
    const signal = new AbortController().signal;
    const t0 = Date.now();
    await Promise.all([a, b].flatMap((l) => Array.from({ length: 10 }, async () => {
      await l.acquire(0, signal, 'gpt-4o-mini');
      starts.push(Date.now() - t0);
    })));
    starts.sort((x, y) => x - y);
    // 20 starts at ~103 ms apart (600 rpm with 3% headroom) take about 2 s; two local budgets would take 1 s.
    expect(starts[19]! - starts[0]!).toBeGreaterThanOrEqual(1700);
    await Promise.all([a.stop(), b.stop()]);
  });

  it('keeps separate budgets for separate endpoints and models', () => {
    expect(RedisRateLimiter.budgetId('http://a/v1', 'm')).not.toBe(RedisRateLimiter.budgetId('http://b/v1', 'm'));
    expect(RedisRateLimiter.budgetId('http://a/v1', 'm')).not.toBe(RedisRateLimiter.budgetId('http://a/v1', 'n'));
    expect(RedisRateLimiter.budgetId('http://a/v1', 'm')).toBe(RedisRateLimiter.budgetId('http://a/v1', 'm'));
  });

  it("shares a 429's pause with every run on the budget", async () => {
    const baseUrl = `http://127.0.0.1:1/${randomUUID()}`;
    const a = await RedisRateLimiter.connect({ url: REDIS, baseUrl, rpm: 6000 });
    const b = await RedisRateLimiter.connect({ url: REDIS, baseUrl, rpm: 6000 });
    const signal = new AbortController().signal;
    await a.acquire(0, signal, 'm');
    await b.acquire(0, signal, 'm');
    a.pauseUntil(Date.now() + 800);
    await new Promise((r) => setTimeout(r, 150)); // another run sees a pause within 100 ms
    const t0 = Date.now();
    await b.acquire(0, signal, 'm');
    expect(Date.now() - t0).toBeGreaterThanOrEqual(500);
    await Promise.all([a.stop(), b.stop()]);
  });

  it('says what to check when Redis is unreachable', async () => {
    await expect(RedisRateLimiter.connect({ url: 'redis://127.0.0.1:1', baseUrl: 'x', rpm: 1 })).rejects.toThrow(/Cannot reach Redis at redis:\/\/127.0.0.1:1.*--redis/);
  });
});
