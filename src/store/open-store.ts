import { redactUrlCredentials } from '../url-credentials.js';
import type { Store } from './types.js';

export const DEFAULT_DB = './llmq.db';

/** Where the database lives: the --db flag, then LLMQ_DB, then ./llmq.db. */
export function resolveDbLocation(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  return flag || env.LLMQ_DB || DEFAULT_DB;
}

export function isPostgresUrl(location: string): boolean {
  return /^postgres(ql)?:\/\//i.test(location);
}

/** Open the store a location names: a PostgreSQL URL, or else an SQLite file path. */
export async function openStore(location: string): Promise<Store> {
  if (isPostgresUrl(location)) {
    const { PostgresStore } = await import('./postgres/store.js');
    return PostgresStore.open(location);
  }
  const { SqliteStore } = await import('./sqlite/store.js');
  return new SqliteStore(location);
}

/** A URL or path safe to print or store: any password replaced. */
export function redactLocation(location: string): string {
  return redactUrlCredentials(location);
}
