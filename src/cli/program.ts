import { Command, Option } from 'commander';
import { registerEnqueue } from './commands/enqueue.js';
import { registerRun } from './commands/run.js';
import { registerStatus } from './commands/status.js';
import { registerRetryFailed } from './commands/retry-failed.js';
import { registerShow } from './commands/show.js';
import { registerExport } from './commands/export.js';
import { registerCopy } from './commands/copy.js';

export const VERSION = '0.1.0';

/** `--db` is on every command; each command registers its own flags in its own file. */
export function dbOption(): Option {
  // No real default value: resolveDbLocation falls back to LLMQ_DB, then ./llmq.db.
  return new Option('--db <path|url>', 'the queue: an SQLite file, or a postgres:// URL (env LLMQ_DB, default ./llmq.db)');
}

export function buildProgram(): Command {
  const program = new Command('llmq')
    .description('Run an LLM request over every document in a folder or JSONL file, durably and fast.')
    .version(VERSION, '-V, --version')
    .showHelpAfterError('(run with --help for usage)')
    .showSuggestionAfterError(true)
    .configureOutput({ writeErr: (s) => process.stderr.write(s), writeOut: (s) => process.stdout.write(s) })
    .exitOverride();
  program.addHelpText('after', `
Examples:
  $ llmq enqueue docs/ --prompt "Summarize in one sentence: {{text}}"
  $ llmq run --concurrency 8 --rpm 500
  $ llmq status
  $ llmq retry-failed && llmq run
  $ llmq export --out results.jsonl

Environment:
  LLMQ_DB                         the queue (default ./llmq.db)
  LLMQ_API_KEY, OPENAI_API_KEY    the API key (never a flag, never stored)
  LLMQ_BASE_URL, OPENAI_BASE_URL  the endpoint (default https://api.openai.com/v1)
  LLMQ_REDIS_URL                  share rate limits between runs (llmq run --redis)
  NO_COLOR                        plain output`);
  for (const register of [registerEnqueue, registerRun, registerStatus, registerRetryFailed, registerShow, registerExport, registerCopy]) {
    const cmd = register(program);
    cmd.exitOverride().showHelpAfterError('(run with --help for usage)');
  }
  return program;
}
