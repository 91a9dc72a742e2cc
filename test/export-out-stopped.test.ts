import { spawn } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
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
      expect(r.signal ?? r.code).toBe(signal === 'SIGINT' ? 'SIGINT' : 'SIGTERM');
      expect(readdirSync(outDir)).toEqual([]);
    },
    90_000,
  );
});
