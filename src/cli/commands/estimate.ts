import { Option, type Command } from 'commander';
import { withoutFractionNoise } from '../../pricing/usd-value.js';
import { int } from '../../report/format.js';
import type { Budget } from '../../report/estimate.js';
import type { RunsGoneHere } from '../../report/status-cost.js';
import type { Store } from '../../store/types.js';
import { mockRunToTakeBack } from '../../store/mock-answers.js';
import { mockLatencyOption, refuseMockFlags } from '../mock-latency-option.js';
import { dbOption, DEFAULT_CONCURRENCY, DEFAULT_MAX_ATTEMPTS, intAtLeast, oneOf } from '../options.js';
import { priceOptions, priceTableFrom, reportPriceTable, type PriceFlags } from './price-options.js';
import { committedUsd } from '../../store/spend-types.js';

/** What `estimate` reads, and what `run --dry-run` hands it from its own flags. */
export interface EstimateFlags extends PriceFlags {
  db?: string;
  provider: 'openai' | 'mock';
  baseUrl?: string;
  /** The offline mock's latency, ms: with --provider mock, every answer's (no answer of the mock's is a real one to learn from). */
  mockLatency: number;
  concurrency: number;
  rpm?: number;
  tpm?: number;
  limit?: number;
  maxAttempts: number;
  json?: boolean;
  /** `llmq run --dry-run --budget`: said against the estimate. */
  budget?: number;
  budgetTotal?: number;
}

export function registerEstimate(program: Command): Command {
  const cmd = program
    .command('estimate')
    .description('What the next llmq run would send, cost (online and at the batch price) and take, sending nothing.')
    .addOption(dbOption())
    .addOption(
      new Option('--provider <name>', 'openai or mock, as for run (limits are learned per endpoint)')
        .default('openai')
        .argParser(oneOf(['openai', 'mock'] as const)),
    )
    .option('--base-url <url>', 'the endpoint run would use (env LLMQ_BASE_URL, OPENAI_BASE_URL): its learned limits apply')
    .addOption(
      new Option('-c, --concurrency <n>', 'requests in flight at most, as for run').default(DEFAULT_CONCURRENCY).argParser(intAtLeast(1)),
    )
    .addOption(new Option('--rpm <n>', 'requests per minute per model at most, as for run').argParser(intAtLeast(1)))
    .addOption(new Option('--tpm <n>', 'tokens per minute per model at most, as for run').argParser(intAtLeast(1)))
    .addOption(new Option('--limit <n>', 'only the first N jobs a run would take').argParser(intAtLeast(1)))
    .addOption(
      new Option('--max-attempts <n>', 'jobs that used this many attempts would fail unsent, as for run')
        .default(DEFAULT_MAX_ATTEMPTS)
        .argParser(intAtLeast(1)),
    )
    .addOption(mockLatencyOption())
    .option('--json', 'print the estimate as one JSON object');
  for (const o of priceOptions()) cmd.addOption(o);
  return cmd
    .addHelpText(
      'after',
      `
Prompts are counted with the tokenizer; answers are as long as this queue's answers of the same
model have been (mean to 90th percentile), or up to max_tokens before any came. "worst" is every
answer max_tokens long: what --budget reserves.

Examples:
  $ llmq estimate
  $ llmq estimate --limit 1000 --rpm 500 --json
  $ llmq run --dry-run --budget 5             # the same, from run's own flags`,
    )
    .action((flags: EstimateFlags, cmd: Command) => estimateCommand(flags, {}, cmd));
}

export async function estimateCommand(
  flags: EstimateFlags,
  o: { dryRun?: boolean; via?: 'online' | 'batch' | 'auto'; deadlineMs?: number } = {},
  cmd?: Command,
): Promise<void> {
  // run refuses it the same way (refuseFlagsOfOtherProvider), before a dry run comes here
  refuseMockFlags(
    flags.provider,
    cmd?.getOptionValueSource('mockLatency') === 'cli' ? ['--mock-latency'] : [],
    'this estimate is of a real one',
  );
  const [
    { resolveDbLocation, redactLocation },
    { openExistingStore },
    { estimateRun },
    { renderEstimate },
    { laneBaseUrl },
    { colorsFor },
    { statusLine },
  ] = await Promise.all([
    import('../../store/open-store.js'),
    import('../../report/open-existing.js'),
    import('../../report/estimate.js'),
    import('../../report/estimate-text.js'),
    import('../lane-base-url.js'),
    import('../output.js'),
    import('../progress/status-line.js'),
  ]);
  const { budgetVerdict } = await import('../../report/estimate.js');
  const { STALE_RUN_MS, runsGoneHere } = await import('../../report/status-cost.js');
  const baseUrl = laneBaseUrl(flags);
  const location = resolveDbLocation(flags.db);
  const store = await openExistingStore(location);
  try {
    // `run --dry-run` prices as that run would; `estimate` as `status` does: with no price given, at
    // the one the queue's last run was given, so the two agree on what the rest costs
    // not a mock run's: a price given to try a budget offline is no price of the provider's
    const lastRun = (await store.status()).lastRun;
    const prices =
      o.dryRun || flags.provider === 'mock' || lastRun?.options.provider === 'mock'
        ? await priceTableFrom(flags)
        : await reportPriceTable(flags, lastRun);
    // a real run first takes the mock's answers back (src/cli/mock-answers.ts), sends those jobs, and
    // leaves their money out of --budget-total
    const mockAnswersBefore = flags.provider === 'mock' ? undefined : Date.now() - STALE_RUN_MS;
    const line = statusLine(process.stderr);
    const estimate = await estimateRun(store, {
      prices,
      now: Date.now(),
      baseUrl,
      limit: flags.limit,
      maxAttempts: flags.maxAttempts,
      rpm: flags.rpm,
      tpm: flags.tpm,
      concurrency: flags.concurrency,
      latencyMs: flags.provider === 'mock' ? flags.mockLatency : undefined,
      mockAnswersBefore,
      // a run stopped here with Ctrl-Z keeps its jobs past their leases: a run would not send them;
      // one whose process is gone has them taken back at once, and sent
      ...ownersGone(runsGoneHere(await store.activeRuns(), Date.now())),
      onProgress: (looked, of) => line.update(() => `counting prompts: ${int(looked)} of ${int(of)} jobs`),
    });
    line.done();
    const budget = await budgetOf(flags, store, mockAnswersBefore);
    process.stdout.write(
      flags.json
        ? JSON.stringify(budget ? { ...estimate, budget: budgetVerdict(estimate, budget) } : estimate, withoutFractionNoise) + '\n'
        : renderEstimate(estimate, {
            db: redactLocation(location),
            paint: colorsFor(process.stdout),
            budget,
            dryRun: o.dryRun,
            mock: flags.provider === 'mock',
            concurrency: flags.concurrency,
            inBatches: o.via === 'batch',
            autoDeadlineMs: o.via === 'auto' ? o.deadlineMs : undefined,
          }),
    );
  } finally {
    await store.close();
  }
}

/**
 * The budget a dry run was given: of --budget (a run's own, from nothing) and --budget-total (less
 * what the queue's runs have spent or hold), the one with less left.
 */
async function budgetOf(flags: EstimateFlags, store: Store, mockAnswersBefore: number | undefined): Promise<Budget | undefined> {
  const run: Budget | undefined = flags.budget === undefined ? undefined : { flag: '--budget', usd: flags.budget, committed: 0 };
  if (flags.budgetTotal === undefined) return run;
  let committed = (await store.committed('')).total;
  if (mockAnswersBefore !== undefined) {
    for (const r of (await store.status()).spend) {
      if (mockRunToTakeBack(r, mockAnswersBefore)) committed -= committedUsd(r.spend);
    }
  }
  const total: Budget = { flag: '--budget-total', usd: flags.budgetTotal, committed: Math.max(0, committed) };
  return run && run.usd <= total.usd - total.committed ? run : total;
}

/** Which runs here keep their jobs from a run (stopped with Ctrl-Z) and which give them to it (their process gone). */
function ownersGone(gone: RunsGoneHere): { spared: string[]; deadOwners: string[] } {
  return { spared: [...gone.stopped], deadOwners: [...gone.dead, ...gone.pidGone] };
}
