import { nameKey } from '../../batch/api-key-id.js';
import { openAiProviderName } from '../../provider/endpoint.js';
import { INCOMPLETE_WARNING } from '../../provider/finish.js';
import type { BatchEvent } from '../../batch/context.js';
import type { RunSummary } from '../../scheduler/events.js';
import { compact, int, NO_PAINT, usd } from '../../report/format.js';
import { info, warn } from '../output.js';
import { cutOffLines, failedLines, incompleteKeptText, incompleteText } from '../progress/lines.js';
import { takeBackMockAnswers } from '../mock-answers.js';
import { whileReaderPresent } from '../reader-gone.js';
import { collectCommand, dbArgument, endpointOption, runArguments, runArgumentsOfEndpoint, runArgumentsOfRun } from '../again.js';
import { watchRunStop } from '../run-stop.js';
import { crashAtFromEnv } from '../crash-at.js';
import { priceTableFrom, pricesOfRun, type PriceFlags } from './price-options.js';
import type { ModelPricing } from '../../pricing/model-pricing.js';

export interface BatchRunFlags extends PriceFlags {
  db?: string;
  provider: 'openai' | 'mock';
  baseUrl?: string;
  limit?: number;
  maxAttempts: number;
  poll: number;
  batchSize: number;
  wait: boolean;
  json?: boolean;
  grace: number;
  mockLatency: number;
  mockFailureRate: number;
  /** --max-outage, minutes: a Batch API unreachable this long ends the run (exit 1). */
  maxOutage: number;
  /** ms epoch when the batch lane cancels its batches and returns (`--via auto`). */
  until?: number;
}

/** `llmq run --via batch`: the batch lane, with its events as plain lines (or JSON with --json). */
export async function runBatchCommand(flags: BatchRunFlags, baseUrl: string): Promise<RunSummary> {
  const [{ createBatchApi }, { resolveDbLocation }, { openExistingStore }, { runBatchLane }, { findApiKey }] = await Promise.all([
    import('../../batch/create.js'),
    import('../../store/open-store.js'),
    import('../../report/open-existing.js'),
    import('../../batch/lane.js'),
    import('../../provider/endpoint.js'),
  ]);
  // The mock completes a batch in --mock-latency x 5 (1 s by default): time-compressed hours.
  const api = createBatchApi(
    {
      provider: flags.provider,
      baseUrl: flags.baseUrl,
      mockCompleteAfterMs: flags.mockLatency * 5,
      mockFailureRate: flags.mockFailureRate,
    },
    process.env,
  );
  const store = await openExistingStore(resolveDbLocation(flags.db));
  await takeBackMockAnswers(store, flags.provider).catch(async (error) => {
    await store.close();
    throw error;
  });
  const out = whileReaderPresent(flags.json ? process.stdout : process.stderr);
  const progress = new ProgressLines();
  const prices = await priceTableFrom(flags);
  const modelsChecked = new Set<string>();
  const incompleteTold = new Set<string>();
  const say = (event: BatchEvent): void => {
    if (event.type === 'submitted' && !modelsChecked.has(event.model)) {
      modelsChecked.add(event.model);
      const told = unpricedBatchText(event.model, prices.lookup(event.model));
      if (told) warn(told);
    }
    // answers that are not the whole answer, said the first time each kind comes, as an online run says them
    if (event.type === 'ended')
      for (const kind of ['cutOff', 'refused', 'empty'] as const) {
        if (event[kind] === 0 || incompleteTold.has(kind)) continue;
        incompleteTold.add(kind);
        warn(INCOMPLETE_WARNING[kind === 'cutOff' && flags.provider === 'mock' ? 'mockCutOff' : kind]);
      }
    if (!flags.json && event.type === 'progress' && !progress.due(event)) return;
    const line = flags.json ? JSON.stringify({ event: `batch:${event.type}`, time: Date.now(), ...event }) : describe(event, flags.db);
    if (line) out.write(line + '\n');
  };
  // named as an online run's provider is, so the command proposed after it goes to the same place
  const options = {
    via: 'batch',
    provider: flags.provider === 'mock' ? 'mock' : openAiProviderName(baseUrl),
    // whose batches it collects: status tells the batches of another endpoint apart
    baseUrl,
    ...endpointOption(flags),
    batchSize: flags.batchSize,
    poll: flags.poll,
    wait: flags.wait,
    // what a run proposed after it (runArgumentsOfRun) fails and waits as this one: a job is given up after
    // as many tries, and the mock's batches take 5 x --mock-latency
    maxAttempts: flags.maxAttempts,
    ...(flags.provider === 'mock' ? { mockLatency: flags.mockLatency } : {}),
    ...pricesOfRun(flags),
  };
  const stopping = watchRunStop(flags.grace * 1000, () => {});
  try {
    const summary = await runBatchLane(
      {
        store,
        api,
        baseUrl,
        // the mock has no keys: a key set in the environment says nothing of its batches
        secret: flags.provider === 'mock' ? undefined : findApiKey(process.env)?.key,
        prices,
        emit: say,
        stopSignal: stopping.stopSignal,
        crashAt: crashAtFromEnv(process.env),
        describe: options,
      },
      {
        batchSize: flags.batchSize,
        pollMs: flags.poll * 1000,
        limit: flags.limit,
        maxAttempts: flags.maxAttempts,
        noWait: !flags.wait,
        until: flags.until,
        // a Batch API that stays unreachable ends the run as an online one's provider does
        maxRetryMs: flags.maxOutage * 60_000,
      },
    );
    // each event with its time, as an online run's
    if (flags.json) out.write(JSON.stringify({ event: 'run:end', time: Date.now(), ...summary }) + '\n');
    else {
      // --via auto at three quarters of its deadline: the lane cancelled its batches, the rest goes online
      const handedOn = flags.until !== undefined && summary.reason === 'drained' && summary.remaining > 0 && Date.now() >= flags.until;
      // --no-wait ends with its batches out, not with the queue drained
      const why = handedOn
        ? 'three quarters of --deadline have passed: they go online now'
        : !flags.wait && summary.reason === 'drained' && summary.remaining > 0
          ? 'submitted, not waiting'
          : summary.reason;
      info(
        `batch lane: ${int(summary.done)} done, ${int(summary.failed)} failed, ${int(summary.remaining)} pending or in a batch (${why})`,
      );
      const spent = spentText(summary);
      if (spent) info(spent);
      const incomplete = incompleteText(summary);
      if (incomplete) info(`  ${incomplete} ${incompleteKeptText(summary)}`);
      // as an online run ends (exit 2): where to see why, and the batch run that tries them again;
      // --via auto goes on online, whose own end says it
      if (flags.until === undefined) {
        // the run that sends the cut-off ones again goes through the Batch API, as this one did
        for (const line of cutOffLines(
          summary,
          NO_PAINT,
          `llmq run${runArgumentsOfRun(options)}`,
          dbArgument(flags.db),
          flags.provider === 'mock',
        ))
          info(line);
        // the run status proposes after this one, from what this one stores: its lane, endpoint, tries and prices
        for (const line of failedLines(summary, NO_PAINT, { again: dbArgument(flags.db), runAgain: runArgumentsOfRun(options) }))
          info(line);
      }
      // --no-wait ends as soon as its batches are out: say where their answers will come from
      if (!flags.wait && summary.remaining > 0 && summary.reason === 'drained') {
        const collect = `llmq run --via batch${runArguments(flags)}${dbArgument(flags.db)}`;
        info(
          flags.provider === 'mock'
            ? `${collect} sends them again: the mock's batches end with the process that made them`
            : `${collect} collects the answers of the batches that have ended (within 24 hours)`,
        );
      }
    }
    if (summary.fatal) {
      whileReaderPresent(process.stderr).write(
        `error: ${summary.fatal.message}\nJobs not in a live batch are pending; batches already created are collected by the next llmq run --via batch${runArguments(flags)}${dbArgument(flags.db)}.\n`,
      );
    }
    return summary;
  } finally {
    stopping.dispose();
    await store.close();
  }
}

/**
 * "  tokens 87 in · 39 out · cost $0.0000182 at the batch price", as an online run's summary says
 * what it spent; null when the run collected no answer (one that only submitted pays nothing yet:
 * the run that collects its batches does). Without it the summary of a batch run said nothing of
 * its money.
 */
export function spentText(s: Pick<RunSummary, 'done' | 'failed' | 'promptTokens' | 'completionTokens' | 'costUsd'>): string | null {
  if (s.done + s.failed === 0 && s.promptTokens + s.completionTokens === 0) return null;
  const cost = s.costUsd === null ? 'cost unknown (a model has no batch price)' : `cost ${usd(s.costUsd)} at the batch price`;
  return `  tokens ${compact(s.promptTokens)} in · ${compact(s.completionTokens)} out · ${cost}`;
}

function describe(e: BatchEvent, db: string | undefined): string | null {
  switch (e.type) {
    case 'submitted':
      return `submitted ${int(e.jobs)} ${e.jobs === 1 ? 'job' : 'jobs'} of ${e.model} as batch ${e.providerBatchId}`;
    case 'adopted':
      return `took over ${e.providerBatchId ? `batch ${e.providerBatchId}` : `submission ${e.id}`} from run ${e.from.slice(0, 8)}`;
    case 'ended':
      return `${e.providerBatchId ? `batch ${e.providerBatchId}` : `batch of submission ${e.id}`} ${e.providerStatus}: ${int(e.done)} done, ${int(e.failed)} failed, ${int(e.requeued)} back to pending`;
    case 'abandoned':
      return `submission ${e.id} not sent (${e.reason}); ${e.requeued} jobs back to pending`;
    case 'waiting':
      return `waiting ${Math.max(0, Math.round((e.untilMs - Date.now()) / 1000))} s: ${e.reason === 'quota' ? 'the provider has too much queued' : 'the Batch API failed'} (${e.message})`;
    case 'elsewhere': {
      const which = e.providerBatchId ? `batch ${e.providerBatchId}` : `submission ${e.id}`;
      const collect = collectCommand(e.baseUrl) + dbArgument(db);
      return (
        `${which} of an earlier run was sent to ${e.baseUrl}, not this run's endpoint: left alone, its jobs held; ${collect} collects it ` +
        `(if that endpoint is gone for good: llmq batches forget ${e.providerBatchId ?? e.id}${dbArgument(db)})`
      );
    }
    case 'other-key': {
      const which = e.providerBatchId ? `batch ${e.providerBatchId}` : `submission ${e.id}`;
      // no key set is the likelier mistake than another key: say that, not "this run's key"
      const cannot =
        e.key === null
          ? 'this run has no API key (LLMQ_API_KEY, OPENAI_API_KEY) to see it'
          : `this run's key${e.key.hint ? ` (ending in ${e.key.hint})` : ''} cannot see it`;
      return (
        `${which} of an earlier run was sent with ${nameKey(e.sentWith, 'another API key')}, and ${cannot}: ` +
        `left alone, its jobs held, as it may still run and be billed. Run llmq run --via batch${runArgumentsOfEndpoint(e.baseUrl)}${dbArgument(db)} with that key ` +
        `(LLMQ_API_KEY or OPENAI_API_KEY) to collect it (if that key is gone for good: llmq batches forget ${e.providerBatchId ?? e.id}${dbArgument(db)})`
      );
    }
    case 'dying-run':
      return `run ${e.runId.slice(0, 8)} (pid ${e.pid}) is no longer running: its batches are taken over once it has been silent ${Math.round(e.quietMs / 1000)} s`;
    case 'dead-runs': {
      const one = e.runIds.length === 1;
      const runs = `${one ? 'run' : 'runs'} ${e.runIds.map((id) => id.slice(0, 8)).join(', ')}`;
      const back = e.requeued > 0 ? `; ${int(e.requeued)} of ${one ? 'its' : 'their'} jobs back to pending` : '';
      return `${runs} recorded as died (${one ? 'its process is' : 'their processes are'} gone)${back}`;
    }
    case 'progress': {
      const far = e.progress
        ? `: ${int(e.progress.completed)} of ${int(e.jobs)} answered${e.progress.failed ? `, ${int(e.progress.failed)} failed` : ''}`
        : '';
      return `batch ${e.providerBatchId} ${e.status}${far}`;
    }
    case 'polled':
      return null;
  }
}

/**
 * Which progress of a long wait (up to 24 hours) is worth a line: a batch's new status at once, its
 * counts at most once a minute.
 */
class ProgressLines {
  readonly #said = new Map<string, { status: string; at: number }>();

  due(e: Extract<BatchEvent, { type: 'progress' }>, now = Date.now()): boolean {
    const last = this.#said.get(e.id);
    if (last && last.status === e.status && now - last.at < 60_000) return false;
    this.#said.set(e.id, { status: e.status, at: now });
    return true;
  }
}

/**
 * A model with an online price and no batch price (a given price of a model whose provider genai-prices
 * does not know, or a provider with no batch discount known): its batch answers are stored without a
 * cost, and status prices them at the online price, above the bill.
 */
function unpricedBatchText(model: string, pricing: ModelPricing | null): string | null {
  if (pricing === null || pricing.batchShare !== null) return null;
  return (
    `no batch price is known for ${model} (${pricing.source} gives its online price only): ` +
    'its batch answers are stored without a cost, and status prices them at the online price, likely above what the batch bills'
  );
}
