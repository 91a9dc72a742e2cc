import type { Command } from 'commander';
import { dbOption } from '../options.js';
import { LlmqError } from '../../errors.js';
import { shellWord } from '../../shell-word.js';
import { dbArgument } from '../again.js';

export function registerShow(program: Command): Command {
  return program
    .command('show')
    .description('Show one item: its job, request, every attempt and the answer.')
    .argument('<id>', "the item id (relative path, JSONL id, file:line or custom_id), or its job's key as run prints it")
    .addOption(dbOption())
    .option('--full', 'print long text (prompt, answer, errors) whole instead of trimmed')
    .option('--json', 'print the item, job and attempts as one JSON object')
    .addHelpText(
      'after',
      `
Examples:
  $ llmq show notes/2024-03.txt
  $ llmq show req-42 --full
  $ llmq show req-42 --json | jq .attempts
  $ llmq show a5ce1770bebd              # the job a run reported as failed`,
    )
    .action(async (id: string, flags: { db?: string; full?: boolean; json?: boolean }) => {
      const [
        { resolveDbLocation },
        { openExistingStore },
        { renderItem },
        { findItem, byKeyNote, isKeyPrefix, itemJson, slipFor, MIN_KEY_PREFIX },
        { colorsFor },
      ] = await Promise.all([
        import('../../store/open-store.js'),
        import('../../report/open-existing.js'),
        import('../../report/show-text.js'),
        import('../../report/find-item.js'),
        import('../output.js'),
      ]);
      const location = resolveDbLocation(flags.db);
      const store = await openExistingStore(location);
      try {
        const found = await findItem(store, id);
        if (!found) {
          const meant = await slipFor(store, id);
          if (meant) {
            throw new LlmqError(
              `No item with id '${id}' in ${store.location}. ${meant.why}${meant.several ? ' (several items end so; the first)' : ''}: did you mean '${meant.id}' (from ${meant.source})? llmq show ${shellWord(meant.id)}${dbArgument(flags.db)}`,
            );
          }
          throw new LlmqError(
            // a job no item points at (an answer kept from an earlier prompt) is not one show can find
            `No item with id '${id}'${isKeyPrefix(id) ? ', nor an item whose job key starts with it,' : ''} in ${store.location}. Item ids are the paths, JSONL ids or custom_ids given to llmq enqueue, and a document it rejected has none (llmq status names those of the last enqueue of each input). llmq export lists the items.` +
              (id.length < MIN_KEY_PREFIX && /^[0-9a-f]+$/i.test(id)
                ? ` A job key is found by its first ${MIN_KEY_PREFIX} characters or more.`
                : ''),
          );
        }
        const detail = found.detail;
        const note = byKeyNote(found);
        if (note) process.stderr.write(`${note}\n`);
        process.stdout.write(
          flags.json
            ? JSON.stringify(itemJson(found), null, 2) + '\n'
            : renderItem(detail, { full: flags.full, paint: colorsFor(process.stdout), sharedWith: found.sharedWith }),
        );
      } finally {
        await store.close();
      }
    });
}
