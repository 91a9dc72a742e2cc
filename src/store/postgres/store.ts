import { LlmqError } from '../../errors.js';
import type { Store } from '../types.js';

/** Placeholder until the PostgreSQL store lands. */
export const PostgresStore = {
  async open(_url: string): Promise<Store> {
    throw new LlmqError('PostgreSQL support is not built yet. Use an SQLite path for --db.');
  },
};
