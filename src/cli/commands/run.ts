import { InvalidArgumentError, Option, type Command } from 'commander';
import { EXIT, UsageError } from '../../errors.js';
import { isRedactableKey, MIN_REDACTED_RUN } from '../../provider/redact.js';
import type { RunSummary, SchedulerListener } from '../../scheduler/events.js';
import { dbOption, DEFAULT_CONCURRENCY, DEFAULT_MAX_ATTEMPTS, intAtLeast, numberBetween, oneOf, positiveNumber } from '../options.js';
import { warn } from '../output.js';
import { int, usd } from '../../report/format.js';
import { priceOptions, priceTableFrom, type PriceFlags } from './price-options.js';
import { whileReaderPresent } from '../reader-gone.js';
import { watchRunStop } from '../run-stop.js';
import { alertTarget, hookOptions, hookReportLine, type HookFlags } from '../hook-flags.js';
import { alertOptions, alertsOn, watchAlerts, type AlertFlags } from '../alert-flags.js';
import { parseDuration } from '../../alerts/thresholds.js';

interface RunFlags extends HookFlags, AlertFlags, PriceFlags {
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
      new Option('--max-outage <minutes>', 'end the run (exit 1, jobs stay pending) when the provider stays unreachable this long')
        .default(15)
        .argParser(positiveNumber),
    )
    .addOption(new Option('--limit <n>', 'stop after taking N jobs').argParser(intAtLeast(1)))
    .addOption(
      new Option('--grace <seconds>', 'on Ctrl-C, how long in-flight requests may finish before they are aborted')
        .default(30)
        .argParser(numberBetween(0, 3600)),
    )
    .addOption(
      new Option('--retry-delay <seconds>', 'first wait before a retry; doubles each time, with jitter')
        .default(1)
        .argParser(numberBetween(0, 600)),
    )
    .option(
      '--redis <url>',
      'share --rpm/--tpm and 429 pauses with every run using this Redis, e.g. redis://127.0.0.1:6379 (env LLMQ_REDIS_URL)',
    )
    .option('--json', 'print newline-delimited JSON events on stdout instead of a progress display')
    .addOption(
      new Option('--progress <mode>', 'progress display: auto (bars on a terminal, lines otherwise), tty, plain, none')
        .default('auto')
        .argParser(oneOf(['auto', 'tty', 'plain', 'none'] as const)),
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
      new Option('--poll <seconds>', '--via batch: how often live batches are checked (backs off on errors)')
        .default(30)
        .argParser(numberBetween(0.05, 3600)),
    )
    .addOption(
      new Option('--batch-size <n>', '--via batch: jobs per batch at most (and never over 200 MB per file)')
        .default(50_000)
        .argParser(intAtLeast(1)),
    )
    .option('--no-wait', '--via batch: submit and exit; a later llmq run --via batch collects the answers')
    .addOption(new Option('--mock-latency <ms>', 'mock provider: mean latency').default(200).argParser(intAtLeast(0)))
    .addOption(
      new Option('--mock-failure-rate <fraction>', 'mock provider: share of tries that fail with a retryable 500')
        .default(0)
        .argParser(numberBetween(0, 1)),
    )
    .addOption(
      new Option(
        '--budget <usd>',
        "spend at most this many USD in this run: each request's worst case (prompt + max_tokens) is reserved before it leaves; stop (exit 3) when the next would not fit",
      ).argParser(positiveNumber),
    )
    .addOption(
      new Option('--budget-total <usd>', 'the same for the whole queue, earlier runs and other runs on it included').argParser(
        positiveNumber,
      ),
    )
    .option('--dry-run', 'print what this run would send, cost and take (as llmq estimate), and send nothing');
  for (const o of [...priceOptions(), ...hookOptions(), ...alertOptions()]) cmd.addOption(o);
  return cmd
    .addHelpText(
      'after',
      `
The API key comes only from the environment: LLMQ_API_KEY, then OPENAI_API_KEY.
Hook URL posts are signed with LLMQ_HOOK_SECRET (header x-llmq-signature: sha256=<HMAC of the body>).

Exit codes:
  0    every job is done
  1    bad usage, or a run-fatal error (wrong key, no quota): jobs stay pending, fix and run again
  2    the queue is drained but some jobs failed (see llmq status, then llmq retry-failed)
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
    .action(runCommand);
}

async function runCommand(flags: RunFlags, cmd: Command): Promise<void> {
  if (flags.dryRun) {
    const { estimateCommand } = await import('./estimate.js');
    return estimateCommand(flags);
  }
  if (flags.via !== 'online') {
    if (flags.via === 'auto' && flags.deadline === undefined) throw new UsageError('--via auto needs --deadline, e.g. --deadline 6h.');
    if (flags.provider === 'openai') warnIfKeyUnredactable((await import('../../provider/create.js')).findApiKey(process.env));
    const [{ runBatchCommand }, { laneBaseUrl }] = await Promise.all([import('./run-batch.js'), import('../lane-base-url.js')]);
    // --via auto: the Batch API (half price) for three quarters of the time, the rest online.
    const until = flags.via === 'auto' ? Date.now() + Math.round(flags.deadline! * 0.75) : undefined;
    // The mock finishes a batch in 5 x --mock-latency: unless told otherwise, look that often, not every 30 s.
    const poll = flags.provider === 'mock' && cmd.getOptionValueSource('poll') === 'default' ? (flags.mockLatency * 5) / 1000 : flags.poll;
    const batch = await runBatchCommand({ ...flags, poll: Math.max(0.05, poll), until }, laneBaseUrl(flags));
    if (flags.via === 'batch' || batch.reason === 'signal' || batch.reason === 'fatal' || batch.remaining === 0) {
      process.exitCode = exitCodeFor(batch);
      return;
    }
  }
  const [
    { createProvider, findApiKey },
    { laneBaseUrl },
    { resolveDbLocation, redactLocation },
    { openExistingStore },
    { runQueue },
    { attachProgress },
  ] = await Promise.all([
    import('../../provider/create.js'),
    import('../lane-base-url.js'),
    import('../../store/open-store.js'),
    import('../../report/open-existing.js'),
    import('../../scheduler/run-queue.js'),
    import('../progress/index.js'),
  ]);
  const prices = priceTableFrom(flags);
  const provider = createProvider(
    {
      provider: flags.provider,
      baseUrl: flags.baseUrl,
      timeoutMs: flags.timeout === 'auto' ? AUTO_TIMEOUT_CAP_MS : Math.round(flags.timeout * 1000),
      mock: { latencyMs: flags.mockLatency, failureRate: flags.mockFailureRate },
      connections: flags.concurrency,
    },
    process.env,
  );
  if (flags.provider === 'openai') warnIfKeyUnredactable(findApiKey(process.env));
  const location = resolveDbLocation(flags.db);
  const redisUrl = flags.redis || process.env.LLMQ_REDIS_URL || undefined;
  const boards = redisUrl ? await sharedBoards(redisUrl) : undefined;
  const store = await openExistingStore(location).catch(async (error) => {
    await boards?.close();
    throw error;
  });

  const listeners: SchedulerListener[] = [];
  const emit: SchedulerListener = (event, payload) => {
    for (const l of listeners) l(event, payload);
  };
  const stopping = watchRunStop(flags.grace * 1000, emit);

  const mode = flags.json ? 'json' : flags.progress === 'auto' ? (process.stderr.isTTY ? 'tty' : 'plain') : flags.progress;
  const limits = [flags.rpm ? `${flags.rpm} rpm` : '', flags.tpm ? `${flags.tpm} tpm` : '', boards ? 'shared through Redis' : '']
    .filter(Boolean)
    .join(', ');
  const progress =
    mode === 'none'
      ? null
      : attachProgress(null, {
          mode,
          stream: whileReaderPresent(mode === 'json' ? process.stdout : process.stderr),
          db: redactLocation(location),
          provider: limits ? `${provider.name}, ${limits}` : provider.name,
          prices,
        });
  if (progress) listeners.push(progress.listener);
  const onAlert = alertTarget(flags, alertsOn(flags));
  const hooks =
    flags.onDone || flags.onJob || onAlert
      ? (await import('../../hooks/run-hooks.js')).createRunHooks({
          onDone: flags.onDone,
          onJob: flags.onJob,
          onAlert,
          secret: process.env.LLMQ_HOOK_SECRET || undefined,
        })
      : null;
  if (hooks) listeners.push(hooks.listener);
  const alerts = watchAlerts(flags, store, hooks, emit);
  if (alerts) listeners.push(alerts.listener);
  let summary: RunSummary;
  try {
    summary = await runQueue(
      {
        store,
        provider,
        boards,
        baseUrl: laneBaseUrl(flags),
        prices,
        emit,
        stopSignal: stopping.stopSignal,
        abortSignal: stopping.abortSignal,
        describe: {
          provider: provider.name,
          concurrency: flags.concurrency,
          rpm: flags.rpm ?? null,
          tpm: flags.tpm ?? null,
          maxAttempts: flags.maxAttempts,
          budget: flags.budget ?? null,
          budgetTotal: flags.budgetTotal ?? null,
        },
        alerts: alerts ? () => alerts.active() : undefined,
      },
      {
        concurrency: flags.concurrency,
        rpm: flags.rpm,
        tpm: flags.tpm,
        maxAttempts: flags.maxAttempts,
        limit: flags.limit,
        retryDelayMs: flags.retryDelay * 1000,
        timeout: flags.timeout === 'auto' ? 'auto' : flags.timeout * 1000,
        timeoutCapMs: AUTO_TIMEOUT_CAP_MS,
        maxOutageMs: flags.maxOutage * 60_000,
        budget: { runUsd: flags.budget ?? null, totalUsd: flags.budgetTotal ?? null },
      },
    );
  } finally {
    progress?.stop();
    alerts?.stop();
    stopping.dispose();
    await store.close();
    await provider.close?.();
  }
  if (hooks) whileReaderPresent(process.stderr).write(hookReportLine(await hooks.finish(summary, exitCodeFor(summary))));
  if (summary.fatal) {
    whileReaderPresent(process.stderr).write(`error: ${summary.fatal.message}\n${fixFor(summary.fatal.reason, summary.fatal.message)}\n`);
  }
  if (summary.budget) whileReaderPresent(process.stderr).write(budgetMessage(summary.budget, summary.remaining) + '\n');
  process.exitCode = exitCodeFor(summary);
}

/** A key too short to tell apart from ordinary text cannot be redacted; say so once, before anything is sent. */
function warnIfKeyUnredactable(found: { key: string; name: string } | undefined): void {
  if (found && !isRedactableKey(found.key)) {
    warn(
      `${found.name} is shorter than ${MIN_REDACTED_RUN} characters; llmq cannot tell it apart from ordinary text and will not redact it.`,
    );
  }
}

/** What to do after a run-fatal error. No job was used up by it. */
function fixFor(reason: string, message: string): string {
  const after = 'No job was used up: they are all still pending. Run llmq run again once this is fixed.';
  if (reason === 'auth') return `The provider refused the API key. ${after}`;
  if (reason === 'quota') return `The account is out of quota. Add credit or raise the limit with the provider. ${after}`;
  if (message.startsWith('HTTP 404')) {
    return `The first answers were all 404: the endpoint or the model does not exist there. Check --base-url (it usually ends in /v1) and the model. ${after}`;
  }
  return after;
}

/** Redis-kept lanes: one budget per endpoint and model, shared by every run naming the same Redis. */
async function sharedBoards(url: string) {
  const { RedisLaneBoards } = await import('../../scheduler/redis-boards.js');
  return RedisLaneBoards.connect(url);
}

/** The longest a request may take under --timeout auto. */
const AUTO_TIMEOUT_CAP_MS = 600_000;

/** `6h`, `90m`, `45s` or a number of seconds, in ms. */
function durationMs(value: string): number {
  // one duration grammar for every flag (the alerts' own: 90s, 15m, 6h, 1h30m, bare seconds)
  let ms = Number.NaN;
  try {
    ms = parseDuration(value, '--deadline');
  } catch {}
  if (!(ms > 0)) throw new InvalidArgumentError('Expected a duration like 6h, 90m, 1h30m or 45s.');
  return ms;
}

/** `auto`, or a number of seconds greater than 0. */
function secondsOrAuto(value: string): number | 'auto' {
  if (value.trim().toLowerCase() === 'auto') return 'auto';
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n <= 0)
    throw new InvalidArgumentError('Expected auto, or a number of seconds greater than 0.');
  return n;
}

/** "budget reached: $4.98 of $5.00; 1,204 jobs pending; run again with a larger --budget to go on" */
export function budgetMessage(b: NonNullable<RunSummary['budget']>, pending: number): string {
  const flag = b.scope === 'run' ? '--budget' : '--budget-total';
  return (
    `budget reached: ${usd(b.committedUsd)} of ${usd(b.limitUsd)}${b.scope === 'total' ? ' for the whole queue' : ''}; ` +
    `${int(pending)} ${pending === 1 ? 'job' : 'jobs'} pending; run again with a larger ${flag} to go on`
  );
}

/** 130 on a signal, 1 on a run-fatal error, 3 when the budget stopped it, 2 when jobs failed, else 0. */
export function exitCodeFor(summary: RunSummary): number {
  if (summary.reason === 'signal') return EXIT.SIGNAL;
  if (summary.reason === 'fatal') return EXIT.ERROR;
  if (summary.reason === 'budget') return EXIT.BUDGET;
  return summary.failedInStore > 0 ? EXIT.PARTIAL : EXIT.OK;
}
