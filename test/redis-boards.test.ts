import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { LaneBoard } from '../src/scheduler/pace/board.js';
import { RedisLaneBoards } from '../src/scheduler/redis-boards.js';
import { waitForLine } from './helpers/wait.js';

const REDIS = process.env.LLMQ_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * Take a place on `board`, waiting as long as it says. The place was given somewhere between the
 * last ask and its answer: both are returned, so a busy test process's lag is not read as the pacer's.
 */
async function take(
  board: LaneBoard,
  limits: { rpm: number | null; tpm: number | null },
  tokens = 0,
): Promise<{ asked: number; got: number }> {
  for (;;) {
    const asked = Date.now();
    const got = await board.tryTake(tokens, limits);
    if (typeof got !== 'number') return { asked, got: Date.now() };
    await new Promise((r) => setTimeout(r, got));
  }
}

describe('RedisLaneBoards: one lane budget shared by runs', () => {
  it('paces two runs as one budget', async () => {
    const [a, b] = await Promise.all([RedisLaneBoards.connect(REDIS), RedisLaneBoards.connect(REDIS)]);
    const baseUrl = `http://127.0.0.1:1/${randomUUID()}`; // a budget no other test shares
    const boards = [a.board(baseUrl, 'm'), b.board(baseUrl, 'm')];
    const t0 = Date.now();
    const starts = (await Promise.all(boards.flatMap((board) => Array.from({ length: 10 }, () => take(board, { rpm: 600, tpm: null })))))
      .map((t) => ({ asked: t.asked - t0, got: t.got - t0 }))
      .sort((x, y) => x.got - y.got);
    // 600 rpm is 10 per second: 20 starts span about 2 s together; two separate budgets would take 1 s.
    expect(starts[19]!.got - starts[0]!.got).toBeGreaterThanOrEqual(1700);
    // and no 1-second window holds more than 10: any 11 places given span a second or more
    for (let i = 10; i < starts.length; i++) {
      const eleven = starts.slice(i - 10, i + 1);
      expect(starts[i]!.got - Math.min(...eleven.map((s) => s.asked))).toBeGreaterThanOrEqual(1000);
    }
    await Promise.all([a.close(), b.close()]);
  });

  it('a limit raised moves the places taken at the old pace to the new one, for every run on the budget', async () => {
    const [a, b] = await Promise.all([RedisLaneBoards.connect(REDIS), RedisLaneBoards.connect(REDIS)]);
    const baseUrl = `http://127.0.0.1:1/${randomUUID()}`;
    const [x, y] = [a.board(baseUrl, 'm'), b.board(baseUrl, 'm')];
    // 3 rpm, 3,000 tpm: one request of 1,000 tokens holds the budget for 20 s
    expect(await x.tryTake(1000, { rpm: 3, tpm: 3000 })).not.toBeTypeOf('number');
    expect(await y.tryTake(1000, { rpm: 3, tpm: 3000 })).toBeGreaterThan(19_000);
    // the provider says 1,200 rpm and 1,200,000 tpm now: the next goes at once, not after the old spacing
    expect(await y.tryTake(1000, { rpm: 1200, tpm: 1_200_000 })).not.toBeTypeOf('number');
    await Promise.all([a.close(), b.close()]);
  });

  it('runs asking at different limits in turn (another --rpm, a pace climbing) never give back what the lower took', async () => {
    const [a, b] = await Promise.all([RedisLaneBoards.connect(REDIS), RedisLaneBoards.connect(REDIS)]);
    const baseUrl = `http://127.0.0.1:1/${randomUUID()}`;
    const [x, y] = [a.board(baseUrl, 'm'), b.board(baseUrl, 'm')];
    // about 15 a minute: one request every 4 s; asked in turn for 3 s, the budget gives one
    let given = 0;
    const t0 = Date.now();
    for (let i = 0; Date.now() - t0 < 3000; i++) {
      const got = await (i % 2 ? x.tryTake(0, { rpm: 15, tpm: null }) : y.tryTake(0, { rpm: 14.4, tpm: null }));
      if (typeof got !== 'number') given++;
      await new Promise((r) => setTimeout(r, 25));
    }
    expect(given).toBe(1);
    await Promise.all([a.close(), b.close()]);
  });

  it('keeps separate budgets for separate endpoints and models', () => {
    expect(RedisLaneBoards.budgetId('http://a/v1', 'm')).not.toBe(RedisLaneBoards.budgetId('http://b/v1', 'm'));
    expect(RedisLaneBoards.budgetId('http://a/v1', 'm')).not.toBe(RedisLaneBoards.budgetId('http://a/v1', 'n'));
    expect(RedisLaneBoards.budgetId('http://a/v1', 'm')).toBe(RedisLaneBoards.budgetId('http://a/v1', 'm'));
  });

  it("shares a 429's pause and the learned limits with every run on the budget", async () => {
    const [a, b] = await Promise.all([RedisLaneBoards.connect(REDIS), RedisLaneBoards.connect(REDIS)]);
    const baseUrl = `http://127.0.0.1:1/${randomUUID()}`;
    const [x, y] = [a.board(baseUrl, 'm'), b.board(baseUrl, 'm')];
    x.pause(Date.now() + 800);
    x.learn({ rpm: 500, tpm: 200_000, source: 'headers', at: Date.now() });
    await x.refresh(); // on x's connection after its writes: once it answers, Redis has them
    const wait = await y.tryTake(0, { rpm: 6000, tpm: null });
    expect(typeof wait === 'number' && wait >= 600).toBe(true);
    await y.refresh();
    expect(y.learned()).toMatchObject({ rpm: 500, tpm: 200_000, source: 'headers' });
    expect(y.pausedUntil()).toBeGreaterThan(Date.now() + 500);
    await Promise.all([a.close(), b.close()]);
  });

  it("holds a shared pause for as long as it has left on Redis's clock, whatever this machine's clock says", async () => {
    // a machine whose clock is five minutes behind Redis's (and the other machine's)
    const behind = () => Date.now() - 300_000;
    const [a, b] = await Promise.all([RedisLaneBoards.connect(REDIS), RedisLaneBoards.connect(REDIS, behind)]);
    const baseUrl = `http://127.0.0.1:1/${randomUUID()}`;
    const [x, late] = [a.board(baseUrl, 'm'), b.board(baseUrl, 'm')];
    x.pause(Date.now() + 1000);
    await x.refresh();
    await late.refresh();
    const left = late.pausedUntil() - behind();
    expect(left).toBeGreaterThan(700);
    expect(left).toBeLessThanOrEqual(1000);
    // its own 429's pause, raised on Redis and read back, is as long as it asked too
    const y = b.board(`http://127.0.0.1:1/${randomUUID()}`, 'm');
    y.pause(behind() + 2000);
    await y.refresh();
    expect(y.pausedUntil() - behind()).toBeLessThanOrEqual(2000);
    await Promise.all([a.close(), b.close()]);
  });

  it('says what to check when Redis is unreachable', async () => {
    await expect(RedisLaneBoards.connect('redis://127.0.0.1:1')).rejects.toThrow(/Cannot reach Redis at redis:\/\/127.0.0.1:1.*--redis/);
    // a password with a character that ends a URL in free text is masked all the same
    const odd = await RedisLaneBoards.connect('redis://:p(w9@127.0.0.1:1').catch((error: Error) => error.message);
    expect(odd).toMatch(/^Cannot reach Redis at redis:\/\/:\*\*\*@127\.0\.0\.1:1/);
    expect(odd).not.toContain('p(w9');
    // another scheme is named as such, its password masked, rather than "Connection is closed"
    const http = RedisLaneBoards.connect('http://u:pw9@127.0.0.1:6379');
    await expect(http).rejects.toThrow('--redis http://u:***@127.0.0.1:6379/ is not a Redis URL: give redis://host:port');
    await expect(RedisLaneBoards.connect('http://:p(w@127.0.0.1:6379')).rejects.toThrow(
      /^--redis http:\/\/:\*\*\*@127\.0\.0\.1:6379\/ is not/,
    );
  });

  it('leaves no unhandled rejection when Redis goes away mid-run', async () => {
    const server = createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as { port: number }).port;
    await new Promise((r) => server.close(r));
    const redis = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no'], {
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    try {
      await waitForLine(redis, 'stdout', /Ready to accept connections/);
      const boards = await RedisLaneBoards.connect(`redis://127.0.0.1:${port}`);
      const board = boards.board('http://review/v1', 'm');
      const ticket = await board.tryTake(100, { rpm: null, tpm: 600_000 });
      redis.kill('SIGKILL');
      await new Promise((r) => redis.once('exit', r));
      const unhandled: unknown[] = [];
      const onUnhandled = (reason: unknown): void => {
        unhandled.push(reason);
      };
      process.on('unhandledRejection', onUnhandled);
      try {
        if (typeof ticket !== 'number') board.settle(ticket, 40);
        board.pause(Date.now() + 100);
        board.learn({ rpm: 1, tpm: null, source: '429s', at: Date.now() });
        // Queued behind those on the same connection, it fails when they do (out of retries); a
        // rejection nobody handled is reported once the microtasks of that turn have run.
        await board.refresh().catch(() => {});
        await new Promise((r) => setImmediate(r));
      } finally {
        process.off('unhandledRejection', onUnhandled);
        await boards.close().catch(() => {});
      }
      expect(unhandled.map(String)).toEqual([]);
    } finally {
      if (redis.exitCode === null) redis.kill('SIGKILL');
    }
  });
});
