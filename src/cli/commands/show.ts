import type { Command } from 'commander';
import { dbOption } from '../options.js';
import { LlmqError } from '../../errors.js';

export function registerShow(program: Command): Command {
  return program
    .command('show')
    .description('Show one item: its job, request, every attempt and the answer.')
    .argument('<id>', 'the item id (relative path, JSONL id, file:line or custom_id)')
    .addOption(dbOption())
    .option('--full', 'print long text (prompt, answer, errors) whole instead of trimmed')
    .option('--json', 'print the item, job and attempts as one JSON object')
    .addHelpText(
      'after',
      `
Examples:
  $ llmq show notes/2024-03.txt
  $ llmq show req-42 --full
  $ llmq show req-42 --json | jq .attempts`,
    )
    .action(async (id: string, flags: { db?: string; full?: boolean; json?: boolean }) => {
      const [{ resolveDbLocation }, { openExistingStore }, { renderItem }, { colorsFor }] = await Promise.all([
        import('../../store/open-store.js'),
        import('../../report/open-existing.js'),
        import('../../report/show-text.js'),
        import('../output.js'),
      ]);
      const location = resolveDbLocation(flags.db);
      const store = await openExistingStore(location);
      try {
        const detail = await store.item(id);
        if (!detail) {
          throw new LlmqError(
            `No item with id '${id}' in ${store.location}. Item ids are the paths, JSONL ids or custom_ids given to llmq enqueue; llmq export lists them.`,
          );
        }
        process.stdout.write(
          flags.json ? JSON.stringify(detail, null, 2) + '\n' : renderItem(detail, { full: flags.full, paint: colorsFor(process.stdout) }),
        );
      } finally {
        await store.close();
      }
    });
}
