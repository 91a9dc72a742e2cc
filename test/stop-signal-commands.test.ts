import { existsSync, mkdirSync, readdirSync, utimesSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it, onTestFinished } from 'vitest';
import { PostgresStore } from '../src/store/postgres/store.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { collect, runCli, spawnCli } from './helpers/cli.js';
import { seedJobs } from './helpers/seed.js';
import { PG_URL, STORE_KINDS, freshPgUrl } from './helpers/stores.js';
import { tempDir } from './helpers/tmp.js';
import { waitFor } from './helpers/wait.js';

// A stop signal (Ctrl-C, SIGTERM, SIGHUP) ends every command with 130, and leaves nothing half made.

const pgSkip = STORE_KINDS.find((k) => k.name === 'postgres')!.skipReason !== null;

/** A client holding `table` of the queue at `url` locked until `release`: what reaches it waits. */
async function lockTable(url: string, table: string): Promise<{ release(): Promise<void>; waiting(): Promise<number> }> {
  const schema = new URL(url).searchParams.get('schema')!;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  await client.query('BEGIN');
  await client.query(`LOCK TABLE "${schema}".${table} IN ACCESS EXCLUSIVE MODE`);
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await client.query('COMMIT');
    await client.end();
  };
  onTestFinished(release);
  return {
    release,
    // of this table only: other tests' waits on other schemas are no sign that llmq reached it
    waiting: async () =>
      Number(
        (await client.query('SELECT count(*) AS n FROM pg_locks WHERE NOT granted AND relation = $1::regclass', [`"${schema}".${table}`]))
          .rows[0].n,
      ),
  };
}

describe('a stop signal ends a command with 130', () => {
  it.skipIf(pgSkip)('forget: a SIGTERM waits for the change, which is made and said, then exits 130', async () => {
    const url = freshPgUrl();
    const store = await PostgresStore.open(url);
    await seedJobs(store, 3);
    await store.close();
    const lock = await lockTable(url, 'items');
    const child = spawnCli(['forget', 'doc-1', '--db', url]);
    const done = collect(child);
    await waitFor(async () => (await lock.waiting()) > 0, { timeoutMs: 15_000, what: 'llmq to wait on the lock' });
    child.kill('SIGTERM');
    // told at once that it finishes the change first
    await new Promise((resolve) => setTimeout(resolve, 300));
    await lock.release();
    const r = await done;
    expect(r.code, r.stderr).toBe(130);
    expect(r.stderr).toContain('stopping (SIGTERM): the items are removed and said, or none is first');
    expect(r.stderr).toMatch(/forgot 1 item of /);
    const after = await PostgresStore.open(url);
    expect((await after.status()).items).toBe(2);
    await after.close();
  });

  it.skipIf(pgSkip)('a command with no stop of its own (status) exits 130 on SIGTERM, not 143', async () => {
    const url = freshPgUrl();
    const store = await PostgresStore.open(url);
    await seedJobs(store, 1);
    await store.close();
    const lock = await lockTable(url, 'job_counts');
    const child = spawnCli(['status', '--db', url]);
    const done = collect(child);
    await waitFor(async () => (await lock.waiting()) > 0, { timeoutMs: 15_000, what: 'llmq to wait on the lock' });
    child.kill('SIGTERM');
    const r = await done;
    expect(r.code, r.stderr).toBe(130);
    expect(r.stderr).toContain('stopped (SIGTERM)');
  });

  it('export --out-dir: a SIGTERM leaves no answer file half written, says how many it wrote, and exits 130', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 20_000);
    await store.close();
    const out = join(dir, 'out');
    const child = spawnCli(['export', '--db', db, '--out-dir', out, '--state', 'pending']);
    const done = collect(child);
    await waitFor(() => existsSync(out) && readdirSync(out).length > 100, { timeoutMs: 30_000, what: 'answer files' });
    child.kill('SIGTERM');
    const r = await done;
    expect(r.code, r.stderr).toBe(130);
    expect(r.stderr).toMatch(/stopped \(SIGTERM\): wrote [\d,]+ files under .*, none half; export again to write them all/);
    expect(readdirSync(out).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it("export --out-dir: removes a killed export's answer temp file from its folder once a minute old", async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 2);
    await store.close();
    const out = join(dir, 'out');
    expect((await runCli(['export', '--db', db, '--out-dir', out, '--state', 'pending'])).code).toBe(0);
    mkdirSync(join(out, 'sub'), { recursive: true });
    // a pid no process has (above the kernel's pid_max)
    const old = join(out, 'sub', 'a.txt.out.99999999.tmp');
    const fresh = join(out, 'b.txt.out.99999999.tmp');
    writeFileSync(old, 'half');
    writeFileSync(fresh, 'half');
    const twoMinutesAgo = new Date(Date.now() - 120_000);
    utimesSync(old, twoMinutesAgo, twoMinutesAgo);
    expect((await runCli(['export', '--db', db, '--out-dir', out, '--state', 'pending'])).code).toBe(0);
    expect(existsSync(old)).toBe(false);
    // another machine's export under way in a shared folder may write one now
    expect(existsSync(fresh)).toBe(true);
  });
});
