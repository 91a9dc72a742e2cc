import pg from 'pg';
import { StoreError } from '../../errors.js';
import { redactUrlCredentials } from '../../url-credentials.js';
import { isPgClosed } from '../transient.js';

/** Where a PostgreSQL queue lives: the server (the URL without our own parameters) and the schema. */
export interface PgTarget {
  /** The URL handed to `pg`, without `schema`/`search_path`. */
  readonly connectionString: string;
  readonly schema: string;
  /** Startup options: the URL's own, then the search_path that puts every query in `schema`. */
  readonly options: string;
  /** The URL as given, password replaced, for messages. */
  readonly location: string;
}

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]{0,62}$/;

/**
 * Read the schema from `?schema=` (or `?search_path=`, the name libpq users know), default `public`.
 * Only a plain identifier is taken: it goes into SQL and into the connection's startup options.
 */
export function parsePgUrl(url: string): PgTarget {
  const location = redactUrlCredentials(url);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch (error) {
    throw new StoreError(`Cannot read the PostgreSQL URL ${location}. Expected postgres://user:password@host:5432/database?schema=name.`, {
      cause: error,
    });
  }
  refuseSchemaLookalikes(parsed, location);
  const schema = parsed.searchParams.get('schema') ?? parsed.searchParams.get('search_path') ?? 'public';
  if (!IDENTIFIER.test(schema)) {
    throw new StoreError(
      schema.length > 63 && /^[A-Za-z_][A-Za-z0-9_]*$/.test(schema)
        ? `Expected the schema in ${location} to be at most 63 characters (PostgreSQL's longest name), got ${schema.length}.`
        : `Expected the schema in ${location} to be a plain name (letters, digits, _), got '${schema}'.`,
    );
  }
  // pg lets the URL's own `options` override ours, so take them out and send both together.
  const options = [parsed.searchParams.get('options'), `-c search_path=${quoteIdent(schema)}`].filter(Boolean).join(' ');
  for (const k of ['schema', 'search_path', 'options']) parsed.searchParams.delete(k);
  return { connectionString: parsed.toString(), schema, options, location };
}

/**
 * A URL parameter that looks meant to name the schema but is not one llmq reads (`?shema=`,
 * `?currentSchema=` from JDBC) is refused: the queue would go to `public` without a word, and the
 * next command, spelled right, would find nothing there. Other parameters go to the driver as given.
 */
function refuseSchemaLookalikes(url: URL, location: string): void {
  for (const name of url.searchParams.keys()) {
    if (name === 'schema' || name === 'search_path') continue;
    const n = name.toLowerCase().replace(/[-_]/g, '');
    if (n.includes('schema') || n.includes('searchpath') || editDistance(n, 'schema') <= 2) {
      throw new StoreError(
        `The URL ${location} has a parameter '${name}', which llmq does not read: did you mean schema? ` +
          "The queue's schema is given as ?schema=NAME (or ?search_path=NAME); without it, the queue is in public.",
      );
    }
  }
}

/** Levenshtein distance, for names a few letters long. */
function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}

/** Quote an identifier already checked against IDENTIFIER. */
export function quoteIdent(name: string): string {
  return `"${name}"`;
}

// BIGINT (ms timestamps, counts, sums) arrives as a string by default; every value we store fits a double.
const INT8_OID = 20;
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format as 'text');
  },
} as pg.CustomTypesConfig;

export function createPool(target: PgTarget): pg.Pool {
  const pool = new pg.Pool({
    connectionString: target.connectionString,
    // Every connection works in the queue's schema, set at startup so no query runs before it.
    options: target.options,
    types,
    max: 4,
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 10_000,
  });
  // An idle connection the server drops (restart, timeout) must not crash the process; the next
  // query opens a new one.
  pool.on('error', () => {});
  return pool;
}

const CONNECT_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'ECONNRESET',
  'EHOSTUNREACH',
  '28P01',
  '28000',
  '3D000',
  '42501',
]);

// pg's own words when the two ends disagree about SSL, and Node's TLS certificate codes.
const SSL_MESSAGE = /server does not support SSL|SSL connection|self[- ]signed certificate|certificate/i;
const TLS_CODES = /^(ERR_TLS_|ERR_SSL_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_|CERT_)/;

/** Turn a failure to reach or use the server into a message that says what to check; other errors pass through. */
export function connectionError(error: unknown, location: string): unknown {
  const e = error as { code?: string; message?: string };
  if (/server does not support SSL/i.test(e.message ?? '')) {
    return new StoreError(
      `Cannot connect to PostgreSQL at ${location}: the server does not support SSL, and the URL asks for it. ` +
        'Remove sslmode from the URL (or set sslmode=disable) for a server without SSL, or enable SSL on the server.',
      { cause: error },
    );
  }
  if (TLS_CODES.test(e.code ?? '') || (!e.code && SSL_MESSAGE.test(e.message ?? ''))) {
    return new StoreError(
      `Cannot connect to PostgreSQL at ${location} over SSL: ${e.message ?? String(error)}. ` +
        'Check the server certificate, or the sslmode and sslrootcert in the URL.',
      { cause: error },
    );
  }
  if (isPgClosed(e.message)) {
    return new StoreError(
      `Cannot connect to PostgreSQL at ${location}: the server there closed the connection at once (${e.message}). ` +
        "Check that the host and port in the URL are PostgreSQL's, and that the server accepts this client (pg_hba.conf).",
      { cause: error },
    );
  }
  const timedOut = /connection timeout|timeout expired/i.test(e.message ?? '');
  if (!CONNECT_CODES.has(e.code ?? '') && !timedOut) return error;
  const hint =
    e.code === '28P01' || e.code === '28000'
      ? 'Check the user and password in the URL.'
      : e.code === '3D000'
        ? 'Check the database name in the URL, or create it (createdb).'
        : e.code === '42501'
          ? 'Check that the user may create tables (and the schema) there, or have them created for it.'
          : 'Check that PostgreSQL is running and reachable at that host and port.';
  const what = e.code === '42501' ? 'set up the llmq tables in' : 'connect to';
  // The driver's own text may quote the connection string it was given.
  const said = redactUrlCredentials(e.message ?? String(error));
  return new StoreError(`Cannot ${what} PostgreSQL at ${location}: ${said}. ${hint}`, { cause: error });
}

// Deadlock and serialization failures are safe to retry: the transaction rolled back whole.
const RETRYABLE = new Set(['40P01', '40001']);

/** Run a function's queries in one transaction on one connection, retrying it after a deadlock. */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>, begin = 'BEGIN'): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    const client = await pool.connect();
    try {
      await client.query(begin);
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      if (attempt < 5 && RETRYABLE.has((error as { code?: string }).code ?? '')) continue;
      throw error;
    } finally {
      client.release();
    }
  }
}

/** One statement is its own transaction; retry it after a deadlock like `inTransaction`. */
export async function query<R extends pg.QueryResultRow = Record<string, unknown>>(
  pool: pg.Pool,
  sql: string,
  params: unknown[] = [],
): Promise<pg.QueryResult<R>> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await pool.query<R>(sql, params);
    } catch (error) {
      if (attempt < 5 && RETRYABLE.has((error as { code?: string }).code ?? '')) continue;
      throw error;
    }
  }
}
