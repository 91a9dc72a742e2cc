import { existsSync } from 'node:fs';
import { LlmqError } from '../errors.js';
import { isPostgresUrl, openStore, redactLocation } from '../store/open-store.js';
import type { Store } from '../store/types.js';

/**
 * Open a queue that must already exist. Reading commands (`status`, `show`, `export`) would
 * otherwise create an empty database at a mistyped path and report an empty queue.
 */
export async function openExistingStore(location: string): Promise<Store> {
  if (!isPostgresUrl(location) && location !== ':memory:' && !existsSync(location)) {
    const shown = redactLocation(location);
    throw new LlmqError(
      `There is no queue at ${shown}. Create one with: llmq enqueue <folder|file.jsonl> --db ${shown}` +
        ' (or point --db / LLMQ_DB at an existing queue).',
    );
  }
  return openStore(location);
}
