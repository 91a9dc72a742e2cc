import { refusesEndpoint } from '../../provider/classify.js';
import { randomInt } from 'node:crypto';
import { takeBackMockAnswers } from '../mock-answers.js';
import type { Command } from 'commander';
import { EXIT, UsageError } from '../../errors.js';
import { redactUrl, redactUrlQuery } from '../../url-credentials.js';
import { isRedactableKey, MIN_REDACTED_RUN } from '../../provider/redact.js';
import type { RefusedParameter, RunSummary, SchedulerListener } from '../../scheduler/events.js';
import { completionLimitField } from '../../ingest/completion-limit.js';
import { budgetTooSmallForRequests } from '../../scheduler/run-money.js';
import type { HookReport, RunHooks } from '../../hooks/run-hooks.js';
import { warn } from '../output.js';
import { int, usd, usdApart } from '../../report/format.js';
import { priceTableFrom, pricesOfRun } from './price-options.js';
import { whileReaderPresent } from '../reader-gone.js';
import { budgetsToRaise, dbArgument, endpointOption, limitArguments, moneyArguments, redisArguments, runArguments } from '../again.js';
import { refuseMockFlags } from '../mock-latency-option.js';
import { exitOnStopSignals, watchRunStop } from '../run-stop.js';
import { alertTarget, hookReportLine } from '../hook-flags.js';
import { alertsOn, watchAlerts } from '../alert-flags.js';
import type { RunFlags } from './run.js';

/** `llmq run`: a dry run, the batch lane, then the online lane, as --dry-run and --via ask. */
export async function runCommand(flags: RunFlags, cmd: Command): Promise<void> {
  refuseFlagsOfOtherLanes(flags, cmd);
  refuseFlagsOfOtherProvider(flags, cmd);
  refuseAlertFlagsWithoutThreshold(flags, cmd);
  // a dry run is refused what the run would be refused
  if (flags.via === 'auto' && flags.deadline === undefined) throw new UsageError('--via auto needs --deadline, e.g. --deadline 6h.');
  if (flags.dryRun) {
    const { estimateCommand } = await import('./estimate.js');
    return estimateCommand(flags, { dryRun: true, via: flags.via, deadlineMs: flags.deadline }, cmd);
  }
  const starting = exitOnStopSignals();
  try {
    await runLanes(flags, cmd, starting);
  } finally {
    starting();
  }
}

/** The batch lane, then the online lane, as --via asks; `starting` gives up the start's signal handlers (exitOnStopSignals) as a lane puts its own. */
async function runLanes(flags: RunFlags, cmd: Command, starting: () => void): Promise<void> {
  // no queue here is the first thing to say: a missing API key would otherwise be, and fixing it leads there
  const [{ resolveDbLocation }, { checkExistingQueue }] = await Promise.all([
    import('../../store/open-store.js'),
    import('../../report/open-existing.js'),
  ]);
  const location = resolveDbLocation(flags.db);
  await checkExistingQueue(location);
  if (flags.via !== 'online') {
    if (flags.provider === 'openai') warnIfKeyUnredactable((await import('../../provider/endpoint.js')).findApiKey(process.env));
    const [{ runBatchCommand }, { laneBaseUrl }] = await Promise.all([import('./run-batch.js'), import('../lane-base-url.js')]);
    // --via auto: the Batch API (half price) for three quarters of the time, the rest online.
    const until = flags.via === 'auto' ? Date.now() + Math.round(flags.deadline! * 0.75) : undefined;
    // The mock finishes a batch in 5 x --mock-latency: unless told otherwise, look that often, not every 30 s.
    const poll = flags.provider === 'mock' && cmd.getOptionValueSource('poll') === 'default' ? (flags.mockLatency * 5) / 1000 : flags.poll;
    starting();
    const batch = await runBatchCommand({ ...flags, poll: Math.max(0.05, poll), until }, laneBaseUrl(flags));
    if (flags.via === 'batch' || batch.reason === 'signal' || batch.reason === 'fatal' || batch.remaining === 0) {
      if (flags.via === 'batch' && flags.onDone) await batchDoneHook(flags.onDone, batch, flags.json === true);
      process.exitCode = exitCodeFor(batch);
      return;
    }
  }
  const [{ createProvider, findApiKey }, { laneBaseUrl }, { redactLocation }, { openExistingStore }, { runQueue }, { attachProgress }] =
    await Promise.all([
      import('../../provider/create.js'),
      import('../lane-base-url.js'),
      import('../../store/open-store.js'),
      import('../../report/open-existing.js'),
      import('../../scheduler/run-queue.js'),
      import('../progress/index.js'),
    ]);
  const prices = await priceTableFrom(flags);
  const provider = createProvider(
    {
      provider: flags.provider,
      baseUrl: flags.baseUrl,
      timeoutMs: flags.timeout === 'auto' ? AUTO_TIMEOUT_CAP_MS : Math.round(flags.timeout * 1000),
      // which tries fail is drawn afresh by each run: with one seed, the jobs retry-failed put back failed
      // again at the same tries, all together (taken for an outage)
      mock: { latencyMs: flags.mockLatency, failureRate: flags.mockFailureRate, seed: randomInt(2 ** 31) },
      connections: flags.concurrency,
    },
    process.env,
  );
  if (flags.provider === 'openai') warnIfKeyUnredactable(findApiKey(process.env));
  // the mock bills nothing at its own price ($0): a budget tried on it would never stop anything, and say nothing why
  if (flags.provider === 'mock' && (flags.budget !== undefined || flags.budgetTotal !== undefined) && !flags.price && !flags.prices)
    warn(
      'the offline mock bills nothing, so --budget and --budget-total never stop this run: to try a budget offline, price the mock with --price IN,OUT (USD per million tokens)',
    );
  const redisUrl = flags.redis || process.env.LLMQ_REDIS_URL || undefined;
  const boards = redisUrl ? await sharedBoards(redisUrl) : undefined;
  const store = await openExistingStore(location).catch(async (error) => {
    await boards?.close();
    throw error;
  });
  const budgeted = flags.budget !== undefined || flags.budgetTotal !== undefined;
  await takeBackMockAnswers(store, flags.provider, budgeted ? { prices } : undefined).catch(async (error) => {
    await store.close();
    await boards?.close();
    throw error;
  });

  const listeners: SchedulerListener[] = [];
  const emit: SchedulerListener = (event, payload) => {
    for (const l of listeners) l(event, payload);
  };
  starting();
  const stopping = watchRunStop(flags.grace * 1000, emit);

  const mode = flags.json ? 'json' : flags.progress === 'auto' ? (process.stderr.isTTY ? 'tty' : 'plain') : flags.progress;
  // a local server may need no key; said, so that a variable set under another name is not a surprise at the first 401
  const keyless = flags.provider === 'openai' && !findApiKey(process.env) ? 'no API key (LLMQ_API_KEY, OPENAI_API_KEY unset)' : '';
  const limits = [
    keyless,
    flags.rpm ? `${int(flags.rpm)} rpm` : '',
    flags.tpm ? `${int(flags.tpm)} tpm` : '',
    boards ? 'shared through Redis' : '',
  ]
    .filter(Boolean)
    .join(', ');
  const progress = attachProgress(null, {
    mode,
    stream: whileReaderPresent(mode === 'json' ? process.stdout : process.stderr),
    db: redactLocation(location),
    provider: limits ? `${provider.name}, ${limits}` : provider.name,
    prices,
    again: dbArgument(flags.db),
    // the endpoint that reached nothing, and a budget spent, are left for the user to give: the same again would not do
    runAgain: (r) =>
      (r.wrongEndpoint !== null ? elsewhereArguments(flags) : runArguments(flags)) +
      limitArguments(flags) +
      redisArguments(flags) +
      moneyArguments(budgetsToRaise(flags, r.budget?.scope ?? null, r.budget !== null && budgetTooSmallForRequests(r.budget))),
    offline: provider.name === 'mock',
  });
  listeners.push(progress.listener);
  const onAlert = alertTarget(flags, alertsOn(flags));
  const runHooks = flags.onDone || flags.onJob || onAlert ? await import('../../hooks/run-hooks.js') : null;
  const hooks =
    runHooks !== null
      ? runHooks.createRunHooks({
          onDone: flags.onDone,
          onJob: flags.onJob,
          itemsOfJob: flags.onJob ? runHooks.jobItemsFrom(store) : undefined,
          onAlert,
          secret: hookSecret(),
          // said once while the run goes on (above the progress), not only in the count at its end
          onTrouble: (hook, why) => {
            // a post is tried again (a server may be down a moment); a command is run once
            const again =
              (hook === '--on-job' ? flags.onJob : onAlert)?.kind === 'url' ? 'each post is tried again' : 'a command is not run again';
            emit('warning', {
              message: `${hook} hook failing: ${why}; ${again}, and what is not delivered is counted at the end${hook === '--on-job' ? ' (llmq export has every answer)' : ''}`,
            });
          },
        })
      : null;
  if (hooks) listeners.push(hooks.listener);
  const alerts = await watchAlerts(flags, store, hooks, emit);
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
          // what another run on the queue reads to know whether their paces are one (run.ts #tellUnsharedPace)
          sharedPace: boards !== undefined,
          // the endpoint as a proposed command shows it (runArgumentsOfRun): the provider's name drops its query, and
          // Azure's api-version with it
          ...endpointOption(flags),
          // the Redis its pace was shared through, password masked: the run status proposes shares it too
          ...(flags.redis ? { redis: redactUrl(flags.redis) } : {}),
          // what `llmq status` suggests after a mock run (runArgumentsOfRun) paces as this one
          ...(flags.provider === 'mock' ? { mockLatency: flags.mockLatency } : {}),
          ...pricesOfRun(flags),
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
  } catch (error) {
    await store.close();
    throw error;
  } finally {
    progress.stop();
    alerts?.stop();
    stopping.dispose();
    await provider.close?.();
  }
  // how the run ended, said before the hooks' wait of up to 20 s (and whatever a Ctrl-C does to it)
  if (summary.fatal) {
    whileReaderPresent(process.stderr).write(
      `error: ${summary.fatal.message}\n${fixFor(summary.fatal, againAfterFatal(flags, summary.wrongEndpoint !== null), summary.failed, summary.remaining, dbArgument(flags.db))}\n`,
    );
  }
  if (summary.budget)
    whileReaderPresent(process.stderr).write(budgetMessage(summary.budget, summary.remaining, summary.mayBeBilled) + '\n');
  // open until the hooks are done: a job hook's body reads its items as it goes out
  try {
    if (hooks) tellHookReport(await finishHooks(hooks, summary), flags.json === true);
  } finally {
    await store.close();
  }
  process.exitCode = exitCodeFor(summary);
}

/** LLMQ_HOOK_SECRET, which signs URL posts; unset or empty, they go unsigned. */
function hookSecret(): string | undefined {
  return process.env.LLMQ_HOOK_SECRET || undefined;
}

/** --on-done after a batch run: the summary the batch lane came to, as an online run's (a batch run has no job hooks yet). */
async function batchDoneHook(onDone: NonNullable<RunFlags['onDone']>, summary: RunSummary, json: boolean): Promise<void> {
  const { createRunHooks } = await import('../../hooks/run-hooks.js');
  const hooks = createRunHooks({ onDone, secret: hookSecret() });
  tellHookReport(await finishHooks(hooks, summary), json);
}

/** What the hooks delivered: a line on stderr, and under --json an event after run:end (it was only on stderr). */
function tellHookReport(report: HookReport, json: boolean): void {
  whileReaderPresent(process.stderr).write(hookReportLine(report));
  if (json) whileReaderPresent(process.stdout).write(`${JSON.stringify({ event: 'hooks', time: Date.now(), ...report })}\n`);
}

/**
 * Wait for the hooks (at most 5 + 15 s). A Ctrl-C meanwhile ends llmq and its hook commands with
 * it: they run in process groups of their own, which the terminal's signal does not reach.
 */
async function finishHooks(hooks: RunHooks, summary: RunSummary): Promise<HookReport> {
  const { killHookCommands } = await import('../../hooks/deliver.js');
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  const stderr = whileReaderPresent(process.stderr);
  // The run has ended: a Ctrl-C now cuts only the hooks' wait, and the exit code stays the run's (130
  // said "unfinished jobs went back to pending" of a drained run, and hid a budget's 3)
  const onSignal = (): void => {
    killHookCommands();
    stderr.write(`hooks: quit before they were all delivered${hooks.given.done ? ' (--on-done not sent, or cut short)' : ''}\n`);
    for (const s of signals) process.off(s, onSignal);
    process.exit(exitCodeFor(summary));
  };
  for (const s of signals) process.on(s, onSignal);
  // a wait of seconds after the summary, with nothing said, looks like a hang
  const queued = hooks.given.job ? (hooks.given.alert ? 'job hooks and alerts' : 'job hooks') : hooks.given.alert ? 'alerts' : null;
  const waits = [queued && `${queued} up to 5 s`, hooks.given.done && '--on-done up to 15 s'].filter(Boolean).join(', then ');
  const slow = setTimeout(() => stderr.write(`hooks: delivering what is queued (${waits}); Ctrl-C quits at once\n`), 1000);
  try {
    return await hooks.finish(summary, exitCodeFor(summary));
  } finally {
    clearTimeout(slow);
    for (const s of signals) process.off(s, onSignal);
  }
}

/** A key too short to tell apart from ordinary text cannot be redacted; say so once, before anything is sent. */
function warnIfKeyUnredactable(found: { key: string; name: string } | undefined): void {
  if (found && !isRedactableKey(found.key)) {
    warn(
      `${found.name} is shorter than ${MIN_REDACTED_RUN} characters; llmq cannot tell it apart from ordinary text and will not redact it.`,
    );
  }
}

/**
 * What `llmq run` needs to go on where this one stopped; after a run that showed its endpoint wrong
 * (`RunSummary.wrongEndpoint`) a placeholder for the endpoint: the one given is what was wrong.
 */
function againAfterFatal(flags: RunFlags, wrongEndpoint: boolean): string {
  const endpoint = wrongEndpoint ? elsewhereArguments(flags) : runArguments(flags);
  return endpoint + limitArguments(flags) + redisArguments(flags) + moneyArguments(flags) + dbArgument(flags.db);
}

/** `runArguments` with a place for the endpoint: the one given (by the flag or the environment) was wrong. */
function elsewhereArguments(flags: RunFlags): string {
  return `${runArguments({ provider: flags.provider })} --base-url URL`;
}

type Fatal = NonNullable<RunSummary['fatal']>;

/** The status of a run stopped by answers saying the endpoint is wrong (404, 405, 501: refusesEndpoint), else null. */
function wrongEndpointStatus(fatal: Fatal): number | null {
  return refusesEndpoint(fatal.status) ? fatal.status : null;
}

/** The enqueue flag that writes a request parameter, where one does. */
const ENQUEUE_FLAG_OF_PARAMETER: ReadonlyMap<string, string> = new Map([
  ['max_tokens', '--max-tokens'],
  ['max_completion_tokens', '--max-tokens'],
  ['temperature', '--temperature'],
  ['model', '--model'],
  ['response_format', '--schema'],
]);

/**
 * What to do after a model's shared request parameter was refused for its first requests (`decide`).
 * The request is part of each job (and of its key): no flag of run changes it, an enqueue does.
 */
function refusedParameterFix(refused: RefusedParameter, code: string | null, db: string, left: string, again: string): string {
  const { param, model } = refused;
  const flag = ENQUEUE_FLAG_OF_PARAMETER.get(param);
  const change =
    param === 'max_tokens' && code === 'unsupported_parameter'
      ? completionLimitField(model) === 'max_completion_tokens'
        ? // jobs enqueued before llmq knew the model's name for the limit
          `llmq now writes max_completion_tokens for ${model}: enqueue the same documents again (llmq enqueue SOURCE...${db})`
        : // a reasoning model under a name llmq does not know as one (an Azure deployment's)
          `${model} takes max_completion_tokens instead, which llmq writes for OpenAI's reasoning models by their names ` +
          '(o1, o3, o4-mini, gpt-5...): enqueue with one of those names, or as OpenAI Batch lines whose body sets max_completion_tokens'
      : flag
        ? `enqueue the same documents again with another ${flag}${param === 'temperature' || param === 'response_format' ? ' or none' : ''} (llmq enqueue SOURCE... ${flag} ...${db})`
        : `change ${param} in the input's request bodies and enqueue them again (llmq enqueue SOURCE...${db})`;
  return (
    `The provider refused the ${param} of ${model}'s jobs for their first requests, before answering any: they all have it. ` +
    `A job's request is set when it is enqueued: ${change}; the new jobs take the place of the unsent ones. ${left} Then run llmq run${again}.`
  );
}

/** OpenAI's 404 for a model the endpoint does not serve (or the key may not use): the endpoint itself is right. */
function isModelNotFound(fatal: Fatal): boolean {
  return fatal.code === 'model_not_found';
}

/**
 * What to do after a run-fatal error. It failed no job; jobs this run failed before it (a 403 after
 * the key had worked, refused twice, fails the job alone; any 400) are said.
 * `pending`: the jobs left (`RunSummary.remaining`); `db`: what `llmq enqueue` needs to reach the queue (`dbArgument`).
 */
function fixFor(fatal: Fatal, again: string, failedInRun: number, pending: number, db: string): string {
  const left =
    failedInRun === 0
      ? `No job failed: ${int(pending)} ${pending === 1 ? 'job is' : 'jobs are'} still pending.`
      : `${int(failedInRun)} ${failedInRun === 1 ? 'job' : 'jobs'} failed in this run before it (llmq status says why; llmq retry-failed puts them back); the others not answered are still pending.`;
  const after = `${left} Run llmq run${again} again once this is fixed.`;
  if (fatal.reason === 'auth')
    // a 403 read the key and refused what it asked (a model, a project, a country): its reason is above
    return `${fatal.status === 403 ? 'The provider refused the requests as forbidden (why is above).' : 'The provider refused the API key.'} ${after}`;
  if (fatal.reason === 'quota' && fatal.message.includes('The quota per day is 0'))
    return `The key's project has no quota for the model (above). ${after}`;
  if (fatal.reason === 'quota' && fatal.message.includes('The quota per day is spent'))
    return `The provider's quota per day for the model is spent (above): the jobs wait for it. ${after}`;
  if (fatal.reason === 'quota') return `The account is out of quota. Add credit or raise the limit with the provider. ${after}`;
  if (isModelNotFound(fatal)) {
    // The model is part of each job (and of its key): no flag of run changes it, an enqueue does.
    return (
      `The provider does not serve the jobs' model, or this key may not use it. A job's model is set when it is enqueued: ` +
      `enqueue the same documents again with the right one (llmq enqueue SOURCE... --model NAME${db}); ` +
      `it takes the place of their unsent jobs. ${left} Then run llmq run${again}.`
    );
  }
  if (fatal.refused) return refusedParameterFix(fatal.refused, fatal.code, db, left, again);
  const wrong = wrongEndpointStatus(fatal);
  if (wrong === 404) {
    return `The first answers were all 404: the endpoint or the model does not exist there. Check --base-url (it usually ends in /v1) and the model. ${after}`;
  }
  if (wrong !== null) {
    return `The first answers refused the endpoint (the last HTTP ${wrong}): the server at --base-url takes no chat completions there, as it says above. Check --base-url (it usually ends in /v1) and how the server is started. ${after}`;
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

/** "budget reached: $4.98 of $5.00; 1,204 jobs pending; run again to go on: --budget counts what one run spends, ..." */
export function budgetMessage(
  b: NonNullable<RunSummary['budget']>,
  pending: number,
  unanswered: RunSummary['mayBeBilled'] = { tries: 0, usd: 0 },
): string {
  const flag = b.scope === 'run' ? '--budget' : '--budget-total';
  // Much of the budget left (none spent yet, or the rest too small for one request): "budget reached"
  // alone does not explain it; what the next request may cost does.
  const left = b.limitUsd - b.committedUsd;
  const [next, rest] = usdApart(b.nextUsd, left);
  const tooSmall = budgetTooSmallForRequests(b)
    ? `; one request may cost up to ${next} (its prompt and all of max_tokens), more than the ${rest} left`
    : '';
  // --budget counts what one run spends: the same again lets the next spend as much again, which
  // "a larger --budget" would hide (--budget-total is the one that counts the whole queue)
  const goOn =
    b.scope === 'run' && !tooSmall
      ? 'run again to go on: --budget counts what one run spends, so the next may spend as much again (--budget-total caps the whole queue)'
      : `run again with a larger ${flag} to go on`;
  // Tries no answer came for count at their worst case: during an outage (timeouts, bodies cut short)
  // they can spend a budget with nothing done, which "raise the budget" alone would hide.
  const tries = unanswered.tries;
  const unansweredText =
    tries > 0 && unanswered.usd !== null && unanswered.usd > 0
      ? ` (${usd(unanswered.usd)} of it the worst case of ${int(tries)} ${tries === 1 ? 'try' : 'tries'} no answer came for: ` +
        'timed out or cut short, which the provider may bill)'
      : '';
  return (
    `budget reached: ${usd(b.committedUsd)} of ${usd(b.limitUsd)}${b.scope === 'total' ? ' for the whole queue' : ''}${unansweredText}${tooSmall}; ` +
    `${int(pending)} ${pending === 1 ? 'job' : 'jobs'} pending; ${goOn}`
  );
}

/**
 * 130 on a signal, 1 on a run-fatal error, 3 when the budget stopped it, 2 when jobs failed (in the
 * queue; with --limit, of the jobs this run took), else 0.
 */
export function exitCodeFor(summary: RunSummary): number {
  if (summary.reason === 'signal') return EXIT.SIGNAL;
  if (summary.reason === 'fatal') return EXIT.ERROR;
  if (summary.reason === 'budget') return EXIT.BUDGET;
  const failed = summary.reason === 'limit' ? summary.failed : summary.failedInStore;
  return failed > 0 ? EXIT.PARTIAL : EXIT.OK;
}

/** --on-alert without a threshold, or --alert-window without --alert-error-rate, would be silently ignored: say so instead. */
function refuseAlertFlagsWithoutThreshold(flags: RunFlags, cmd: Command): void {
  const given = (key: string) => cmd.getOptionValueSource(key) === 'cli';
  if (given('onAlert') && !alertsOn(flags)) {
    throw new UsageError(
      '--on-alert has nothing to send: no --alert-* threshold is set, so no alert would ever fire. ' +
        'Add --alert-failed N, --alert-oldest DURATION or --alert-error-rate SHARE, or leave --on-alert out.',
    );
  }
  if (given('alertWindow') && flags.alertErrorRate === undefined) {
    throw new UsageError(
      '--alert-window is the window --alert-error-rate looks at, and no --alert-error-rate is set. ' +
        'Add --alert-error-rate SHARE (5% or 0.05), or leave --alert-window out.',
    );
  }
}

/** A flag of the provider this run does not use would be silently ignored: say so instead. */
function refuseFlagsOfOtherProvider(flags: RunFlags, cmd: Command): void {
  const given = (key: string) => cmd.getOptionValueSource(key) === 'cli';
  if (flags.provider === 'mock' && given('baseUrl')) {
    throw new UsageError(
      `--base-url is where a real provider listens; --provider mock answers offline and sends nothing. Leave out --base-url, or leave out --provider mock to send to ${redactUrlQuery(flags.baseUrl!)}.`,
    );
  }
  refuseMockFlags(
    flags.provider,
    (
      [
        ['mockLatency', '--mock-latency'],
        ['mockFailureRate', '--mock-failure-rate'],
      ] as const
    )
      .filter(([key]) => given(key))
      .map(([, flag]) => flag),
    'this run sends to a real one',
  );
}

/** A flag of a lane this run does not take would be silently ignored: say so instead. */
function refuseFlagsOfOtherLanes(flags: RunFlags, cmd: Command): void {
  const given = (of: ReadonlyArray<readonly [key: string, flag: string]>) =>
    of.filter(([key]) => cmd.getOptionValueSource(key) === 'cli').map(([, flag]) => flag);
  const refuse = (flagsGiven: readonly string[], forWhat: string, instead: string) => {
    if (flagsGiven.length === 0) return;
    const one = flagsGiven.length === 1;
    throw new UsageError(
      `${flagsGiven.join(' and ')} ${one ? 'is' : 'are'} ${forWhat}; this run is --via ${flags.via}. ${instead}, or leave ${one ? 'it' : 'them'} out.`,
    );
  };
  if (flags.via === 'online') {
    refuse(
      given([
        ['poll', '--poll'],
        ['batchSize', '--batch-size'],
      ]),
      'for --via batch or --via auto',
      'Add --via batch',
    );
  }
  // with --via auto the run must stay, to cancel its batches at the deadline and finish online
  if (flags.via !== 'batch') refuse(given([['wait', '--no-wait']]), 'for --via batch', 'Add --via batch');
  if (flags.via !== 'auto')
    refuse(given([['deadline', '--deadline']]), 'for --via auto (batches, then online before it)', 'Add --via auto');
  // the batch lane reserves nothing: a budget would look kept and not be
  if (flags.via !== 'online' && (flags.budget !== undefined || flags.budgetTotal !== undefined)) {
    throw new UsageError(
      `--budget and --budget-total hold online requests only: --via ${flags.via} sends jobs in batches, whose cost llmq does not reserve yet. ` +
        'Run online (--via online) with a budget, or in batches without one (--dry-run first says what it would cost).',
    );
  }
  // the batch lane runs no job hooks and watches no alerts yet: with --via auto, the jobs its batches
  // answered would have had no --on-job, and --on-done would have told of the online part alone
  // (a run --via batch tells of its batches: batchDoneHook)
  if (flags.via === 'auto')
    refuse(
      given([['onDone', '--on-done']]),
      'not run by --via auto yet (it would tell of the online part alone)',
      'Run --via batch or --via online',
    );
  if (flags.via !== 'online') {
    const hooks = given([
      ['onJob', '--on-job'],
      ['onAlert', '--on-alert'],
      ['alertFailed', '--alert-failed'],
      ['alertOldest', '--alert-oldest'],
      ['alertErrorRate', '--alert-error-rate'],
      ['alertWindow', '--alert-window'],
    ]);
    refuse(hooks, 'not run by the batch lane yet', 'Run online (--via online)');
  }
}
