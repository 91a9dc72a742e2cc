/**
 * Hardening: secrets never reach a message, the database or `status`/`show`/`export`. Each test
 * greps everything the user and the database can see for the secret: stdout, stderr, and the
 * database itself (the SQLite file's bytes, or every row of the PostgreSQL schema).
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { runCli, type CliResult } from './helpers/cli.js';
import { enqueueJsonl, readDb } from './helpers/e2e.js';
import { reply } from './helpers/fake-openai.js';
import { freshPgUrl, PG_URL, STORE_KINDS } from './helpers/stores.js';
import { tempDir } from './helpers/tmp.js';
import { startFake } from './helpers/start-fake.js';

const docs = (n: number) => Array.from({ length: n }, (_, i) => ({ id: `doc-${i}`, text: `document number ${i}` }));

/** Every byte of an SQLite queue: the file and its WAL, should a run have left one. */
function sqliteBytes(db: string): string {
  const dir = join(db, '..');
  const name = db.slice(dir.length + 1);
  return readdirSync(dir)
    .filter((f) => f.startsWith(name))
    .map((f) => readFileSync(join(dir, f)).toString('latin1'))
    .join('\n');
}

/** Every row of every table in the PostgreSQL schema, as text. */
async function pgSchemaDump(schema: string): Promise<string> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    const tables = await client.query<{ table_name: string }>('SELECT table_name FROM information_schema.tables WHERE table_schema = $1', [
      schema,
    ]);
    expect(tables.rows.length).toBeGreaterThan(0);
    const parts: string[] = [];
    for (const { table_name } of tables.rows) {
      parts.push(JSON.stringify((await client.query(`SELECT * FROM "${schema}"."${table_name}"`)).rows));
    }
    return parts.join('\n');
  } finally {
    await client.end();
  }
}

function output(...results: CliResult[]): string {
  return results.map((r) => `${r.stdout}\n${r.stderr}`).join('\n');
}

describe('URL credentials', () => {
  it('a user name or password in --base-url, LLMQ_BASE_URL or OPENAI_BASE_URL is refused at once and never echoed', async () => {
    const fake = await startFake({ latencyMs: 5 });
    const dir = tempDir();
    const { db } = await enqueueJsonl(dir, docs(5));
    const withPassword = fake.url.replace('http://', 'http://user:pw-SECRET-3141@');
    const tries = [
      await runCli(['run', '--db', db, '--base-url', withPassword], { timeoutMs: 20_000 }),
      await runCli(['run', '--db', db], { env: { LLMQ_BASE_URL: withPassword }, timeoutMs: 20_000 }),
      await runCli(['run', '--db', db], { env: { OPENAI_BASE_URL: withPassword }, timeoutMs: 20_000 }),
    ];
    for (const r of tries) {
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(/--base-url.* contains a user name or password; put the key in LLMQ_API_KEY instead/);
    }
    expect(output(...tries)).not.toContain('SECRET-3141');
    expect(fake.received).toBe(0);
    const { jobs, attempts, runs } = readDb(db);
    expect(jobs.every((j) => j.state === 'pending' && j.attempts === 0)).toBe(true);
    expect(attempts).toEqual([]);
    expect(runs).toEqual([]);
    expect(sqliteBytes(db)).not.toContain('SECRET-3141');
  });

  it('passwords in a PostgreSQL --db and a --redis URL are masked in every message, in status, show and export, and in the database', async (ctx) => {
    const skip = STORE_KINDS.find((k) => k.name === 'postgres')!.skipReason;
    if (skip) ctx.skip(skip);
    const fake = await startFake({ latencyMs: 5 });
    const dir = tempDir();
    const file = join(dir, 'in.jsonl');
    writeFileSync(
      file,
      docs(12)
        .map((d) => JSON.stringify(d))
        .join('\n') + '\n',
    );
    // Unescaped `@` in both passwords: URL parsers take the last `@` as the end of the password,
    // and so must the masking, or the part after the first `@` is printed.
    const fresh = new URL(freshPgUrl());
    const schema = fresh.searchParams.get('schema')!;
    const db = `${fresh.protocol}//${fresh.username || 'postgres'}:pg@SECRET-5417@${fresh.host}${fresh.pathname}${fresh.search}`;
    const redis = 'redis://:rd@SECRET-9921@127.0.0.1:6379'; // the local Redis has no password: ioredis warns and goes on

    const results: CliResult[] = [];
    const cli = async (args: string[], env: Record<string, string> = {}) => {
      const r = await runCli(args, { env, timeoutMs: 30_000 });
      results.push(r);
      return r;
    };
    expect((await cli(['enqueue', file, '--db', db, '--max-tokens', '16'])).code).toBe(0);
    const run = await cli(['run', '--db', db, '--base-url', fake.url, '--redis', redis, '--rpm', '6000', '--progress', 'plain']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toContain(':***@');
    expect((await cli(['run', '--db', db, '--base-url', fake.url, '--progress', 'plain'], { LLMQ_REDIS_URL: redis })).code).toBe(0);
    expect((await cli(['status', '--db', db])).stdout).toContain('postgres://');
    expect((await cli(['status', '--db', db, '--json'])).code).toBe(0);
    expect((await cli(['show', 'doc-3', '--db', db])).code).toBe(0);
    expect((await cli(['export', '--db', db])).stdout.trim().split('\n')).toHaveLength(12);
    // Failures quote the URLs: a user Redis does not know, a database the server does not have.
    const wrongRedisUser = await cli([
      'run',
      '--db',
      db,
      '--base-url',
      fake.url,
      '--redis',
      'redis://nobody:rd@SECRET-9921@127.0.0.1:6379',
    ]);
    expect(wrongRedisUser.code).toBe(1);
    expect(wrongRedisUser.stderr).toContain('Cannot reach Redis at redis://nobody:***@127.0.0.1:6379');
    const noDb = await cli(['status', '--db', db.replace(/\/test\?/, '/llmq_no_such_db?')]);
    expect(noDb.code).toBe(1);
    expect(noDb.stderr).toContain(':***@');

    expect(output(...results)).not.toContain('SECRET-5417');
    expect(output(...results)).not.toContain('SECRET-9921');
    const dump = await pgSchemaDump(schema);
    expect(dump).toContain('"state":"done"');
    expect(dump).not.toContain('SECRET');
  }, 120_000);
});

describe('the API key', () => {
  const KEY = 'sk-SUPERSECRETKEY-0123456789abcdef';
  const PREFIX = KEY.slice(0, 12); // sk-SUPERSECR: what providers echo of a key they reject

  it('a 12-character prefix of the key echoed in an error is kept out of stderr, show, export and the database', async () => {
    const fake = await startFake({ latencyMs: 5 });
    const dir = tempDir();
    const { db } = await enqueueJsonl(dir, docs(4));
    // Bearer <key>: the prefix of the key itself, cut as providers cut it.
    fake.respond((r) =>
      reply.badRequest(`Invalid request for key ${String(r.headers.authorization).slice(7, 19)}... (see your dashboard)`),
    );
    const run = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'plain'], { env: { LLMQ_API_KEY: KEY } });
    expect(run.code).toBe(2);
    expect(fake.requests[0]!.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(run.stderr).toContain('Invalid request for key [REDACTED]... (see your dashboard)');
    const show = await runCli(['show', 'doc-1', '--db', db, '--full']);
    expect(show.stdout).toContain('[REDACTED]');
    const exported = await runCli(['export', '--db', db, '--state', 'failed']);
    expect(exported.stdout.trim().split('\n')).toHaveLength(4);
    const { jobs, attempts } = readDb(db);
    expect(jobs.every((j) => j.state === 'failed' && j.error!.includes('[REDACTED]'))).toBe(true);
    expect(attempts.length).toBe(4);
    for (const text of [output(run, show, exported), sqliteBytes(db)]) {
      expect(text).not.toContain(PREFIX);
      expect(text).not.toContain(KEY.slice(3, 11));
    }
  });

  it('the key echoed in an answer is kept out of show, export and the database; other key-shaped text in it is the answer and kept', async () => {
    const fake = await startFake({ latencyMs: 5 });
    const dir = tempDir();
    const { db } = await enqueueJsonl(dir, docs(3));
    // a proxy that echoes what it was sent: the whole header in the content, a run of the key in another field
    const OTHER = 'sk-exampleexampleexample00'; // a key in the model's own text (documentation it summarised)
    fake.respond((r) => {
      const auth = String(r.headers.authorization);
      return {
        kind: 'raw',
        status: 200,
        body: {
          id: 'chatcmpl-1',
          object: 'chat.completion',
          model: 'gpt-4o-mini',
          system_fingerprint: `fp-${auth.slice(10, 30)}`, // 20 of the key's characters (the "-" before them is the key's too)
          choices: [{ index: 0, message: { role: 'assistant', content: `you sent ${auth}; example: ${OTHER}` }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 10, completion_tokens: 10, total_tokens: 20 },
        },
      };
    });
    const run = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'plain'], { env: { LLMQ_API_KEY: KEY } });
    expect(run.code, run.stderr).toBe(0);
    const show = await runCli(['show', 'doc-1', '--db', db, '--full']);
    expect(show.stdout).toContain(`you sent Bearer [REDACTED]; example: ${OTHER}`);
    const exported = await runCli(['export', '--db', db]);
    const rows = exported.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(rows.map((r) => r.output)).toEqual(Array(3).fill(`you sent Bearer [REDACTED]; example: ${OTHER}`));
    const { jobs } = readDb(db);
    expect(jobs.map((j) => [j.state, JSON.parse(j.response!).system_fingerprint])).toEqual(Array(3).fill(['done', 'fp[REDACTED]']));
    for (const text of [output(run, show, exported), sqliteBytes(db)]) {
      expect(text).not.toContain(PREFIX);
      expect(text).not.toContain(KEY.slice(9, 17));
      expect(text).not.toContain(KEY.slice(-8));
    }
  });

  it('a key shorter than 8 characters is warned about once and does not mangle messages', async () => {
    const fake = await startFake({ latencyMs: 5 });
    const dir = tempDir();
    const { db } = await enqueueJsonl(dir, docs(3));
    fake.respond(() => reply.badRequest('Bad request: unsupported parameter'));
    const run = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'plain'], { env: { LLMQ_API_KEY: 'a' } });
    expect(run.code).toBe(2);
    const warnings = run.stderr.match(
      /LLMQ_API_KEY is shorter than 8 characters; llmq cannot tell it apart from ordinary text and will not redact it/g,
    );
    expect(warnings).toHaveLength(1);
    // a key is set: the start line does not say there is none
    expect(run.stderr).toMatch(/^run [0-9a-f]{8} on .* via openai-compatible \(http:[^)]*\): 3 jobs to do$/m);
    expect(run.stderr).toContain('HTTP 400: Bad request: unsupported parameter');
    expect(readDb(db).jobs.map((j) => j.error)).toEqual(Array(3).fill('HTTP 400: Bad request: unsupported parameter'));
  });
});
