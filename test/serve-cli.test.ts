import { existsSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { hostname } from 'node:os';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { runCli } from './helpers/cli.js';
import { startServe, type ServeChild } from './helpers/dashboard.js';
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

  it('listens on 127.0.0.1 by default, prints the token once, and stops cleanly on SIGTERM with 130, as any command a signal stops', async () => {
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
    expect(await exited).toBe(130);
  });

  it('says that its queue file was removed and made again, where it showed the old queue live', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const first = new SqliteStore(db);
    await seedJobs(first, 3);
    await first.close();
    const s = await startServe(['--db', db]);
    try {
      const before = await fetch(new URL('/api/status', s.url));
      expect(((await before.json()) as { counts: { pending: number } }).counts.pending).toBe(3);
      for (const f of [db, `${db}-wal`, `${db}-shm`]) rmSync(f, { force: true });
      const again = new SqliteStore(db);
      await seedJobs(again, 5);
      await again.close();
      const after = await fetch(new URL('/api/status', s.url));
      expect(after.status).toBe(503);
      expect(((await after.json()) as { error: string }).error).toBe(
        `the queue cannot be read now: ${db} was replaced by another file since this dashboard opened it: stop llmq serve and start it again to see the queue there now`,
      );
      rmSync(db);
      expect(((await (await fetch(new URL('/api/status', s.url))).json()) as { error: string }).error).toContain(
        `${db} was removed since this dashboard opened it`,
      );
    } finally {
      s.child.kill('SIGTERM');
    }
  });

  it('answers only to its own names: a foreign Host is refused (DNS rebinding), on every interface too, unless --allow-host names it', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 1);
    await store.close();
    const serves: ServeChild[] = [];
    try {
      const loopback = await startServe(['--db', db]);
      serves.push(loopback);
      const port = new URL(loopback.url).port;
      const atLoopback = (host: string, headers = {}) => call(loopback.url, '/api/config', { host, ...headers });
      expect((await atLoopback(`localhost:${port}`)).status).toBe(200);
      expect((await atLoopback(`[::1]:${port}`)).status).toBe(200);
      const rebound = await atLoopback(`attacker.example:${port}`);
      expect(rebound.status).toBe(403);
      expect(rebound.body).toMatch(/Host attacker\.example:\d+ is not this dashboard's address.*--allow-host attacker\.example/);
      expect((await atLoopback('10.1.2.3')).status).toBe(403);
      // another port is the same dashboard, forwarded (ssh -L 9000:localhost:PORT, docker -p 9000:PORT)
      expect((await atLoopback('localhost:9000', { origin: 'http://localhost:9000' })).status).toBe(200);
      // but a page of another origin, even on this machine, may not call it
      expect((await atLoopback(`localhost:${port}`, { origin: 'http://localhost:3000' })).status).toBe(403);

      // every interface: any IP address and this machine's name, no other name
      const everywhere = await startServe(['--db', db, '--host', '0.0.0.0']);
      serves.push(everywhere);
      const p2 = new URL(everywhere.url).port;
      const atAny = (host: string, headers = {}) => call(everywhere.url, '/api/config', { host, ...headers });
      for (const host of [`127.0.0.1:${p2}`, `10.1.2.3:${p2}`, `[fd00::1]:${p2}`, `${hostname()}:${p2}`, `localhost:${p2}`]) {
        expect((await atAny(host)).status, host).toBe(200);
      }
      expect((await atAny(`attacker.example:${p2}`)).status).toBe(403);
      // the attacker's page, same-origin with its own name: refused all the same
      expect((await atAny(`attacker.example:${p2}`, { origin: `http://attacker.example:${p2}` })).status).toBe(403);
      expect((await atAny(`10.1.2.3:${p2}`, { origin: `http://attacker.example:${p2}` })).status).toBe(403);
      expect((await atAny(`10.1.2.3:${p2}`, { origin: `http://10.1.2.3:${p2}` })).status).toBe(200);
      // a page from any other address, on the same port too, is another origin
      expect((await atAny(`192.168.1.5:${p2}`, { origin: `http://10.66.66.66:${p2}` })).status).toBe(403);
      expect((await atAny('localhost:8080', { origin: 'http://localhost:8080' })).status).toBe(200);

      // a name the user allows, also behind an HTTPS proxy on another port
      const named = await startServe(['--db', db, '--host', '0.0.0.0', '--allow-host', 'Dash.Example', 'queue.internal']);
      serves.push(named);
      const p3 = new URL(named.url).port;
      const atNamed = (host: string, headers = {}) => call(named.url, '/api/config', { host, ...headers });
      expect((await atNamed(`dash.example:${p3}`)).status).toBe(200);
      expect((await atNamed('queue.internal', { origin: 'https://queue.internal' })).status).toBe(200);
      expect((await atNamed(`attacker.example:${p3}`)).status).toBe(403);
      expect((await atNamed(`10.1.2.3:${p3}`)).status).toBe(200);
      const proxied = await atNamed(`dash.example:${p3}`, { origin: 'https://elsewhere.example' });
      expect(proxied.status).toBe(403);
      expect(proxied.body).toContain(
        'if elsewhere.example is a proxy in front of it, start llmq serve with --allow-host elsewhere.example',
      );

      // an IPv6 address however it is written
      const v6 = await startServe(['--db', db, '--host', '::ffff:127.0.0.1']);
      serves.push(v6);
      expect((await call(v6.url, '/api/config', { host: `[::ffff:127.0.0.1]:${new URL(v6.url).port}` })).status).toBe(200);
      // what --allow-host could never match is refused when given
      for (const bad of ['https://dash.example', 'dash.example:443', 'dash.example/x']) {
        const r = await runCli(['serve', '--db', db, '--port', '0', '--allow-host', bad]);
        expect(r.code, bad).toBe(1);
        expect(r.stderr).toContain('Expected a host name or address, like dash.example or 10.0.0.5, without a scheme, port or path.');
      }
    } finally {
      await Promise.all(serves.map((s) => s.stop()));
    }
  });
});

/** A GET with headers fetch will not send as given (Host). */
function call(base: string, path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, base), { headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
