import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { row, T0 } from './helpers/stores.js';
import { runCli } from './helpers/cli.js';
import { ANSWERS, populate, RUN } from './helpers/populate.js';
import { tempDir } from './helpers/tmp.js';

/** A queue of one job, claimed by run-1 for its first attempt. */
async function oneClaimedJob() {
  const db = join(tempDir(), 'q.db');
  const store = new SqliteStore(db);
  const doc = row('n.txt', 'N doc');
  await store.enqueue([doc], T0);
  await store.startRun({ id: 'run-1', host: 'h', pid: 1, startedAt: T0, options: {} });
  await store.claim({ owner: 'run-1', limit: 1, now: T0, leaseUntil: T0 + 60_000, maxAttempts: 3 });
  return { db, store, doc };
}

describe('llmq show', () => {
  it('prints the item, its job, the request, every attempt and the answer', async () => {
    const dir = tempDir();
    const { db, keys } = await populate(dir);
    const r = await runCli(['show', 'sub/b.txt', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toMatch(/\x1B/);
    expect(r.stdout).toMatch(/^item sub\/b\.txt$/m);
    expect(r.stdout).toMatch(/^ {2}source {4}docs\/sub\/b\.txt$/m);
    expect(r.stdout).toContain(`  key       ${keys['sub/b.txt']}`);
    expect(r.stdout).toMatch(/^ {2}state {5}done$/m);
    expect(r.stdout).toMatch(/^ {2}model {5}gpt-4o-mini$/m);
    expect(r.stdout).toMatch(/^ {2}tokens {4}100 in, 20 out$/m);
    expect(r.stdout).toMatch(/^ {2}max_tokens=200$/m);
    expect(r.stdout).toMatch(/^ {2}\[user\]\n {4}Summarize in one sentence:\n {4}\n {4}B doc$/m);
    expect(r.stdout).toMatch(/^attempts \(1\)\n {2}#1 {2}\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ {2}HTTP 200 {5}1,234ms {2}done {2}run run-0001$/m);
    expect(r.stdout).toContain('answer\n  B says "hello", then, a comma\n  and a second line.\n');
    expect(ANSWERS['sub/b.txt']).toBeDefined();
  });

  it('shows each failed try with its status and error', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const r = await runCli(['show', 'd.txt', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^ {2}state {5}failed$/m);
    expect(r.stdout).toMatch(/^ {2}attempts {2}2$/m);
    expect(r.stdout).toMatch(/#1 .* HTTP 503 +30s {2}retry/);
    expect(r.stdout).toMatch(/^ {6}503 Service Unavailable$/m);
    expect(r.stdout).toMatch(/#2 .* HTTP 400 +210ms {2}failed/);
    expect(r.stdout).toMatch(/none: the job failed/);
  });

  it('tries that gave their attempt back (429s) are not numbered as attempts', async () => {
    const { db, store, doc } = await oneClaimedJob();
    const tried = (at: number, status: number, outcome: 'not_counted' | 'done', error: string | null) => ({
      key: doc.key,
      runId: 'run-1',
      attempt: 1,
      startedAt: at,
      endedAt: at + 50,
      status,
      outcome,
      error,
      usage: null,
    });
    const refused = 'HTTP 429: Rate limit reached for requests.';
    await store.recordAttempt(tried(T0 + 1000, 429, 'not_counted', refused), { countAttempt: false, error: refused });
    await store.recordAttempt(tried(T0 + 2000, 429, 'not_counted', refused), { countAttempt: false, error: refused });
    const usage = { promptTokens: 3, completionTokens: 4 };
    await store.complete(doc.key, {
      owner: 'run-1',
      output: 'N',
      response: '{}',
      usage,
      attempt: { ...tried(T0 + 3000, 200, 'done', null), usage },
    });
    await store.close();
    const answered = await runCli(['show', 'n.txt', '--db', db]);
    expect(answered.stdout).toMatch(
      /^attempts \(3 tries, 2 not counted\)\n {3}- {2}\d{4}-.* HTTP 429 +50ms {2}not counted {2}run run-1\n.*\n {3}- .*\n.*\n {2}#1 {2}\d{4}-.* HTTP 200 +50ms {2}done {2}run run-1$/m,
    );
    expect(answered.stdout).not.toContain('left no record');
  });

  it('a try out when its run died shows as lost even after 429s that gave their attempt back', async () => {
    const { db, store, doc } = await oneClaimedJob();
    const refused = 'HTTP 429: Rate limit reached for requests.';
    const tried = { key: doc.key, runId: 'run-1', attempt: 1, startedAt: T0 + 1000, endedAt: T0 + 1050, status: 429, usage: null };
    await store.recordAttempt({ ...tried, outcome: 'not_counted', error: refused }, { countAttempt: false, error: refused });
    // its second try went out, then the run died: the next run takes the job back
    expect(await store.startRetry(doc.key, 'run-1', T0 + 2000, T0 + 60_000)).toBe(1);
    await store.reclaim(T0 + 120_000, ['run-1']);
    await store.close();
    const r = await runCli(['show', 'n.txt', '--db', db]);
    expect(r.stdout).toMatch(/^attempts \(1 try, 1 not counted\)\n {2}1 try left no record: the run holding it died/m);
    expect(r.stdout).not.toContain('#1');
  });

  it('--json prints the ItemDetail', async () => {
    const dir = tempDir();
    const { db, keys } = await populate(dir);
    const r = await runCli(['show', 'c.txt', '--json', '--db', db]);
    const d = JSON.parse(r.stdout);
    expect(d.id).toBe('c.txt');
    expect(d.job.key).toBe(keys['a.txt']);
    expect(d.job.output).toBe(ANSWERS['a.txt']);
    expect(d.attempts).toHaveLength(1);
    expect(d.attempts[0]).toMatchObject({ runId: RUN, attempt: 1, status: 200, outcome: 'done', latencyMs: 1234 });
    expect(JSON.parse(d.job.request).messages[0].role).toBe('user');
  });

  it("finds an item by its job's key as run prints it (12 characters), naming the item on stderr", async () => {
    const dir = tempDir();
    const { db, keys } = await populate(dir);
    const failed = await runCli(['show', keys['d.txt']!.slice(0, 12), '--db', db]);
    expect(failed.code, failed.stderr).toBe(0);
    expect(failed.stdout).toMatch(/^item d\.txt$/m);
    expect(failed.stderr).toBe(`item d.txt (job ${keys['d.txt']!.slice(0, 12)})\n`);
    // a.txt and c.txt share a job: the first in input order, and that there are two
    const shared = await runCli(['show', keys['a.txt']!, '--db', db, '--json']);
    expect(JSON.parse(shared.stdout).id).toBe('a.txt');
    expect(shared.stderr).toBe(`job ${keys['a.txt']!.slice(0, 12)} is shared by 2 items; showing the first, a.txt\n`);
    // short hex is an id only: 'abc' finds nothing rather than some job
    expect((await runCli(['show', keys['d.txt']!.slice(0, 7), '--db', db])).code).toBe(1);
  });

  it('an item whose job other items share says so, naming them; one alone says nothing of it', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    // a.txt and c.txt rendered the same request
    const c = await runCli(['show', 'c.txt', '--db', db]);
    expect(c.stdout).toMatch(/^ {2}shared {4}with 1 other item \(one request, sent once\): a\.txt$/m);
    const d = await runCli(['show', 'd.txt', '--db', db]);
    expect(d.stdout).not.toContain('shared');
    expect(JSON.parse((await runCli(['show', 'c.txt', '--db', db, '--json'])).stdout).sharedWith).toEqual({ ids: ['a.txt'], more: false });
    expect(JSON.parse((await runCli(['show', 'd.txt', '--db', db, '--json'])).stdout).sharedWith).toEqual({ ids: [], more: false });
  });

  it('a key prefix shared by two jobs asks for more of the key', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const store = new SqliteStore(db);
    const keyed = (itemId: string, key: string) => ({ ...row(itemId, `text of ${itemId}`), key });
    // the first job has more items than one read brings: the second job must still be seen
    const many = Array.from({ length: 12 }, (_, i) => keyed(`x${i}`, `abcdef00${'1'.repeat(56)}`));
    await store.enqueue([...many, keyed('y', `abcdef00${'2'.repeat(56)}`)], T0);
    await store.close();
    const r = await runCli(['show', 'abcdef00', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.stderr).toBe("error: 'abcdef00' starts the keys of several jobs (abcdef001111…, abcdef002222…): give more of the key.\n");
    expect((await runCli(['show', 'abcdef002', '--db', db])).stdout).toMatch(/^item y$/m);
    // keys are lowercase hex; a key typed in capitals is the same key
    expect((await runCli(['show', 'ABCDEF002', '--db', db])).stdout).toMatch(/^item y$/m);
  });

  it('an unknown id is a clear error, exit 1', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const r = await runCli(['show', 'nope.txt', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/^error: No item with id 'nope\.txt' in .*q\.db\./);
    // a key prefix no item's job has: it says no item, not that no such job exists (one no item needs may)
    const hex = await runCli(['show', 'deadbeef00', '--db', db]);
    expect(hex.code).toBe(1);
    expect(hex.stderr).toMatch(/^error: No item with id 'deadbeef00', nor an item whose job key starts with it, in /);
    expect(hex.stderr).not.toContain('first 8 characters');
    // too short to be looked up as a key: it says how long one must be
    const short = await runCli(['show', '3d53', '--db', db]);
    expect(short.stderr).toMatch(/^error: No item with id '3d53' in .*A job key is found by its first 8 characters or more\.\n$/);
  });

  it('a path given as typed at enqueue (folder included) is an unknown id that names the id it likely means', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const r = await runCli(['show', 'docs/sub/b.txt', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/No item with id 'docs\/sub\/b\.txt' in .*: did you mean 'sub\/b\.txt' \(from .*\)\? llmq show sub\/b\.txt/);
  });

  it("a file's name without the subfolder it is in names the item it likely means", async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const r = await runCli(['show', 'b.txt', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`Ids of files in subfolders name them: did you mean 'sub/b.txt' (from `);
    expect(r.stderr).toContain(`? llmq show sub/b.txt --db ${db}\n`);
  });

  it('an id without its extension names the item it likely means', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const r = await runCli(['show', 'sub/b', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`Ids of files keep their extension: did you mean 'sub/b.txt' (from `);
    expect(r.stderr).toContain(`? llmq show sub/b.txt --db ${db}\n`);
    // an id with an extension of its own is not tried with another
    const dotted = await runCli(['show', 'sub/b.md', '--db', db]);
    expect(dotted.stderr).not.toContain('did you mean');
  });

  it('an id typed in another Unicode form (NFC for a name macOS wrote in NFD) names the item it likely means', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const nfd = 'résumé.txt'.normalize('NFD');
    mkdirSync(join(dir, 'docs'));
    writeFileSync(join(dir, 'docs', nfd), 'a document');
    expect((await runCli(['enqueue', join(dir, 'docs'), '--db', db])).code).toBe(0);
    const r = await runCli(['show', 'résumé.txt'.normalize('NFC'), '--db', db]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('Its name is spelled with other Unicode code points (NFD, as macOS writes names): did you mean ');
  });

  it('an id in another case names the item it likely means', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const r = await runCli(['show', 'SUB/B.TXT', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`Ids are case-sensitive: did you mean 'sub/b.txt' (from `);
    expect(r.stderr).toContain(`? llmq show sub/b.txt --db ${db}\n`);
  });

  it('a job failed because the runs holding it died says its tries left no record, not "none yet"', async () => {
    const { db, store } = await oneClaimedJob();
    // run-1 died holding it; two more runs took it and died; the claim after fails it (a crash loop)
    for (const [i, owner] of ['run-2', 'run-3'].entries()) {
      await store.reclaim(T0 + 61_000 * (i + 1), [i === 0 ? 'run-1' : 'run-2']);
      await store.claim({ owner, limit: 1, now: T0 + 61_000 * (i + 1), leaseUntil: T0 + 61_000 * (i + 2), maxAttempts: 3 });
    }
    await store.reclaim(T0 + 61_000 * 3, ['run-3']);
    await store.claim({ owner: 'run-4', limit: 1, now: T0 + 61_000 * 3, leaseUntil: T0 + 61_000 * 4, maxAttempts: 3 });
    await store.close();
    const r = await runCli(['show', 'n.txt', '--db', db]);
    expect(r.stdout).toMatch(/^ {2}error {5}gave up after 3 attempts: the run working on it died$/m);
    expect(r.stdout).toContain('3 tries left no record: the run holding them died (a request that had left may be billed)');
    expect(r.stdout).not.toContain('none yet');
  });
});
