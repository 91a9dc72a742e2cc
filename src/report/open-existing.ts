import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { LlmqError } from '../errors.js';
import { knownError } from '../errors-known.js';
import { checkLocation, isPostgresUrl, openStore, redactLocation } from '../store/open-store.js';
import { hasSqliteHeader, readHead } from '../store/sqlite/files.js';
import type { Store } from '../store/types.js';
import { unfinishedCopy } from '../store/copy.js';

/**
 * Open a queue that must already exist. Reading commands (`status`, `show`, `export`, `copy --from`)
 * would otherwise create an empty database at a mistyped path and report an empty queue, or write
 * llmq's tables into a file that is something else.
 */
export async function openExistingStore(location: string): Promise<Store> {
  await checkExistingQueue(location);
  return refuseUnfinishedCopy(await openStore(location, { existing: true }), location);
}

/**
 * What `openExistingStore` checks before it opens, without opening: `run` asks first, so that
 * "no queue here" is said before what a run would need next (an API key).
 */
export async function checkExistingQueue(location: string): Promise<void> {
  checkLocation(location);
  if (!isPostgresUrl(location) && location !== ':memory:') await checkQueueFile(location);
}

/**
 * The store, unless a copy into it has not finished (stopped halfway, or at work): it then holds jobs
 * without their items, which a run would send, and status miscount; closed and refused.
 */
export async function refuseUnfinishedCopy(store: Store, location: string): Promise<Store> {
  const copying = await store.copier.copyInProgress().catch(async (error) => {
    await store.close();
    throw error;
  });
  if (!copying) return store;
  await store.close();
  throw new LlmqError(`${redactLocation(location)} ${unfinishedCopy(copying)}`);
}

/** The file must be there and look like a database; whether it holds llmq's tables is checked on open. */
async function checkQueueFile(path: string): Promise<void> {
  const shown = redactLocation(path);
  const create = `Create one with: llmq enqueue <folder|file.jsonl> --db ${shown} (or point --db / LLMQ_DB at an existing queue).`;
  let size: number;
  let head: Buffer;
  try {
    const s = await stat(path);
    if (s.isDirectory())
      throw new LlmqError(`${shown} is a folder, not a queue. Point --db at the database file in it (e.g. ${join(shown, 'llmq.db')}).`);
    if (!s.isFile()) throw new LlmqError(`${shown} is not a regular file, so it is not a queue. Point --db at an llmq database file.`);
    size = s.size;
    head = await readHead(path);
  } catch (error) {
    if (error instanceof LlmqError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new LlmqError(`There is no queue at ${shown}. ${create}`);
    throw knownError(error, { what: 'the database', path: shown }) ?? error;
  }
  if (size === 0) throw new LlmqError(`${shown} is an empty file, not an llmq queue. ${create}`);
  if (!hasSqliteHeader(head)) {
    throw new LlmqError(`${shown} is not an SQLite database, so not an llmq queue. Point --db at an llmq database.`);
  }
}
