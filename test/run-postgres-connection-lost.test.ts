import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { collect, runCli, spawnCli } from './helpers/cli.js';
import { startFake } from './helpers/start-fake.js';
import { freshPgUrl, PG_URL, STORE_KINDS, skipUnavailable } from './helpers/stores.js';
import { tempDir } from './helpers/tmp.js';

const postgres = STORE_KINDS.find((k) => k.name === 'postgres')!;
const JOBS = 600;

/** End every connection of one application on the server, as a restart or an administrator does (57P01). */
async function endConnections(applicationName: string): Promise<number> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    const r = await client.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [applicationName]);
    return r.rowCount ?? 0;
  } finally {
    await client.end();
  }
}

describe('a run on PostgreSQL whose connections the server ends', () => {
  it('goes on: every job done once, no answer lost or sent again', async (ctx) => {
    skipUnavailable(postgres, ctx);
    // the server ends the connections while answers are being stored and jobs claimed, eight times
    const fake = await startFake({ latencyMs: 20 });
    const app = `llmq_lost_${randomBytes(4).toString('hex')}`;
    const db = `${freshPgUrl()}&application_name=${app}`;
    const file = join(tempDir(), 'in.jsonl');
    writeFileSync(file, Array.from({ length: JOBS }, (_, i) => `{"id":"d${i}","text":"document ${i}"}\n`).join(''));
    expect((await runCli(['enqueue', file, '--db', db, '--max-tokens', '16'])).code).toBe(0);

    const child = spawnCli(['run', '--db', db, '--base-url', fake.url, '-c', '16', '--progress', 'plain'], {
      env: { OPENAI_API_KEY: 'sk-test-connection-lost-0000' },
    });
    const done = collect(child, 120_000);
    let ended = 0;
    for (const after of [60, 120, 180, 240, 300, 360, 420, 480]) {
      while (fake.received < after) await new Promise((r) => setTimeout(r, 10));
      ended += await endConnections(app);
    }
    const r = await done;
    expect(ended).toBeGreaterThan(0);
    expect(r.stderr).not.toContain('unexpected error');
    expect(r.code, r.stderr).toBe(0);

    const status = JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout);
    expect(status.counts).toMatchObject({ done: JOBS, pending: 0, running: 0, failed: 0 });
    // every answer stored once: none lost (then sent again) and none counted twice
    expect(fake.received).toBe(JOBS);
    const client = new pg.Client({ connectionString: db.replace(/&application_name=.*$/, '') });
    await client.connect();
    try {
      const schema = new URL(db).searchParams.get('schema')!;
      const attempts = await client.query(`SELECT count(*)::int AS n, count(DISTINCT job_key)::int AS jobs FROM "${schema}".attempts`);
      expect(attempts.rows[0]).toEqual({ n: JOBS, jobs: JOBS });
    } finally {
      await client.end();
    }
  }, 180_000);
});
