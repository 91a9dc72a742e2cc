import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { onTestFinished, type TestContext } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite/store.js';
import { PostgresStore } from '../../src/store/postgres/store.js';
import { MIGRATIONS as PG_MIGRATIONS } from '../../src/store/postgres/migrations.js';
import { MIGRATIONS as SQLITE_MIGRATIONS } from '../../src/store/sqlite/migrations.js';
import Database from 'better-sqlite3';
import type { EnqueueRow, Store } from '../../src/store/types.js';
import { jobKey } from '../../src/request.js';
import { tempDir } from './tmp.js';

/** Tests reach PostgreSQL here; CI points it at the machine's server. */
export const PG_URL = process.env.LLMQ_TEST_PG_URL || 'postgres://postgres@127.0.0.1:5432/test';

/** One place a queue lives, and a way to open more connections to it (a second run, another machine). */
export interface StoreFixture {
  readonly store: Store;
  /** The --db value for this queue. */
  readonly location: string;
  /** Another store on the same database: its own connection (SQLite) or its own pool (PostgreSQL). */
  openAnother(): Promise<Store>;
}

export interface StoreKind {
  readonly name: 'sqlite' | 'postgres';
  /** Why this kind is skipped here, or null when it runs. */
  readonly skipReason: string | null;
  /** A fresh, empty queue for the current test, closed (and cleaned up when the test passed) after it. */
  fresh(): Promise<StoreFixture>;
}

async function probePostgres(): Promise<string | null> {
  const client = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    await client.query('SELECT 1');
    return null;
  } catch (error) {
    return `PostgreSQL is not reachable at ${PG_URL} (${(error as Error).message}); set LLMQ_TEST_PG_URL to run the PostgreSQL half`;
  } finally {
    await client.end().catch(() => {});
  }
}

const pgDown = await probePostgres();
// In CI the PostgreSQL half must run: an unreachable server fails its tests instead of skipping them.
const pgSkip = pgDown && process.env.CI !== 'true' ? pgDown : null;
if (pgSkip) process.stderr.write(`skipping PostgreSQL store tests: ${pgSkip}\n`);

function closeAfter(stores: Store[]): void {
  onTestFinished(async () => {
    for (const s of stores) await s.close().catch(() => {});
  });
}

/**
 * Rows of `jobs` inserted and updated in the schema of `url`, as PostgreSQL's statistics count them
 * once the connections that wrote them are closed (read until `inserted` rows show and two reads
 * agree: the counts of each backend arrive as it exits, the updates maybe after the inserts).
 */
export async function pgJobWrites(url: string, inserted: number): Promise<{ ins: number; upd: number } | undefined> {
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    let stats: { ins: number; upd: number } | undefined;
    let before: string | undefined;
    for (let tries = 0; tries < 50; tries++) {
      if (tries) await new Promise((r) => setTimeout(r, 100));
      const r = await client.query<{ ins: number; upd: number }>(
        `SELECT n_tup_ins::int AS ins, n_tup_upd::int AS upd FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'jobs'`,
        [new URL(url).searchParams.get('schema')],
      );
      stats = r.rows[0];
      const now = JSON.stringify(stats);
      if (stats?.ins === inserted && now === before) break;
      before = now;
    }
    return stats;
  } finally {
    await client.end();
  }
}

/** A fresh schema name for one test. */
export function freshSchema(): string {
  return `llmq_t_${randomBytes(6).toString('hex')}`;
}

/** A URL to a fresh schema, dropped after the test when it passed and kept (and named) when it failed. */
export function freshPgUrl(): string {
  if (pgDown) throw new Error(pgDown);
  const schema = freshSchema();
  const url = `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}schema=${schema}`;
  onTestFinished(async (ctx) => {
    if (ctx.task.result?.state === 'fail') {
      process.stderr.write(`kept PostgreSQL schema for inspection: ${schema} in ${PG_URL}\n`);
      return;
    }
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await client.end();
  });
  return url;
}

export const STORE_KINDS: readonly StoreKind[] = [
  {
    name: 'sqlite',
    skipReason: null,
    async fresh() {
      const location = join(tempDir(), 'q.db');
      const stores: Store[] = [new SqliteStore(location)];
      closeAfter(stores);
      return {
        store: stores[0]!,
        location,
        async openAnother() {
          const s = new SqliteStore(location);
          stores.push(s);
          return s;
        },
      };
    },
  },
  {
    name: 'postgres',
    skipReason: pgSkip,
    async fresh() {
      const location = freshPgUrl();
      const stores: Store[] = [];
      closeAfter(stores);
      stores.push(await PostgresStore.open(location));
      return {
        store: stores[0]!,
        location,
        async openAnother() {
          const s = await PostgresStore.open(location);
          stores.push(s);
          return s;
        },
      };
    },
  },
];

/** Skip the current test when its store kind cannot run here (only outside CI). */
export function skipUnavailable(kind: StoreKind, ctx: TestContext): void {
  if (kind.skipReason) ctx.skip(kind.skipReason);
}

/** An enqueue row for a document whose request is determined by `text` (same text, same job). */
export function row(
  itemId: string,
  text: string,
  options: { priority?: number; model?: string; source?: string; meta?: Record<string, unknown> | null } = {},
): EnqueueRow {
  const model = options.model ?? 'gpt-test';
  const request = JSON.stringify({ messages: [{ content: text, role: 'user' }], model });
  return {
    itemId,
    source: options.source ?? `${itemId}.txt`,
    meta: options.meta ?? null,
    key: jobKey(request),
    request,
    model,
    priority: options.priority ?? 0,
  };
}

/** `n` distinct documents `doc-0000`... */
export function rows(n: number, options: { priority?: number; prefix?: string } = {}): EnqueueRow[] {
  const prefix = options.prefix ?? 'doc';
  return Array.from({ length: n }, (_, i) => row(`${prefix}-${String(i).padStart(4, '0')}`, `${prefix} text ${i}`, options));
}

export const OWNER = 'run-a';
export const T0 = 1_700_000_000_000;

/** A run's live figures when it did nothing: for finishing runs in store tests. */
export const NO_STATS = Object.freeze({
  done: 0,
  failed: 0,
  retried: 0,
  requests: 0,
  rateLimited: 0,
  promptTokens: 0,
  completionTokens: 0,
  jobsPerSecond: 0,
});

/** Answer the job `key`, claimed by `owner`: an answer of 10 tokens in and 5 out. */
export async function answerJob(store: Store, key: string, owner = OWNER): Promise<void> {
  const usage = { promptTokens: 10, completionTokens: 5 };
  await store.complete(key, {
    owner,
    output: 'an answer',
    response: '{}',
    usage,
    attempt: { key, runId: owner, attempt: 1, startedAt: T0, endedAt: T0 + 10, status: 200, outcome: 'done', error: null, usage },
  });
}

/** Answer the one pending job whose user message is `content`, and hand the others back pending. */
export async function answerOnly(store: Store, content: string): Promise<void> {
  const now = Date.now();
  const { jobs } = await store.claim(claimOpts({ owner: 'answer-only', now, limit: 1000 }));
  const job = jobs.find((j) => JSON.parse(j.request).messages.at(-1).content === content);
  if (!job) throw new Error(`no pending job asks ${JSON.stringify(content)}`);
  await answerJob(store, job.key, 'answer-only');
  await store.release('answer-only', { refund: true, now });
}

/** Claim options with sensible defaults around `T0`. */
export function claimOpts(o: { owner?: string; limit?: number; now?: number; leaseUntil?: number; maxAttempts?: number } = {}) {
  const now = o.now ?? T0;
  return { owner: o.owner ?? OWNER, limit: o.limit ?? 100, now, leaseUntil: o.leaseUntil ?? now + 60_000, maxAttempts: o.maxAttempts ?? 3 };
}

/** Everything a store exports, as an array (test data is small). */
export async function exported(store: Store, states?: Parameters<Store['exportPages']>[0]['states']) {
  const out = [];
  for await (const page of store.exportPages({ states })) out.push(...page);
  return out;
}

/**
 * The PostgreSQL schema of `url` as an llmq that stopped at schema `version` left it: its
 * migrations applied and recorded, then `fill` writes the rows of that time. What an upgrade on the
 * next open must keep.
 */
export async function pgSchemaAtVersion(url: string, version: number, fill: (client: pg.Client) => Promise<unknown>): Promise<void> {
  const schema = new URL(url).searchParams.get('schema')!;
  const client = new pg.Client({ connectionString: PG_URL });
  await client.connect();
  try {
    await client.query(`CREATE SCHEMA "${schema}"; SET search_path = "${schema}";
      CREATE TABLE llmq_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`);
    for (const m of PG_MIGRATIONS.filter((x) => x.version <= version)) {
      await client.query(m.sql);
      await client.query('INSERT INTO llmq_migrations VALUES ($1, $2, 0)', [m.version, m.name]);
    }
    await fill(client);
  } finally {
    await client.end();
  }
}

/**
 * A new SQLite queue as this llmq's migrations leave it at `version` and no further (each migration
 * commits alone, so a crash or a full disk between two can leave one there), with `fill` then run in
 * it: the rows of that time. What an upgrade on the next open must keep. Returns its path.
 */
export function sqliteAtVersion(version: number, fill: string): string {
  const path = join(tempDir(), 'q.db');
  const raw = new Database(path);
  raw.exec('CREATE TABLE llmq_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  for (const m of SQLITE_MIGRATIONS.filter((x) => x.version <= version)) {
    raw.exec(m.sql);
    m.apply?.(raw);
    raw.prepare('INSERT INTO llmq_migrations VALUES (?, ?, ?)').run(m.version, m.name, 0);
  }
  raw.exec(fill);
  raw.close();
  return path;
}
