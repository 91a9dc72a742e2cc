import { expandHome } from '../home-path.js';
import { redactUrlCredentials } from '../url-credentials.js';
import { UsageError } from '../errors.js';
import { knownError } from '../errors-known.js';
import { withKnownErrors } from './known-errors.js';
import type { Store } from './types.js';

export const DEFAULT_DB = './llmq.db';

/** Where the database lives: the --db flag, then LLMQ_DB, then ./llmq.db. */
export function resolveDbLocation(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  return flag || (env.LLMQ_DB && expandHome(env.LLMQ_DB)) || DEFAULT_DB;
}

export function isPostgresUrl(location: string): boolean {
  return /^postgres(ql)?:\/\//i.test(location);
}

/**
 * Refuse a URL of a kind llmq does not speak: `mysql://x` must not become an SQLite file at
 * `mysql:/x`. Anything shaped like `scheme://` other than PostgreSQL is such a URL.
 */
export function checkLocation(location: string, flag = '--db'): void {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(location)?.[1];
  if (scheme !== undefined && !isPostgresUrl(location)) {
    throw new UsageError(
      `${flag} ${redactLocation(location)}: llmq does not speak ${scheme}://. ` +
        'Expected the path of an SQLite file (e.g. ./llmq.db) or a postgres:// or postgresql:// URL.',
    );
  }
}

export interface OpenOptions {
  /**
   * The queue must already exist (status, show, export, run, copy --from): never create a
   * database, and refuse a file that is not an llmq database without writing to it.
   */
  readonly existing?: boolean;
}

/** Open the store a location names: a PostgreSQL URL, or else an SQLite file path. */
export async function openStore(location: string, options: OpenOptions = {}): Promise<Store> {
  checkLocation(location);
  const shown = redactLocation(location);
  let store: Store;
  try {
    if (isPostgresUrl(location)) {
      const { PostgresStore } = await import('./postgres/store.js');
      store = await PostgresStore.open(location, { existing: options.existing });
    } else {
      const { SqliteStore } = await import('./sqlite/store.js');
      store = new SqliteStore(location, { existing: options.existing });
    }
  } catch (error) {
    throw knownError(error, { what: 'the database', path: shown }) ?? error;
  }
  return withKnownErrors(store, shown);
}

/** A URL or path safe to print or store: any password replaced. */
export function redactLocation(location: string): string {
  return redactUrlCredentials(location);
}
