import { spawn } from 'node:child_process';
import { chmodSync, chownSync } from 'node:fs';
import { dirname } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { BIN, cliEnv, collect } from './helpers/cli.js';
import { seededQueue } from './helpers/seed.js';

// Someone else's queue: run as another user where this one is root (root writes anywhere), else
// with the write bits taken away from this user.
const asRoot = process.getuid?.() === 0;
const NOBODY = 65534;

function llmqAsOther(args: string[]) {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: cliEnv({ HOME: '/nonexistent' }),
    ...(asRoot ? { uid: NOBODY, gid: NOBODY } : {}),
  });
  return collect(child, 20_000);
}

/** A queue of three jobs in a folder the other user can read but not write. */
async function queueInReadOnlyFolder(): Promise<{ dir: string; db: string }> {
  const db = await seededQueue(3);
  const dir = dirname(db);
  chmodSync(dir, asRoot ? 0o755 : 0o555); // root's folder: others read it
  return { dir, db };
}

const writable: string[] = [];
afterEach(() => {
  for (const dir of writable.splice(0)) chmodSync(dir, 0o755); // the temp folder's cleanup writes in it
});

describe.skipIf(process.platform === 'win32')('a queue the user may read but not write', () => {
  it('in a folder not writable, at rest: says the folder is the problem and how to read a copy', async () => {
    const { dir, db } = await queueInReadOnlyFolder();
    writable.push(dir);
    const r = await llmqAsOther(['status', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `The folder ${dir} is not writable for you, and SQLite must create q.db-shm there to open ${db}, even to read it. ` +
        `Make the folder writable, or work on a copy: cp ${db} /tmp/llmq-copy.db`,
    );
  });

  it('in a folder not writable, while a run uses it (its -wal and -shm are there): status and export read it', async () => {
    const { dir, db } = await queueInReadOnlyFolder();
    writable.push(dir);
    const inUse = new SqliteStore(db); // as a run holds it: the -wal and -shm exist
    try {
      const status = await llmqAsOther(['status', '--db', db, '--json']);
      expect(status.code, status.stderr).toBe(0);
      expect(JSON.parse(status.stdout)).toMatchObject({ total: 3, counts: { pending: 3 } });
      const exported = await llmqAsOther(['export', '--db', db]);
      expect(exported.code, exported.stderr).toBe(0);
      expect(exported.stdout.trim().split('\n')).toHaveLength(3);
    } finally {
      await inUse.close();
    }
  });

  it('a file not writable in a folder that is: read, not refused', async () => {
    const db = await seededQueue(2);
    const dir = dirname(db);
    if (asRoot) {
      chownSync(dir, NOBODY, NOBODY);
      chownSync(db, NOBODY, NOBODY);
    }
    chmodSync(db, 0o444);
    const r = await llmqAsOther(['status', '--db', db, '--json']);
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ total: 2 });
  });
});
