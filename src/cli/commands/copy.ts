import type { ChalkInstance } from 'chalk';
import { Option, type Command } from 'commander';
import { EXIT, StoreError, UsageError } from '../../errors.js';
import { STOP_SIGNALS } from '../run-stop.js';
import type { CopyResult, CopyTable } from '../../store/copy.js';
import type { Store } from '../../store/types.js';
import { dbOption, queueLocation } from '../options.js';

interface CopyFlags {
  db?: string;
  from?: string;
  to: string;
  json?: boolean;
}

export function registerCopy(program: Command): Command {
  return program
    .command('copy')
    .description('Copy a whole queue (jobs, answers, attempts, items, runs) into an empty database of either kind.')
    .addOption(
      new Option('--from <path|url>', 'the queue to copy: an SQLite file or a postgres:// URL')
        .default(undefined, '--db, LLMQ_DB or ./llmq.db')
        .argParser(queueLocation),
    )
    .addOption(dbOption())
    .addOption(
      new Option('--to <path|url>', 'an empty (or new) SQLite file or postgres:// URL to copy into')
        .makeOptionMandatory()
        .argParser(queueLocation),
    )
    .addOption(new Option('--json', 'print the counts as one JSON object on stdout'))
    .addHelpText(
      'after',
      `
Examples:
  $ llmq copy --from ./llmq.db --to postgres://llmq@db.internal/llmq?schema=team_a
  $ llmq copy --from postgres://llmq@db.internal/llmq --to ./backup.db

Jobs that are running when copied arrive pending: their leases belong to runs on the source.
Stop the runs on the source first; the target must be empty.`,
    )
    .action(async (flags: CopyFlags) => {
      const [{ checkLocation, redactLocation, resolveDbLocation }, { copyStore }, { colorsFor, warn }, { count, int }, { statusLine }] =
        await Promise.all([
          import('../../store/open-store.js'),
          import('../../store/copy.js'),
          import('../output.js'),
          import('../../report/format.js'),
          import('../progress/status-line.js'),
        ]);
      const from = resolveDbLocation(flags.from ?? flags.db);
      checkLocation(from, flags.from ? '--from' : '--db');
      checkLocation(flags.to, '--to');
      if (from === flags.to)
        throw new UsageError(`Expected --from and --to to name two databases, got '${redactLocation(from)}' for both.`);
      const result = await withStores(from, flags.to, async (source, target, notEnded) => {
        if (notEnded)
          warn(
            `${count(notEnded, 'run')} on ${source.location} ${notEnded === 1 ? 'has' : 'have'} not ended, though ${notEnded === 1 ? 'it works' : 'they work'} it no more: ` +
              `the copy ends ${notEnded === 1 ? 'it' : 'them'}, ${notEnded === 1 ? 'its' : 'their'} requests out counted as may be billed.`,
          );
        // on a terminal, how far it is: ten million jobs with their items take minutes
        const line = statusLine(process.stderr);
        const of: Partial<Record<CopyTable, number>> = {};
        if (process.stderr.isTTY) {
          const s = await source.status();
          of.jobs = s.total + s.orphanedAnswers;
          of.items = s.items;
        }
        // Stopped, the target holds part of the queue, marked so (copyStore): said now, not at its next use.
        const stopped = (): never => {
          line.done();
          warn(
            `stopped: ${redactLocation(flags.to)} holds part of ${redactLocation(from)}, and llmq refuses to use it; delete it and copy again.`,
          );
          process.exit(EXIT.SIGNAL);
        };
        for (const signal of STOP_SIGNALS) process.on(signal, stopped);
        try {
          return await copyStore(source, target, {
            now: Date.now(),
            onProgress: (table, copied) =>
              line.update(() => `copying ${table}: ${int(copied)}${of[table] === undefined ? '' : ` of ${int(of[table])}`}`),
            // drawn at once: the step that follows holds the thread (a SQLite file's index builds)
            onFinishing: (jobs, items) => line.now(`indexing ${int(jobs)} jobs and ${int(items)} items`),
          });
        } finally {
          for (const signal of STOP_SIGNALS) process.off(signal, stopped);
          line.done();
        }
      });
      const describe = (r: CopyResult, c: ChalkInstance): string => {
        const requeued = r.requeued ? ` (${int(r.requeued)} running there, pending here)` : '';
        const counts = [count(r.items, 'item'), count(r.attempts, 'attempt'), count(r.runs, 'run')].join(', ');
        return `${c.bold('copied')} ${redactLocation(from)} to ${redactLocation(flags.to)}: ${c.green(count(r.jobs, 'job'))}${requeued}, ${counts}`;
      };
      if (flags.json) process.stdout.write(JSON.stringify({ from: redactLocation(from), to: redactLocation(flags.to), ...result }) + '\n');
      else process.stderr.write(describe(result, colorsFor(process.stderr)) + '\n');
    });
}

/**
 * `fn` with the source (opened as an existing queue) and the target, once the source is known safe
 * to copy: no batch live at the provider, no run working it. `notEnded`: how many of its runs have
 * not ended though they work it no more (killed), which the copy ends.
 */
async function withStores<T>(from: string, to: string, fn: (source: Store, target: Store, notEnded: number) => Promise<T>): Promise<T> {
  const [
    { openStore },
    { openExistingStore },
    { refuseLiveBatches },
    { workingRuns, runsGoneHere },
    { count },
    { dbArgument, runArgumentsOfEndpoint },
  ] = await Promise.all([
    import('../../store/open-store.js'),
    import('../../report/open-existing.js'),
    import('../../store/copy.js'),
    import('../../report/status-cost.js'),
    import('../../report/format.js'),
    import('../again.js'),
  ]);
  // The source is only read: a mistyped --from must not become a new, empty queue.
  const source = await openExistingStore(from);
  try {
    await refuseLiveBatches(source, { db: dbArgument(from), endpointArguments: (baseUrl) => runArgumentsOfEndpoint(baseUrl) });
    // Its jobs in flight, and those it answers while the copy reads, would arrive pending and be
    // sent again (and billed) by a run on the copy. A run that died is no such risk: warned below.
    const open = await source.activeRuns();
    const now = Date.now();
    const working = workingRuns(open, now);
    // killed a moment ago here: its heartbeat is still fresh, and a few seconds of quiet make it dead
    const { pidGone } = runsGoneHere(working, now);
    const running = working.filter((r) => !pidGone.has(r.id));
    if (running.length > 0) {
      const named = running.map((r) => `${r.id.slice(0, 8)} (${r.host} pid ${r.pid})`).join(', ');
      throw new StoreError(
        `${source.location} is being worked on by ${count(running.length, 'run')}: ${named}. What ${running.length === 1 ? 'it answers' : 'they answer'} ` +
          'during the copy would arrive pending and be sent again by a run on the copy. Stop it first (Ctrl-C where it runs; llmq status shows it), then copy.',
      );
    }
    if (working.length > 0) {
      const named = working.map((r) => `${r.id.slice(0, 8)} (pid ${r.pid})`).join(', ');
      throw new StoreError(
        `${source.location} was being worked on by ${count(working.length, 'run')} whose process is not running here any more (killed a moment ago, most likely): ${named}. ` +
          'Its heartbeat is a few seconds old; once it has been quiet 6 s it counts as dead, and the copy takes its jobs back. Copy again in a few seconds.',
      );
    }
    const target = await openStore(to);
    try {
      return await fn(source, target, open.length);
    } finally {
      await target.close();
    }
  } finally {
    await source.close();
  }
}
