import { Option, type Command } from 'commander';
import type { BatchApi } from '../../batch/api.js';
import type { BatchRow } from '../../store/batches.js';
import { dbOption, oneOf } from '../options.js';
import { MOCK_BASE_URL } from '../../mock-base-url.js';

interface CancelFlags {
  db?: string;
  provider?: 'openai' | 'mock';
  baseUrl?: string;
  json?: boolean;
}

export function registerBatches(program: Command): Command {
  const batches = program
    .command('batches')
    .description('List and manage the batches llmq run --via batch submitted.')
    // the list's own flags are read by `llmq batches` alone (list is the default): said here, where one looks first
    .addHelpText(
      'after',
      `
llmq batches alone is llmq batches list: it takes --db <path|url> and --json
(llmq batches list --help).

Examples:
  $ llmq batches --db q.db
  $ llmq batches cancel batch_abc123 --db q.db`,
    );
  // the default: `llmq batches` lists them
  batches
    .command('list', { isDefault: true })
    .description('The live batches of this queue, then the last few that ended, as status shows them.')
    .addOption(dbOption())
    .option('--json', 'print {"live": n, "batches": [...]} on stdout')
    .action(listCommand);
  batches
    .command('cancel [id]')
    .description('Cancel one live batch of this queue (provider batch id or llmq submission id), or all of them.')
    .addOption(dbOption())
    .addOption(
      new Option('--provider <name>', 'openai or mock (default: the one each batch went to)').argParser(oneOf(['openai', 'mock'] as const)),
    )
    .option('--base-url <url>', 'the OpenAI-compatible API base to ask (default: the one each batch went to)')
    .option('--json', 'print {"cancelled": [ids], "unknown": [ids]} on stdout')
    .addHelpText(
      'after',
      `
Answers given before the cancel are kept: the next llmq run --via batch stores them, puts the
other jobs back to pending, and sends those again in new batches (a run sends pending jobs). Until
a run does, nothing more is spent.

Examples:
  $ llmq batches cancel                 # every live batch of this queue
  $ llmq batches cancel batch_abc123`,
    )
    .action(cancelCommand)
    .exitOverride()
    .showHelpAfterError('(run with --help for usage)');
  batches
    .command('forget <id>')
    .description('Hand the jobs of one live batch back to pending without asking the provider (for a batch llmq cannot reach any more).')
    .addOption(dbOption())
    .option('--json', 'print {"forgotten": id, "requeued": n} on stdout')
    .addHelpText(
      'after',
      `
For a batch sent to an endpoint that is gone, or with an API key that was revoked: llmq leaves such
a batch alone and holds its jobs, since it may still run and bill. If it does, its jobs are paid
twice once the next run sends them: cancel it where it went first if you can.

Example:
  $ llmq batches forget batch_abc123`,
    )
    .action(forgetCommand)
    .exitOverride()
    .showHelpAfterError('(run with --help for usage)');
  return batches;
}

/** `llmq batches`: the live batches, then the last few that ended, as `status` shows them. */
async function listCommand(flags: { db?: string; json?: boolean }): Promise<void> {
  const [
    { resolveDbLocation },
    { openExistingStore },
    { buildBatchesReport, readBatchRows, renderBatches },
    { colorsFor, info },
    { deadRunsHere, workingRuns },
    { collectedByLiveRun, uncollectedLabel },
    { collectCommand, dbArgument },
  ] = await Promise.all([
    import('../../store/open-store.js'),
    import('../../report/open-existing.js'),
    import('../../report/batches-text.js'),
    import('../output.js'),
    import('../../report/status-cost.js'),
    import('../../batches-uncollected.js'),
    import('../again.js'),
  ]);
  const store = await openExistingStore(resolveDbLocation(flags.db));
  try {
    const now = Date.now();
    const runs = await store.activeRuns();
    const report = buildBatchesReport(await readBatchRows(store.batches), now, { active: runs, dead: deadRunsHere(runs, now) });
    if (flags.json) process.stdout.write(JSON.stringify({ live: report.live, batches: report.rows }) + '\n');
    else if (report.rows.length === 0) info('no batches: this queue has not used the batch lane (llmq run --via batch)');
    else {
      const paint = colorsFor(process.stdout);
      process.stdout.write(renderBatches(report, paint).replace(/^\n/, ''));
      // as status says it: the rows say "the next llmq run --via batch", this names the one that reaches them
      const live = workingRuns(runs, now).map((r) => ({ via: r.options.via, baseUrl: r.options.baseUrl ?? null }));
      for (const u of report.uncollected.filter((u) => !collectedByLiveRun(u.baseUrl, live)))
        process.stdout.write(paint.dim(`${uncollectedLabel(u.jobs)} ${collectCommand(u.baseUrl)}${dbArgument(flags.db)}\n`));
    }
  } finally {
    await store.close();
  }
}

async function forgetCommand(id: string, flags: { db?: string; json?: boolean }): Promise<void> {
  const [
    { forgetBatch, NoLiveBatchError },
    { resolveDbLocation },
    { openExistingStore },
    { dbArgument, runArgumentsOfEndpoint },
    { nameKey },
    { runGoesOn },
  ] = await Promise.all([
    import('../../batch/forget.js'),
    import('../../store/open-store.js'),
    import('../../report/open-existing.js'),
    import('../again.js'),
    import('../../batch/api-key-id.js'),
    import('../../report/status-cost.js'),
  ]);
  const store = await openExistingStore(resolveDbLocation(flags.db));
  // A run collecting the batch reaches it: forgotten, its jobs went into a new batch at once, while
  // this one ran on, both billed. On this machine its pid says whether it lives (a stopped one goes
  // on when continued); elsewhere its heartbeat.
  const collecting = async (batch: BatchRow): Promise<string | null> => {
    const now = Date.now();
    const run = (await store.activeRuns()).find((r) => r.id === batch.runId && runGoesOn(r, now));
    if (!run) return null;
    const name = batch.providerBatchId ?? batch.id;
    return (
      `${name} is being collected by run ${run.id.slice(0, 8)} (pid ${run.pid} on ${run.host}), which reaches it: forgotten now, ` +
      'its jobs would go into a new batch at once while this one runs on, and both would be billed. ' +
      `Let that run collect it, or cancel it with llmq batches cancel ${name}${dbArgument(flags.db)}; ` +
      'forget is for a batch no run can reach: stop that run first (Ctrl-C) if it cannot.'
    );
  };
  try {
    const { batch, requeued } = await forgetBatch(store, id, Date.now(), collecting).catch(
      listLiveBatchesWith(NoLiveBatchError, `llmq status${dbArgument(flags.db)}`),
    );
    const name = batch.providerBatchId ?? batch.id;
    if (flags.json) process.stdout.write(JSON.stringify({ forgotten: name, requeued }) + '\n');
    const sentWith = batch.apiKey ? ` with ${nameKey(batch.apiKey, 'an API key')}` : '';
    // the mock's batches end with the process that made them: nothing of one runs on, or is billed
    const stillBilled =
      batch.baseUrl === MOCK_BASE_URL
        ? ''
        : ` If the batch still runs at ${batch.baseUrl} (it was sent${sentWith || ' without a key'}), it is billed there as well.`;
    process.stderr.write(
      // to the endpoint the batch went to: a bare llmq run may send them elsewhere (to OpenAI, billed)
      `Forgot ${name}: ${requeued} ${requeued === 1 ? 'job' : 'jobs'} back to pending; llmq run --via batch${runArgumentsOfEndpoint(batch.baseUrl)}${dbArgument(flags.db)} sends them${batch.baseUrl === MOCK_BASE_URL ? '' : ' there (or to the endpoint that took its place, by its --base-url)'}.${stillBilled}\n`,
    );
  } finally {
    await store.close();
  }
}

async function cancelCommand(id: string | undefined, flags: CancelFlags): Promise<void> {
  const [
    { createBatchApi },
    { cancelBatches },
    { resolveDbLocation },
    { openExistingStore },
    { dbArgument, runArgumentsOfEndpoint },
    { laneBaseUrl },
    { apiKeyId, nameKey, sentWithAnotherKey },
    { findApiKey },
    { runGoesOn },
    { NoLiveBatchError },
  ] = await Promise.all([
    import('../../batch/create.js'),
    import('../../batch/cancel.js'),
    import('../../store/open-store.js'),
    import('../../report/open-existing.js'),
    import('../again.js'),
    import('../lane-base-url.js'),
    import('../../batch/api-key-id.js'),
    import('../../provider/endpoint.js'),
    import('../../report/status-cost.js'),
    import('../../batch/forget.js'),
  ]);
  // Each batch is asked of the endpoint it was sent to, as recorded with it (without credentials:
  // the key comes from the environment), unless one is named here; LLMQ_BASE_URL may not be what
  // the run used.
  const named = flags.provider !== undefined || flags.baseUrl !== undefined;
  const namedEndpoint = named ? laneBaseUrl({ provider: flags.provider ?? 'openai', baseUrl: flags.baseUrl }) : null;
  const apis = new Map<string, BatchApi>();
  const apiFor = (batch: BatchRow): BatchApi => {
    const endpoint = namedEndpoint ?? batch.baseUrl;
    let api = apis.get(endpoint);
    if (!api) {
      api = createBatchApi(
        named
          ? { provider: flags.provider ?? 'openai', baseUrl: flags.baseUrl }
          : endpoint === MOCK_BASE_URL
            ? { provider: 'mock' }
            : { provider: 'openai', baseUrl: endpoint },
        process.env,
      );
      apis.set(endpoint, api);
    }
    return api;
  };
  const store = await openExistingStore(resolveDbLocation(flags.db));
  try {
    const { cancelled, unknown, sentTo, sentWith, madeBy } = await cancelBatches(store, apiFor, id).catch(
      listLiveBatchesWith(NoLiveBatchError, `llmq status${dbArgument(flags.db)}`),
    );
    if (flags.json) process.stdout.write(JSON.stringify({ cancelled, unknown }) + '\n');
    // a run collects only the batches of its own endpoint: the command suggested names each one's
    const collect = (ids: readonly string[]) =>
      [...new Set(ids.map((b) => runArgumentsOfEndpoint(sentTo.get(b)!)))]
        .map((endpoint) => `llmq run --via batch${endpoint}${dbArgument(flags.db)}`)
        .join(' and ');
    // The mock's Batch API lives in the process of the run that made the batch: while that process
    // lives, only it can cancel (runGoesOn).
    const now = Date.now();
    const runs = await store.activeRuns();
    const liveRun = (b: string) => runs.find((r) => r.id === madeBy.get(b) && runGoesOn(r, now));
    const said: string[] = [];
    if (cancelled.length > 0) {
      // a run collecting them now sends the rest again in new batches at once: said, for a cancel meant to stop spending
      const collectors = [...new Map(cancelled.flatMap((b) => liveRun(b) ?? []).map((r) => [r.id, r])).values()];
      said.push(
        collectors.length > 0
          ? `Asked the provider to cancel ${cancelled.join(', ')}. ${collectors.map((r) => `Run ${r.id.slice(0, 8)} (pid ${r.pid} on ${r.host})`).join(' and ')} ` +
              `${collectors.length === 1 ? 'collects' : 'collect'} them now: what was answered is kept, and the rest goes back to pending and into new batches at once. ` +
              `To stop spending, stop ${collectors.length === 1 ? 'that run' : 'those runs'} too (Ctrl-C).`
          : `Asked the provider to cancel ${cancelled.join(', ')}. ${collect(cancelled)} collects what was answered and puts the rest ` +
              'back to pending, then sends those again in new batches; until a run does, nothing more is spent.',
      );
    }
    // a 404 from an endpoint named here, not the one a batch went to, says nothing of that batch
    const elsewhere = unknown.filter((b) => namedEndpoint !== null && sentTo.get(b) !== namedEndpoint);
    // nor does a 404 to another API key, which may not see the batch its own key made
    const key = apiKeyId(findApiKey(process.env)?.key);
    const otherKey = unknown.filter(
      (b) => !elsewhere.includes(b) && sentTo.get(b) !== MOCK_BASE_URL && sentWithAnotherKey(sentWith.get(b)!, key),
    );
    const inLiveMock = unknown.filter((b) => !elsewhere.includes(b) && sentTo.get(b) === MOCK_BASE_URL && liveRun(b));
    const lost = unknown.filter((b) => !elsewhere.includes(b) && !otherKey.includes(b) && !inLiveMock.includes(b));
    if (lost.length > 0) {
      said.push(
        `The provider does not know ${lost.join(', ')} (HTTP 404: gone, or made by the mock in a process that has ended): ` +
          `nothing to cancel there. The next ${collect(lost)} hands their jobs back to pending.`,
      );
    }
    for (const b of inLiveMock) {
      const run = liveRun(b)!;
      said.push(
        `${b} is a batch of the offline mock provider, which lives in the process of run ${run.id.slice(0, 8)} ` +
          `(pid ${run.pid} on ${run.host}, still running): only that run can cancel it. Stop it (Ctrl-C); its batches end with it ` +
          'and their jobs go back to pending.',
      );
    }
    // a batch asked for stays live: said by the exit code too
    if (inLiveMock.length > 0) process.exitCode = 1;
    for (const b of otherKey) {
      said.push(
        `${b} was sent with ${nameKey(sentWith.get(b)!, 'another API key')}, and the provider does not show it to this one (HTTP 404): ` +
          `cancel it with that key set (LLMQ_API_KEY or OPENAI_API_KEY).`,
      );
    }
    for (const b of elsewhere) {
      said.push(
        `${b} was sent to ${sentTo.get(b)}, not the endpoint named here, which does not know it (HTTP 404): ` +
          `cancel it where it went with llmq batches cancel ${b}${dbArgument(flags.db)}.`,
      );
    }
    process.stderr.write(`${said.length === 0 ? 'No live batches.' : said.join('\n')}\n`);
  } finally {
    await store.close();
  }
}

/** A `catch` that names the command listing the live batches (with the queue's --db) when the one asked for is not among them. */
function listLiveBatchesWith(
  noLiveBatch: typeof import('../../batch/forget.js').NoLiveBatchError,
  statusCommand: string,
): (error: unknown) => never {
  return (error) => {
    throw error instanceof noLiveBatch ? error.withHint(statusCommand) : error;
  };
}
