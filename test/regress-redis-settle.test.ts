import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { RedisRateLimiter } from '../src/scheduler/redis-limiter.js';

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

/**
 * `settle()` (called after every answer when --tpm is set) fires `currentReservoir().then(...)`
 * with `void` and no catch. With the Redis limiter, a Redis that goes away mid-run makes that
 * promise reject with nobody listening: Node's default for unhandled rejections ends the process
 * at once, without handing jobs back or finishing the run (leases wait 60 s, attempts are spent).
 */
describe('review: Redis limiter when Redis goes away', () => {
  it('settle() does not leave an unhandled rejection', async () => {
    const port = await freePort();
    const redis = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    try {
      await new Promise((r) => setTimeout(r, 300));
      const limiter = await RedisRateLimiter.connect({ url: `redis://127.0.0.1:${port}`, baseUrl: 'http://review/v1', tpm: 600_000 });
      await limiter.acquire(100, new AbortController().signal, 'm');
      redis.kill('SIGKILL');
      await new Promise((r) => redis.once('exit', r));
      const unhandled: unknown[] = [];
      const onUnhandled = (reason: unknown): void => { unhandled.push(reason); };
      process.on('unhandledRejection', onUnhandled);
      try {
        limiter.settle(100, 40, 'm');
        await new Promise((r) => setTimeout(r, 2000));
      } finally {
        process.off('unhandledRejection', onUnhandled);
        await limiter.stop().catch(() => {});
      }
      expect(unhandled.map(String)).toEqual([]);
    } finally {
      if (redis.exitCode === null) redis.kill('SIGKILL');
    }
  });
});
