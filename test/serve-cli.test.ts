import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { runCli } from './helpers/cli.js';
import { startServe } from './helpers/dashboard.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';

describe('llmq serve (without a browser)', () => {
  it('says what to do when the port is taken or there is no queue, and never creates one', async () => {
    const dir = tempDir();
    const missing = await runCli(['serve', '--db', join(dir, 'nope.db'), '--port', '0']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/There is no queue at .*nope\.db/);
    expect(existsSync(join(dir, 'nope.db'))).toBe(false);

    const db = join(dir, 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 1);
    await store.close();
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const r = await runCli(['serve', '--db', db, '--port', String((taken.address() as AddressInfo).port)]);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/port \d+ on 127\.0\.0\.1 is in use\. Pick another with --port/);
    } finally {
      taken.close();
    }
    expect((await runCli(['serve', '--db', db, '--port', '70000'])).stderr).toMatch(/Expected a port number/);
  });

  it('listens on 127.0.0.1 by default, prints the token once, and stops cleanly on SIGTERM', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 1);
    await store.close();
    const s = await startServe(['--db', db]);
    expect(new URL(s.url).hostname).toBe('127.0.0.1');
    expect(s.stderr().match(/[0-9a-f]{64}/g)).toEqual([s.token]);
    const page = await fetch(s.url);
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(await page.text()).toContain('/vendor/uPlot.iife.min.js');
    expect((await fetch(new URL('/vendor/uPlot.iife.min.js', s.url))).status).toBe(200);
    const exited = new Promise<number | null>((resolve) => s.child.once('exit', (code) => resolve(code)));
    s.child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
