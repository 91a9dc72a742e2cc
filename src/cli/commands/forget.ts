import type { Command } from 'commander';
import { EXIT, LlmqError, UsageError } from '../../errors.js';
import { dbOption } from '../options.js';
import { warn } from '../output.js';
import type { ForgetResult, ForgetWhich, QueueReader } from '../../store/types.js';
import { holdStopSignals } from '../held-stop.js';

interface ForgetFlags {
  db?: string;
  source?: string;
  dryRun?: boolean;
  json?: boolean;
}

/** Ids listed one per line (unknown ones; those a source named), at most this many: a list of thousands says nothing more. */
const IDS_SHOWN = 20;

export function registerForget(program: Command): Command {
  return program
    .command('forget')
    .description(
      'Remove items from the queue (a document deleted from the input, a folder enqueued by mistake): ' +
        'their unsent jobs are dropped, never to be sent; answers already paid for are kept.',
    )
    .argument('[ids...]', 'item ids, as show and export name them (relative path, JSONL id, file:line)')
    .addOption(dbOption())
    .option('--source <path>', 'every item read from this file or folder, as enqueue was given it')
    .option('--dry-run', 'say what would be removed, and change nothing')
    .option('--json', 'print {"items","ids","droppedJobs","orphanedAnswers","unknownIds"} on stdout')
    .addHelpText(
      'after',
      `
Enqueue adds and changes items, never removes them: a document deleted from the input keeps its
item, and llmq run sends its job. Forget it:

Examples:
  $ llmq forget old.txt draft.txt          # item ids, as export shows them
  $ llmq forget --source notes/2019 --dry-run
  $ llmq forget --source data.jsonl`,
    )
    .action(forgetCommand);
}

async function forgetCommand(ids: string[], flags: ForgetFlags): Promise<void> {
  const release = holdStopSignals('the items are removed and said, or none is');
  try {
    await forgetAndSay(ids, flags);
  } finally {
    release();
  }
}

async function forgetAndSay(ids: string[], flags: ForgetFlags): Promise<void> {
  const which = await whichItems(ids, flags.source);
  const [{ resolveDbLocation, redactLocation }, { openExistingStore }, { count, printable, quotedName }, { workingRuns }] =
    await Promise.all([
      import('../../store/open-store.js'),
      import('../../report/open-existing.js'),
      import('../../report/format.js'),
      import('../../report/status-cost.js'),
    ]);
  const location = resolveDbLocation(flags.db);
  const store = await openExistingStore(location);
  let r: ForgetResult;
  let working: number;
  // one id naming nothing: the item it may be a slip for, as show finds it
  let meant: { readonly id: string; readonly source: string; readonly why: string; readonly several?: boolean } | null = null;
  try {
    const now = Date.now();
    // a run killed a moment ago on this machine is not working it
    working = workingRuns(await store.activeRuns(), now).length;
    const asTyped = 'ids' in which ? await unescapedWhereMeant(store, which.ids) : null;
    r = await store.forgetItems(asTyped ? { ids: asTyped.ids } : which, { now, dryRun: flags.dryRun });
    if (asTyped) r = { ...r, unknownIds: r.unknownIds.map((id) => asTyped.typed.get(id) ?? id) };
    if (r.items === 0 && r.unknownIds.length === 1) {
      const { slipFor } = await import('../../report/find-item.js');
      meant = await slipFor(store, r.unknownIds[0]!);
    }
  } finally {
    await store.close();
  }
  if (flags.json) process.stdout.write(JSON.stringify(r) + '\n');
  // one id naming nothing, and nothing else: the error below names it, once
  const alone = r.items === 0 && r.unknownIds.length === 1 ? r.unknownIds[0]! : null;
  const shown = alone === null ? r.unknownIds.slice(0, IDS_SHOWN) : [];
  for (const id of shown) warn(`no item with id ${quotedName(id)}`);
  if (alone === null && r.unknownIds.length > shown.length)
    warn(`... and ${count(r.unknownIds.length - shown.length, 'more id')} naming no item`);
  if (r.items === 0) {
    const what =
      'source' in which
        ? `no item comes from ${flags.source}`
        : alone !== null
          ? `no item has the id ${quotedName(alone)}`
          : 'none of these ids names an item';
    const { shellWord } = await import('../../shell-word.js');
    const { dbArgument } = await import('../again.js');
    const next = meant?.several
      ? // one of several: no ready command, which would forget whichever came first
        `${meant.why}: several end so, ${quotedName(meant.id)} among them (from ${meant.source}); llmq export lists them all: name the one to forget.`
      : meant
        ? `${meant.why}: did you mean ${quotedName(meant.id)} (from ${meant.source})? llmq forget ${shellWord(meant.id)}${flags.dryRun ? ' --dry-run' : ''}${dbArgument(flags.db)}`
        : 'source' in which
          ? // `forget --source reviews` from another folder than enqueue's: the source is the path as enqueue was given it
            'A source is the folder or file as llmq enqueue was given it, relative to the folder it ran in (reviews/, data/in.jsonl); llmq export lists each item with its source.'
          : 'llmq export lists the items, with their ids and sources.';
    throw new LlmqError(`Nothing to forget in ${redactLocation(location)}: ${what}. ${next}`);
  }
  const effects = [
    `${count(r.droppedJobs, 'unanswered job')} dropped`,
    ...(r.orphanedAnswers
      ? [
          `${count(r.orphanedAnswers, 'answer')} kept that no item needs now (paid for, or being answered: enqueue the same ` +
            `${r.orphanedAnswers === 1 ? 'document' : 'documents'} again and ${r.orphanedAnswers === 1 ? 'it is' : 'they are'} found, not sent; ` +
            `status counts ${r.orphanedAnswers === 1 ? 'it' : 'them'} as kept, not done)`,
        ]
      : []),
  ];
  process.stderr.write(
    flags.dryRun
      ? `would forget ${count(r.items, 'item')} of ${redactLocation(location)}: ${effects.join(', ')}. Nothing was changed.\n`
      : `forgot ${count(r.items, 'item')} of ${redactLocation(location)}: ${effects.join(', ')}.\n`,
  );
  // a source names items the user did not type: which ones, before (--dry-run) or after they go
  if ('source' in which && !flags.json) {
    for (const id of r.ids.slice(0, IDS_SHOWN)) process.stderr.write(`  ${printable(id)}\n`);
    if (r.ids.length > IDS_SHOWN) {
      process.stderr.write(
        `  ... and ${count(r.ids.length - IDS_SHOWN, 'more', 'more')}${flags.dryRun ? ' (--json lists them all)' : ''}\n`,
      );
    }
  }
  // a run holds jobs ahead of sending them, and learns which no item needs on its next heartbeat
  if (working > 0) {
    process.stderr.write(
      `warning: ${count(working, 'run')} ${working === 1 ? 'is' : 'are'} working this queue: a job one holds sends no more once its next heartbeat ` +
        '(within 2 s) finds it forgotten, but a request out by then is answered and paid for. Stop runs before forgetting to be sure nothing forgotten is paid for.\n',
    );
  }
  if (r.unknownIds.length) process.exitCode = EXIT.PARTIAL;
}

/**
 * The ids with the escapes llmq prints control characters as (`new\u000aline.txt`, as show and
 * export's warnings write it) taken back where only the unescaped id names an item, as show takes
 * them; null when no id has such an escape. `typed`: each id changed, to what was typed.
 */
async function unescapedWhereMeant(
  store: Pick<QueueReader, 'itemStates'>,
  ids: readonly string[],
): Promise<{ ids: string[]; typed: Map<string, string> } | null> {
  const { unescapedId } = await import('../../report/find-item.js');
  const back = ids.map(unescapedId);
  if (back.every((b) => b === null)) return null;
  const asked = ids.filter((_, i) => back[i] !== null);
  const [literal, unescaped] = await Promise.all([store.itemStates(asked), store.itemStates(back.filter((b): b is string => b !== null))]);
  const typed = new Map<string, string>();
  let n = 0;
  const out = ids.map((id, i) => {
    const b = back[i];
    if (b === null) return id;
    const j = n++;
    if (literal[j] !== null || unescaped[j] === null) return id;
    typed.set(b, id);
    return b;
  });
  return { ids: out, typed };
}

/** The items asked for: ids, or a source spelled as enqueue spelled it. */
async function whichItems(ids: readonly string[], source: string | undefined): Promise<ForgetWhich> {
  if (ids.length && source !== undefined) throw new UsageError('Name item ids or --source, not both.');
  if (source === undefined) {
    if (ids.length === 0) {
      throw new UsageError(
        'Name the items to forget: their ids (llmq forget a.txt, as export shows them), or --source PATH for every item of a file or folder.',
      );
    }
    return { ids };
  }
  const { sourcePath } = await import('../../ingest/folder.js');
  const path = sourcePath(source);
  // enqueue of `.` spells its files' paths without it: "every item" is a new queue, not a forget
  if (path === '.' || path === '/') {
    throw new UsageError(
      `--source ${source} would be every item enqueued from it: name its files or folders, or start a new queue (--db).`,
    );
  }
  return { source: path };
}
