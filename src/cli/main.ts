import { CommanderError } from 'commander';
import { LlmqError } from '../errors.js';
import { buildProgram } from './program.js';
import { watchReaders, whileReaderPresent } from './reader-gone.js';

/** The flags that make a job's request, taken by enqueue only. */
const REQUEST_FLAGS = new Set(['--model', '--prompt', '--system', '--max-tokens', '--temperature', '--schema', '--priority']);

/** The flags of sending, taken by run (and estimate) only: given to enqueue, which sends nothing. */
const SENDING_FLAGS = new Set([
  '--provider',
  '--base-url',
  '--concurrency',
  '--rpm',
  '--tpm',
  '--budget',
  '--budget-total',
  '--via',
  '--mock-latency',
]);

/** Names other tools give what llmq calls otherwise: the flag to use instead. */
const OTHER_NAMES: Readonly<Record<string, string>> = {
  '--template':
    "llmq enqueue's --prompt is the template: --prompt @prompt.txt, with {{text}}, {{id}}, {{path}} and {{meta.FIELD}} filled in",
  '--system-prompt': 'llmq enqueue takes it as --system (text, or @file)',
  '--prompt-file': 'llmq enqueue takes a file as --prompt @prompt.txt (and --system @system.txt)',
};

/** The value given to `flag` on the command line (`--flag value` or `--flag=value`), if one is there. */
function flagValue(argv: readonly string[], flag: string): string | undefined {
  const at = argv.findIndex((a) => a === flag || a.startsWith(`${flag}=`));
  if (at === -1) return undefined;
  if (argv[at]!.startsWith(`${flag}=`)) return argv[at]!.slice(flag.length + 1);
  const next = argv[at + 1];
  return next !== undefined && !next.startsWith('-') ? next : undefined;
}

/**
 * The one place errors become exit codes: an LlmqError prints its message, a commander error has
 * printed itself, anything else is a bug and prints its stack.
 */
export async function main(argv: readonly string[]): Promise<number> {
  const program = await buildProgram(argv);
  try {
    await program.parseAsync(argv as string[]);
    return process.exitCode === undefined ? 0 : Number(process.exitCode);
  } catch (error) {
    if (error instanceof CommanderError) {
      // `llmq run docs/`: the documents go in by enqueue, and a run sends what is queued
      if (error.code === 'commander.excessArguments' && argv[2] === 'run')
        whileReaderPresent(process.stderr).write(
          'llmq run sends what is queued and takes no documents: enqueue them first (llmq enqueue docs/), then llmq run.\n',
        );
      // `llmq run --model gpt-4o`: the request is each job's, made when its documents were enqueued
      const flag = /unknown option '(--[a-z-]+)/.exec(error.message)?.[1];
      if (error.code === 'commander.unknownOption' && flag && REQUEST_FLAGS.has(flag) && argv[2] !== 'enqueue')
        whileReaderPresent(process.stderr).write(
          flag === '--priority'
            ? `--priority belongs to llmq enqueue: enqueue the same documents again with it (llmq enqueue docs/ --priority N): their jobs that wait take it.\n`
            : `${flag} belongs to llmq enqueue: each job's request is made when its documents are enqueued. ` +
                `Enqueue them again with it (llmq enqueue docs/ ${flag} ...): their items move to the new jobs, and answers already paid for are kept.\n`,
        );
      // `llmq enqueue docs/ --provider mock`: enqueue only queues; the sending is a run's
      if (error.code === 'commander.unknownOption' && flag && SENDING_FLAGS.has(flag) && argv[2] === 'enqueue')
        whileReaderPresent(process.stderr).write(
          `${flag} belongs to llmq run: enqueue only queues the documents, and a run sends them (llmq enqueue docs/, then llmq run ${flag} ${flagValue(argv, flag) ?? '...'}).\n`,
        );
      if (error.code === 'commander.unknownOption' && flag && OTHER_NAMES[flag])
        whileReaderPresent(process.stderr).write(`${OTHER_NAMES[flag]}.\n`);
      // help and version "errors" are successes; commander already printed the message.
      return error.exitCode === 0 ? 0 : 1;
    }
    // Loaded only on the way out with an error: every command's start pays for what it imports.
    const [{ colorsFor }, { knownError }, { redactUrlCredentials }] = await Promise.all([
      import('./output.js'),
      import('../errors-known.js'),
      import('../url-credentials.js'),
    ]);
    const c = colorsFor(process.stderr);
    const stderr = whileReaderPresent(process.stderr);
    // A system or SQLite failure with an ordinary cause that escaped the place that knows the path.
    // Every error leaves through here: a --db or --redis password quoted by a driver is masked.
    const known = error instanceof LlmqError ? error : knownError(error);
    if (known) {
      stderr.write(`${c.red('error:')} ${redactUrlCredentials(known.message)}\n`);
      return known.exitCode;
    }
    stderr.write(`${c.red('llmq: unexpected error')} (a bug, please report it with the lines below)\n`);
    stderr.write(`${redactUrlCredentials((error as Error)?.stack ?? String(error))}\n`);
    return 1;
  }
}

// `llmq export | head` or `llmq --help | head`: the reader left, which is not a bug; the output was
// cut off, so 130, as for a signal (as SIGPIPE would end a program without handlers). `run` claims
// this instead and stops like Ctrl-C (see reader-gone.ts).
watchReaders([process.stdout, process.stderr], () => process.exit(130));

const code = await main(process.argv);
process.exitCode = code;
