import { redactUrlCredentials } from '../url-credentials.js';
import { Command } from 'commander';
import { UsageError } from '../errors.js';

export const VERSION = '0.1.0';

type Register = (program: Command) => Command;

/** Every command, in the order `llmq --help` lists them, and the file that registers it. */
const COMMANDS: ReadonlyArray<readonly [name: string, load: () => Promise<Register>]> = [
  ['enqueue', async () => (await import('./commands/enqueue.js')).registerEnqueue],
  ['estimate', async () => (await import('./commands/estimate.js')).registerEstimate],
  ['run', async () => (await import('./commands/run.js')).registerRun],
  ['status', async () => (await import('./commands/status.js')).registerStatus],
  ['retry-failed', async () => (await import('./commands/retry-failed.js')).registerRetryFailed],
  ['forget', async () => (await import('./commands/forget.js')).registerForget],
  ['show', async () => (await import('./commands/show.js')).registerShow],
  ['export', async () => (await import('./commands/export.js')).registerExport],
  ['copy', async () => (await import('./commands/copy.js')).registerCopy],
  ['batches', async () => (await import('./commands/batches.js')).registerBatches],
  ['serve', async () => (await import('./commands/serve.js')).registerServe],
];

/**
 * Each command registers its own flags (`--db` among them, see dbOption) in its own file. Only the
 * file of the command `argv` names is loaded: a process start pays for one command's flags, not
 * ten; `--version` first needs none. Anything else (`--help`, `help`, a mistyped name) loads them
 * all, so the command list, its suggestions and the help read as they always did.
 */
export async function buildProgram(argv: readonly string[]): Promise<Command> {
  const program = new Command('llmq')
    .description('Run an LLM request over every document in a folder or JSONL file, durably and fast.')
    .version(VERSION, '-V, --version')
    .showHelpAfterError('(run with --help for usage)')
    .showSuggestionAfterError(true)
    // commander quotes a refused argument as given: a URL in it keeps no password (invariant 7)
    .configureOutput({ writeErr: (s) => process.stderr.write(redactUrlCredentials(s)), writeOut: (s) => process.stdout.write(s) })
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
  LLMQ_BASE_URL, OPENAI_BASE_URL  the endpoint (default OpenAI's)
  LLMQ_REDIS_URL                  rate limits shared by runs (run --redis)
  LLMQ_PRICES                     prices per model, a file or JSON (--prices)
  LLMQ_HOOK_SECRET                signs --on-done and --on-job URL posts
  NO_COLOR                        plain output`,
  );
  refuseHelpForUnknownCommands(program);
  // before the subcommand parses its arguments: a flag taken as a value also leaves an argument over,
  // which commander reports as "too many arguments", naming neither
  program.hook('preSubcommand', (_top, sub) => refuseFlagsTakenAsValues(sub, argv.slice(argv.indexOf(sub.name(), 2) + 1)));
  const first = argv[2];
  const named = COMMANDS.filter(([name]) => name === first);
  const needed = first === '-V' || first === '--version' ? [] : named.length ? named : COMMANDS;
  const registers = await Promise.all(needed.map(([, load]) => load()));
  for (const register of registers) {
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

/**
 * An option whose value was left out takes the next argument as its value, whatever it is:
 * `enqueue docs --glob --db f.db` read `--db` as the glob and `f.db` as a source, and wrote to
 * ./llmq.db; `run --on-done --json` ran `--json` as the hook. A value that is one of the command's
 * own flags is such a mistake: refused, naming both. `--glob=--db` says the value outright.
 */
function refuseFlagsTakenAsValues(cmd: Command, args: readonly string[]): void {
  // `batches cancel ...`: the options are the named subcommand's
  const leaf = cmd.commands.find((c) => c.name() === args[0]);
  const options = [...cmd.options, ...(leaf?.options ?? [])];
  const flags = new Set(options.flatMap((o) => [o.long, o.short]).filter((f): f is string => f !== undefined));
  flags.add('--help').add('-h');
  for (let i = 0; i < args.length - 1; i++) {
    if (args[i] === '--') return;
    const o = options.find((x) => x.long === args[i] || x.short === args[i]);
    const next = args[i + 1]!;
    if (!o?.required || !flags.has(next.split('=')[0]!)) continue;
    const name = o.long ?? o.short;
    throw new UsageError(`${name} needs a value, and took ${next.split('=')[0]} for it: give ${name} a value, or leave it out.`);
  }
}
