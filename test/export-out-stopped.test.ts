import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { BIN, cliEnv, collect } from './helpers/cli.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';

// export --out writes a hidden temp file beside the target and renames it when complete. A signal
// ended the process before any cleanup ran, leaving the partial temp file (tens of MB) for good.
describe('export --out stopped by a signal', () => {
  it.each(['SIGINT', 'SIGTERM'] as const)(
    'on %s leaves neither the target nor its temp file',
    async (signal) => {
      const dir = tempDir();
      const db = join(dir, 'q.db');
      const store = new SqliteStore(db);
      await seedJobs(store, 20_000);
      // answered, with answers long enough that writing them takes a while (setup only: no public write makes 20,000 answers fast)
      store.db.prepare(`UPDATE jobs SET state = 'done', output = printf('%.4000c', 'x'), finished_at = 1, updated_at = 1`).run();
      await store.close();
      const outDir = join(dir, 'out');
      const out = join(outDir, 'all.jsonl');
      const child = spawn(process.execPath, [BIN, 'export', '--db', db, '--out', out], { env: cliEnv(), stdio: 'pipe' });
      const done = collect(child, 60_000);
      // the temp file is there and growing: the export is part way
      const tmp = await new Promise<string>((resolve, reject) => {
        const deadline = Date.now() + 30_000;
        const poll = setInterval(() => {
          const found = existsSync(outDir) ? readdirSync(outDir).find((f) => f.endsWith('.tmp')) : undefined;
          if (found && statSync(join(outDir, found)).size > 0) {
            clearInterval(poll);
            resolve(found);
          } else if (Date.now() > deadline) {
            clearInterval(poll);
            reject(new Error('no temp file appeared'));
          }
        }, 5);
      });
      expect(tmp).toMatch(/^\.all\.jsonl\.\d+\.[0-9a-f]+\.tmp$/);
      child.kill(signal);
      const r = await done;
      // 130 for either, as every command a signal stops (SIGTERM's own 143 reads as a crash)
      expect(r.signal ?? r.code).toBe(130);
      expect(readdirSync(outDir)).toEqual([]);
    },
    90_000,
  );

  it("an export after one that was killed (SIGKILL: no handler ran) removes that one's temp file, not one still written to", async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 3);
    await store.close();
    const out = join(dir, 'all.jsonl');
    const gone = spawnSync('true').pid;
    const stale = join(dir, `.all.jsonl.${gone}.0a1b2c3d.tmp`);
    const fresh = join(dir, `.all.jsonl.${gone}.4e5f6071.tmp`);
    const other = join(dir, `.other.jsonl.${gone}.0a1b2c3d.tmp`);
    for (const f of [stale, fresh, other]) writeFileSync(f, 'x'.repeat(1000));
    const old = (Date.now() - 120_000) / 1000;
    utimesSync(stale, old, old);
    utimesSync(other, old, old);
    const r = await collect(
      spawn(process.execPath, [BIN, 'export', '--db', db, '--out', out, '--state', 'pending'], { env: cliEnv(), stdio: 'pipe' }),
    );
    expect(r.code, r.stderr).toBe(0);
    // the fresh one may be another machine's export under way in a shared folder; the other target's is not this one's to judge
    expect(readdirSync(dir).sort()).toEqual([basename(fresh), basename(other), 'all.jsonl', 'q.db'].sort());
  });
});
