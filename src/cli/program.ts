import { Command } from 'commander';
import { registerEnqueue } from './commands/enqueue.js';
import { registerRun } from './commands/run.js';
import { registerStatus } from './commands/status.js';
import { registerRetryFailed } from './commands/retry-failed.js';
import { registerShow } from './commands/show.js';
import { registerExport } from './commands/export.js';
import { registerCopy } from './commands/copy.js';
import { registerBatches } from './commands/batches.js';
import { registerServe } from './commands/serve.js';
import { registerEstimate } from './commands/estimate.js';

export const VERSION = '0.1.0';

/** Each command registers its own flags (`--db` among them, see dbOption) in its own file. */
export function buildProgram(): Command {
  const program = new Command('llmq')
    .description('Run an LLM request over every document in a folder or JSONL file, durably and fast.')
    .version(VERSION, '-V, --version')
    .showHelpAfterError('(run with --help for usage)')
    .showSuggestionAfterError(true)
    .configureOutput({ writeErr: (s) => process.stderr.write(s), writeOut: (s) => process.stdout.write(s) })
    .exitOverride();
  program.addHelpText(
    'after',
    `
Examples:
  $ llmq enqueue docs/ --prompt "Summarize in one sentence: {{text}}"
  $ llmq estimate
  $ llmq run --concurrency 8 --rpm 500 --budget 5
  $ llmq status
  $ llmq retry-failed && llmq run
  $ llmq export --out results.jsonl
  $ llmq serve                    # a live dashboard at http://127.0.0.1:8787/

Environment:
  LLMQ_DB                         the queue (default ./llmq.db)
  LLMQ_API_KEY, OPENAI_API_KEY    the API key (never a flag, never stored)
  LLMQ_BASE_URL, OPENAI_BASE_URL  the endpoint (default https://api.openai.com/v1)
  LLMQ_REDIS_URL                  share rate limits between runs (llmq run --redis)
  NO_COLOR                        plain output`,
  );
  refuseHelpForUnknownCommands(program);
  for (const register of [
    registerEnqueue,
    registerEstimate,
    registerRun,
    registerStatus,
    registerRetryFailed,
    registerShow,
    registerExport,
    registerCopy,
    registerBatches,
    registerServe,
  ]) {
    const cmd = register(program);
    cmd.exitOverride().showHelpAfterError('(run with --help for usage)');
  }
  return program;
}

/**
 * Commander answers `llmq nosuch --help` with the program's help and exit 0, because it looks at
 * --help before it notices that `nosuch` is no command; a script would take that for success.
 * Raise its own unknown-command error (with its "Did you mean" suggestion) instead. The method is
 * not in commander's typings, but it is what its parser calls for the same mistake without --help.
 */
function refuseHelpForUnknownCommands(program: Command): void {
  program.on('beforeHelp', () => {
    const name = program.args[0];
    if (name === undefined || name.startsWith('-') || name === 'help') return;
    if (program.commands.some((c) => c.name() === name || c.aliases().includes(name))) return;
    (program as unknown as { unknownCommand(): never }).unknownCommand();
  });
}
