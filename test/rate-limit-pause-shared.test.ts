import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { collect, spawnCli } from './helpers/cli.js';
import { reply } from './helpers/fake-openai-replies.js';
import { startFake } from './helpers/start-fake.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';

const REDIS = process.env.LLMQ_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

interface Event {
  readonly event: string;
  readonly reason?: string;
  /** When this test read the line, ms epoch. */
  readonly seenAt: number;
}

/** A run's `--json` events as they come, each stamped with when it was read. */
function eventsOf(child: ReturnType<typeof spawnCli>): Event[] {
  const events: Event[] = [];
  let partial = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    const lines = (partial + chunk.toString('utf8')).split('\n');
    partial = lines.pop()!;
    for (const line of lines) if (line) events.push({ ...(JSON.parse(line) as { event: string }), seenAt: Date.now() });
  });
  return events;
}

async function until(check: () => boolean, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('a rate-limit pause shared through Redis', () => {
  it('that another run made longer is told resumed once, when the longer pause ends, before the run sends again', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 6);
    await store.close();
    // run B's first request is held until 1 s after run A's arrives, then told to wait 10 s; A's is
    // told at once to wait 5 s. B's longer pause then outlasts the one A told, and A, paused, gets no
    // 429 of its own to hear of it: it learns it from Redis. (A fixed hold lost the race to a slow
    // start of A on a loaded machine: B's pause was then in Redis before A sent anything.)
    let releaseB!: () => void;
    const bHeld = new Promise<void>((resolve) => {
      releaseB = resolve;
    });
    const fake = await startFake({
      respond: (req) => {
        if (req.index === 1) return { ...reply.rateLimited(10_000), heldUntil: bHeld };
        if (req.index !== 2) return undefined;
        setTimeout(releaseB, 1000);
        return reply.rateLimited(5000);
      },
    });
    const args = ['run', '--db', db, '--base-url', fake.url, '--json', '-c', '1', '--redis', REDIS];
    const b = spawnCli(args);
    const bDone = collect(b, 40_000);
    await fake.waitForRequests(1);
    const a = spawnCli(args);
    const aEvents = eventsOf(a);
    const aDone = collect(a, 40_000);
    await until(() => aEvents.some((e) => e.event === 'paused'), 10_000);
    await until(() => fake.requests[0]!.answered !== null, 10_000);
    const longerFrom = Date.now();

    const [ra, rb] = await Promise.all([aDone, bDone]);
    expect(ra.code, ra.stderr).toBe(0);
    expect(rb.code, rb.stderr).toBe(0);
    expect(aEvents.filter((e) => e.event === 'paused')).toHaveLength(1);
    const resumed = aEvents.filter((e) => e.event === 'resumed');
    expect(resumed).toHaveLength(1);
    // not when the pause A told ended (5 s), but once B's ended (10 s after its 429)
    expect(resumed[0]!.seenAt).toBeGreaterThanOrEqual(longerFrom + 10_000 - 200);
    const startsAfterPause = aEvents.filter((e) => e.event === 'job:start').slice(1);
    expect(startsAfterPause.length).toBeGreaterThan(0);
    expect(aEvents.indexOf(resumed[0]!)).toBeLessThan(aEvents.indexOf(startsAfterPause[0]!));
    // and nothing was sent while the shared pause lasted
    const sentDuring = fake.requests.filter((r) => r.index > 2 && r.receivedAt < longerFrom + 10_000 - 200);
    expect(fake.requests.slice(0, 2).map((r) => r.answered)).toEqual([429, 429]);
    expect(sentDuring).toEqual([]);
  }, 60_000);
});

describe('a run that shared its pace through --redis', () => {
  it('proposes runs that share it too: its summary, and status after it (the password masked)', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 5);
    await store.close();
    const redis = REDIS.replace('redis://', 'redis://:s3cret@');
    const r = await collect(
      spawnCli(['run', '--db', db, '--provider', 'mock', '--mock-latency', '0', '--progress', 'none', '--redis', redis, '--limit', '2']),
    );
    expect(r.code, r.stderr).toBe(0);
    const shared = `--redis '${REDIS.replace('redis://', 'redis://:***@')}'`;
    // without it, each of several machines pasting the command paces alone, at the whole --rpm
    expect(r.stderr.replace(/ \\\n\s+/g, ' ')).toContain(`llmq run --provider mock --mock-latency 0 ${shared} --db ${db}`);
    const status = await collect(spawnCli(['status', '--db', db]));
    expect(status.stdout.replace(/\n\s+/g, ' ')).toContain(`llmq run --provider mock --mock-latency 0 ${shared} --db ${db}`);
    expect(r.stderr + status.stdout).not.toContain('s3cret');
  });
});
