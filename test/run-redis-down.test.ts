import { type ChildProcess, spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { collect, runCli, spawnCli } from './helpers/cli.js';
import { seededQueue } from './helpers/seed.js';
import { startFake } from './helpers/start-fake.js';
import { closedPort } from './helpers/ports.js';
import { waitFor, waitForLine } from './helpers/wait.js';

async function startRedis(port: number): Promise<ChildProcess> {
  const redis = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no'], {
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  await waitForLine(redis, 'stdout', /Ready to accept connections/);
  return redis;
}

describe('a run whose --redis stops answering', () => {
  it('says so in its progress and in status while sending waits, and goes on when Redis is back', async () => {
    const fake = await startFake({ latencyMs: 10 });
    const db = await seededQueue(300);
    const port = await closedPort();
    let redis = await startRedis(port);
    try {
      const child = spawnCli(
        [
          'run',
          '--db',
          db,
          '--base-url',
          fake.url,
          '-c',
          '4',
          '--rpm',
          '3000',
          '--redis',
          `redis://127.0.0.1:${port}`,
          '--progress',
          'plain',
        ],
        { env: { OPENAI_API_KEY: 'sk-test-redis-down-0000' } },
      );
      const done = collect(child, 120_000);
      let stderr = '';
      child.stderr!.on('data', (d) => (stderr += String(d)));
      await fake.waitForRequests(20);
      redis.kill('SIGKILL');
      await new Promise((r) => redis.once('exit', r));
      // the plain progress prints its lanes every 5 s: one of those lines says what sending waits for
      await waitFor(() => /sending waits: Redis \(--redis\) not answering for \d+s/.test(stderr), {
        what: 'the progress to say that sending waits for Redis',
        timeoutMs: 20_000,
      });
      const status = await runCli(['status', '--db', db]);
      expect(status.stdout).toMatch(/ {10}sending waits: Redis \(--redis\) not answering for \d+s/);
      redis = await startRedis(port);
      const r = await done;
      expect(r.code, r.stderr).toBe(0);
      expect(fake.received).toBe(300);
    } finally {
      if (redis.exitCode === null) redis.kill('SIGKILL');
    }
  }, 180_000);
});
