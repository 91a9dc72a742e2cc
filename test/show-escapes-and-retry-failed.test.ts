import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { hostname } from 'node:os';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { describe, expect, it } from 'vitest';
import { MOCK_NOW, runCli } from './helpers/cli.js';
import { readDb } from './helpers/e2e.js';
import { tempDir } from './helpers/tmp.js';
import { seedJobs } from './helpers/seed.js';

describe('llmq show of an item whose id and document hold control characters', () => {
  it('shows them as escapes: the id on one line, the text with its lines, nothing sent to the terminal', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const id = 'new\nline \u001b[31mred';
    writeFileSync(join(dir, 'in.jsonl'), `${JSON.stringify({ id, text: 'hello\n\u001b[2Jcleared \u009b31m' })}\n`);
    expect((await runCli(['enqueue', join(dir, 'in.jsonl'), '--db', db])).code).toBe(0);
    const r = await runCli(['show', id, '--db', db]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n')[0]).toBe('item new\\u000aline \\u001b[31mred');
    expect(r.stdout).toContain('    hello\n    \\u001b[2Jcleared \\u009b31m');
    expect(r.stdout).not.toMatch(/[\u001b\u009b]/);
    // the id as shown (escaped) finds the item too: what a user copies from that line
    const shown = await runCli(['show', 'new\\u000aline \\u001b[31mred', '--db', db]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toBe(r.stdout);
  });

  it('forget takes the id as shown (escaped) too, and says one naming nothing as typed', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const id = 'new\nline \u001b[31mred';
    const lines = [
      { id, text: 'one' },
      { id: 'plain', text: 'two' },
    ];
    writeFileSync(join(dir, 'in.jsonl'), lines.map((l) => `${JSON.stringify(l)}\n`).join(''));
    expect((await runCli(['enqueue', join(dir, 'in.jsonl'), '--db', db])).code).toBe(0);
    const r = await runCli(['forget', 'new\\u000aline \\u001b[31mred', 'gone\\u000aid', '--db', db, '--json']);
    expect(r.code, r.stderr).toBe(2); // one id named nothing
    expect(JSON.parse(r.stdout)).toMatchObject({ items: 1, ids: [id], droppedJobs: 1, unknownIds: ['gone\\u000aid'] });
    // as typed: the form llmq shows ids in, which forget and show take back
    expect(r.stderr).toContain('no item with id "gone\\u000aid"\n');
    expect((await runCli(['show', 'plain', '--db', db])).code).toBe(0);
    expect((await runCli(['show', id, '--db', db])).code).toBe(1);
  });

  it('a plain retry-failed leaves the jobs cut off at max_tokens failed, however many other reasons there are', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 14);
    await store.startRun({ id: 'r', host: hostname(), pid: 1, startedAt: Date.now(), options: {} });
    const { jobs } = await store.claim({ owner: 'r', limit: 14, now: Date.now(), leaseUntil: Date.now() + 60_000, maxAttempts: 5 });
    // twelve other reasons, two of them twice: the cut-off one is not among status's top ten groups
    for (const [i, j] of jobs.entries()) {
      const error = i === 13 ? 'the answer was cut off at max_tokens before its JSON was whole' : `HTTP 500: reason ${i % 12}`;
      await store.fail(j.key, 'r', error, null, Date.now());
    }
    await store.close();
    const r = await runCli(['retry-failed', '--db', db]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(
      /^Left 1 failed job cut off at max_tokens as it is: .* llmq retry-failed --error "cut off" --max-tokens N --db /,
    );
    expect(r.stderr).toContain('Put 13 failed jobs back to pending');
    expect(JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout).counts).toMatchObject({ failed: 1, pending: 13 });
  });

  /** A queue of one item, `doc`, whose job failed (a mock run where every try fails), and the flags of a mock run on it. */
  async function oneFailed(): Promise<{ db: string; mock: string[] }> {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    writeFileSync(join(dir, 'in.jsonl'), `${JSON.stringify({ id: 'doc', text: 'hello' })}\n`);
    expect((await runCli(['enqueue', join(dir, 'in.jsonl'), '--db', db])).code).toBe(0);
    const mock = [...MOCK_NOW, '--db', db];
    expect((await runCli(['run', ...mock, '--mock-failure-rate', '1', '--max-attempts', '1'])).code).toBe(2);
    return { db, mock };
  }

  it('says where retry-failed put a failed job back, where its attempts are counted afresh', async () => {
    const { db, mock } = await oneFailed();
    expect((await runCli(['retry-failed', '--db', db])).code).toBe(0);
    expect((await runCli(['run', ...mock])).code).toBe(0);
    const shown = (await runCli(['show', 'doc', '--db', db])).stdout;
    expect(shown).toMatch(
      /#1 .*HTTP 500 .*failed.*\n.*\n {2}\(failed, then put back by llmq retry-failed: attempts counted afresh\)\n {2}#1 .*HTTP 200 .*done/,
    );
  });

  it('after retry-failed --max-tokens, the cost of the cut-off answers of the request it replaced is said as billed and not kept', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    writeFileSync(join(dir, 'in.jsonl'), `${JSON.stringify({ id: 'doc', text: 'a document long enough to be cut off at five tokens' })}\n`);
    writeFileSync(join(dir, 's.json'), JSON.stringify({ type: 'object', properties: { title: { type: 'string' } }, required: ['title'] }));
    const enqueue = ['enqueue', join(dir, 'in.jsonl'), '--db', db, '--schema', join(dir, 's.json'), '--max-tokens', '5'];
    expect((await runCli(enqueue)).code).toBe(0);
    const run = ['run', ...MOCK_NOW, '--db', db, '--price', '0.15,0.6'];
    expect((await runCli(run)).code).toBe(2); // its JSON cut off: failed
    const costOf = (shown: string) => shown.match(/^ {2}cost {6}(.*)$/m)![1]!;
    const cutOff = costOf((await runCli(['show', 'doc', '--db', db])).stdout);
    expect(cutOff).toMatch(/^\$[0-9.]+ \(with 1 answer billed and not kept\)$/);
    expect((await runCli(['retry-failed', '--db', db, '--max-tokens', '300'])).code).toBe(0);
    expect((await runCli(run)).code).toBe(0);
    // the job's cost holds the cut-off answer's (status counts it): said so, where it was a bare sum
    const shown = await runCli(['show', 'doc', '--db', db, '--json']);
    const { job, attempts } = JSON.parse(shown.stdout);
    expect(attempts).toHaveLength(1);
    const replaced = cutOff.split(' ')[0];
    expect(job.costUsd).toBeGreaterThan(attempts[0].costUsd);
    expect(costOf((await runCli(['show', 'doc', '--db', db])).stdout)).toMatch(
      new RegExp(`^\\$[0-9.]+ \\(with \\${replaced} billed and not kept, for answers of the request it replaced\\)$`),
    );
  });

  it('with an --error that matches no failure, names the errors there are and exits 1, as a mistyped filter needs', async () => {
    const { db } = await oneFailed();
    const r = await runCli(['retry-failed', '--db', db, '--error', 'no such reason']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toMatch(
      /^error: No failed jobs whose error contains "no such reason"\. The failed jobs' errors: 1 "[^"]*HTTP 500[^"]*"\. Give --error a part of one of them\.\n$/,
    );
    // nothing was put back: the job is still failed
    expect((await runCli(['retry-failed', '--db', db, '--error', 'HTTP 500'])).stderr).toMatch(
      /^Put 1 failed job whose error contains "HTTP 500" back/,
    );
    // with no failures at all there is nothing to mistype: not an error
    const after = await runCli(['retry-failed', '--db', db, '--error', 'no such reason']);
    expect([after.code, after.stderr]).toEqual([0, 'No failed jobs whose error contains "no such reason". No job has failed.\n']);
  });

  it('with a run working the queue, says that run takes the jobs put back, not to start another', async () => {
    const { db } = await oneFailed();
    // a run of this process, alive and heartbeating now
    const store = new SqliteStore(db);
    await store.startRun({ id: 'working', host: hostname(), pid: process.pid, startedAt: Date.now(), options: { provider: 'mock' } });
    await store.close();
    const r = await runCli(['retry-failed', '--db', db]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe(`Put 1 failed job back to pending: the run working on this queue (${hostname()} pid ${process.pid}) takes it.\n`);
  });
});

describe('the offline mock after retry-failed', () => {
  it('draws its failures afresh in each run: the jobs put back do not all fail again at the same tries', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const docs = Array.from({ length: 40 }, (_, i) => JSON.stringify({ id: `d${i}`, text: `document ${i}` }));
    writeFileSync(join(dir, 'in.jsonl'), `${docs.join('\n')}\n`);
    expect((await runCli(['enqueue', join(dir, 'in.jsonl'), '--db', db])).code).toBe(0);
    const run = ['run', ...MOCK_NOW, '--db', db, '--mock-failure-rate', '0.5', '--max-attempts', '1'];
    const failed = async () => {
      const store = new SqliteStore(db);
      try {
        return (await store.status()).counts.failed;
      } finally {
        await store.close();
      }
    };
    expect((await runCli(run)).code).toBe(2);
    const first = await failed();
    expect(first).toBeGreaterThan(5);
    expect((await runCli(['retry-failed', '--db', db])).code).toBe(0);
    await runCli(run);
    // one seed for every run failed each of them again at its first try of the new run, all together
    // (taken for an outage); drawn afresh, about half are answered at once
    const { runs, attempts } = readDb(db);
    const firstTries = new Map<string, number | null>();
    for (const a of attempts) if (a.run_id === runs.at(-1)!.id && !firstTries.has(a.job_key)) firstTries.set(a.job_key, a.status);
    expect(firstTries.size).toBe(first);
    expect([...firstTries.values()].filter((status) => status === 200).length).toBeGreaterThan(0);
  });
});
