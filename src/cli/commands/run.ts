import { InvalidArgumentError, Option, type Command } from 'commander';
import {
  dbOption,
  DEFAULT_CONCURRENCY,
  DEFAULT_MAX_ATTEMPTS,
  durationExpected,
  durationIn,
  intAtLeast,
  numberBetween,
  oneOf,
  positiveNumber,
} from '../options.js';
import { priceOptions, type PriceFlags } from './price-options.js';
import { hookOptions, type HookFlags } from '../hook-flags.js';
import { alertOptions, type AlertFlags } from '../alert-flags.js';
import { durationWithUnitMs } from '../../duration.js';
import { mockLatencyOption } from '../mock-latency-option.js';

export interface RunFlags extends HookFlags, AlertFlags, PriceFlags {
  db?: string;
  budget?: number;
  budgetTotal?: number;
  provider: 'openai' | 'mock';
  baseUrl?: string;
  concurrency: number;
  rpm?: number;
  tpm?: number;
  maxAttempts: number;
  timeout: number | 'auto';
  maxOutage: number;
  limit?: number;
  grace: number;
  retryDelay: number;
  json?: boolean;
  progress: 'auto' | 'tty' | 'plain' | 'none';
  redis?: string;
  mockLatency: number;
  mockFailureRate: number;
  via: 'online' | 'batch' | 'auto';
  deadline?: number;
  poll: number;
  batchSize: number;
  wait: boolean;
  dryRun?: boolean;
}

export function registerRun(program: Command): Command {
  const cmd = program
    .command('run')
    .description('Work the queue: send every pending job to the model under your concurrency and rate limits, with retries.')
    .addOption(dbOption())
    .addOption(
      new Option('--provider <name>', 'openai (any OpenAI-compatible endpoint) or mock (offline)')
        .default('openai')
        .argParser(oneOf(['openai', 'mock'] as const)),
    )
    .option(
      '--base-url <url>',
      'OpenAI-compatible API base, e.g. http://127.0.0.1:11434/v1 (env LLMQ_BASE_URL, OPENAI_BASE_URL; default https://api.openai.com/v1)',
    )
    .addOption(new Option('-c, --concurrency <n>', 'requests in flight at most').default(DEFAULT_CONCURRENCY).argParser(intAtLeast(1)))
    .addOption(
      new Option(
        '--rpm <n>',
        "requests per minute per model at most; the provider's own limit, learned from its headers, when lower (default: the provider's)",
      ).argParser(intAtLeast(1)),
    )
    .addOption(
      new Option(
        '--tpm <n>',
        "tokens per minute per model at most (prompt tokens + max_tokens); the provider's, when lower (default: the provider's)",
      ).argParser(intAtLeast(1)),
    )
    .addOption(new Option('--max-attempts <n>', 'tries per job before it is failed').default(DEFAULT_MAX_ATTEMPTS).argParser(intAtLeast(1)))
    .addOption(
      new Option(
        '--timeout <seconds|auto>',
        "per-request timeout: auto follows each model's observed latencies (several times the p99, at most 600 s); a number is a fixed cap",
      )
        .default('auto')
        .argParser(secondsOrAuto),
    )
    .addOption(
      new Option(
        '--max-outage <minutes>',
        'end the run (exit 1, jobs stay pending) when the provider stays unreachable this long (15, or with a unit: 90s, 2h)',
      )
        .default(15)
        .argParser(durationIn('minutes', { above: 0 })),
    )
    .addOption(new Option('--limit <n>', 'stop after taking N jobs').argParser(intAtLeast(1)))
    .addOption(
      new Option('--grace <seconds>', 'on Ctrl-C, how long in-flight requests may finish before they are aborted')
        .default(30)
        .argParser(durationIn('seconds', { min: 0, max: 3600 })),
    )
    .addOption(
      new Option('--retry-delay <seconds>', 'first wait before a retry; doubles each time, with jitter')
        .default(1)
        .argParser(durationIn('seconds', { min: 0, max: 600 })),
    )
    .option(
      '--redis <url>',
      'share --rpm/--tpm and 429 pauses with every run using this Redis, e.g. redis://127.0.0.1:6379 (env LLMQ_REDIS_URL)',
    )
    .option('--json', 'print newline-delimited JSON events on stdout instead of a progress display')
    .addOption(
      new Option(
        '--progress <mode>',
        'progress display: auto (bars on a terminal, lines otherwise), tty, plain, none (only warnings and the summary)',
      )
        .default('auto')
        .argParser(oneOf(['auto', 'tty', 'plain', 'none'] as const, { json: 'For JSON events on stdout, use --json.' }))
        // --json is the display: a mode asked for beside it would be ignored
        .conflicts('json'),
    )
    .addOption(
      new Option(
        '--via <lane>',
        "online (one request per job), batch (the provider's Batch API: half the price, answers within 24 h), or auto (batch first, the rest online before --deadline)",
      )
        .default('online')
        .argParser(oneOf(['online', 'batch', 'auto'] as const)),
    )
    .addOption(
      new Option(
        '--deadline <duration>',
        '--via auto: when everything must be done, e.g. 6h, 90m; batches run for the first three quarters of it',
      ).argParser(durationMs),
    )
    .addOption(
      new Option('--poll <seconds>', '--via batch or auto: how often live batches are checked (backs off on errors)')
        .default(30)
        .argParser(durationIn('seconds', { min: 0.05, max: 3600 })),
    )
    .addOption(
      new Option('--batch-size <n>', '--via batch: jobs per batch at most (and never over 200 MB per file)')
        .default(50_000)
        .argParser(intAtLeast(1)),
    )
    .option('--no-wait', '--via batch: submit and exit; a later llmq run --via batch collects the answers')
    .addOption(mockLatencyOption())
    .addOption(
      new Option('--mock-failure-rate <fraction>', 'mock provider: share of tries that fail with a retryable 500')
        .default(0)
        .argParser(numberBetween(0, 1)),
    )
    .addOption(
      new Option(
        '--budget <usd>',
        "spend at most this many USD in this run: each request's worst case (prompt + max_tokens) is reserved before it leaves; stop (exit 3) when the next would not fit. Online only",
      ).argParser(usdAmount),
    )
    .addOption(
      new Option('--budget-total <usd>', 'the same for the whole queue, earlier runs and other runs on it included. Online only').argParser(
        usdAmount,
      ),
    )
    .option('--dry-run', 'print what this run would send, cost and take (as llmq estimate), and send nothing');
  for (const o of [...priceOptions(), ...hookOptions(), ...alertOptions()]) cmd.addOption(o);
  return (
    cmd
      .addHelpText(
        'after',
        `
The API key comes only from the environment: LLMQ_API_KEY, then OPENAI_API_KEY.
Hook URL posts are signed with LLMQ_HOOK_SECRET (header x-llmq-signature: sha256=<HMAC of the body>).

Exit codes:
  0    every job is done (with --limit: the jobs taken are done; the rest stay pending)
  1    bad usage, or a run-fatal error (wrong key, no quota): jobs stay pending, fix and run again
  2    the queue is drained but some jobs failed in it (with --limit: some of the jobs taken
       failed): llmq status, retry-failed
  3    stopped by --budget or --budget-total: requests in flight finished, the other jobs stay pending
  130  stopped by Ctrl-C / SIGTERM / SIGHUP, or the reader of stdout went away (| head);
       unfinished jobs went back to pending, run again to resume

Examples:
  $ llmq run --provider mock                      # offline, no key needed
  $ LLMQ_API_KEY=sk-... llmq run --concurrency 16 --rpm 500 --tpm 200000
  $ llmq run --base-url http://127.0.0.1:11434/v1 --concurrency 2   # a local Ollama
  $ llmq run --limit 10                           # try the first ten before paying for all
  $ llmq run --via batch --no-wait                # half price; run it again later to collect
  $ llmq run --on-done 'mail -s "llmq done" me@example.com' --on-job http://127.0.0.1:9000/llmq
  $ llmq run --budget 5                           # never more than $5.00 in this run
  $ llmq run --budget-total 50 --redis redis://cache:6379   # $50 for the whole queue, every machine together`,
      )
      // The run itself (scheduler, provider, progress display) is loaded only when it runs.
      .action(async (flags: RunFlags, cmd: Command) => (await import('./run-action.js')).runCommand(flags, cmd))
  );
}

/** `6h`, `90m`, `45s`, in ms. */
function durationMs(value: string): number {
  // a deadline of "6" meant hours as often as seconds, and as seconds sent nearly everything online at full price
  if (/^\s*\d+(\.\d+)?\s*$/.test(value)) {
    throw new InvalidArgumentError(
      `Expected a duration with its unit, like 6h, 90m, 1h30m or 45s (is ${value.trim()} hours, minutes or seconds?).`,
    );
  }
  // one duration grammar for every flag (90s, 15m, 6h, 1h30m)
  const ms = durationWithUnitMs(value) ?? Number.NaN;
  if (!(ms > 0)) throw new InvalidArgumentError('Expected a duration like 6h, 90m, 1h30m or 45s.');
  return ms;
}

const TIMEOUT_BOUNDS = { above: 0 };
const timeoutSeconds = durationIn('seconds', TIMEOUT_BOUNDS);

/** `auto`, or seconds greater than 0 (`30`, or with a unit: `30s`, `2m`). */
function secondsOrAuto(value: string): number | 'auto' {
  if (value.trim().toLowerCase() === 'auto') return 'auto';
  try {
    return timeoutSeconds(value);
  } catch {
    throw new InvalidArgumentError(`Expected auto, or ${durationExpected('seconds', TIMEOUT_BOUNDS)}.`);
  }
}

/**
 * An amount of USD greater than 0. `USD` itself is the place a proposed command leaves for an
 * amount the user chooses (`BUDGET_TO_RAISE`): pasted as it is, say so rather than "invalid".
 */
function usdAmount(value: string): number {
  if (value.trim().toUpperCase() === 'USD')
    throw new InvalidArgumentError(
      'USD stands for an amount to choose: put a number of dollars in its place, e.g. 20 (llmq status says what the queue has spent).',
    );
  return positiveNumber(value);
}
