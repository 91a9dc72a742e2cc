import { InvalidArgumentError, type Command } from 'commander';
import { LlmqError } from '../../errors.js';
import { dbOption } from '../options.js';
import { int, oneLine, printable } from '../../report/format.js';
import { cutOffCount, refusedCount, roomierRetryCommand } from '../../report/refused.js';
import { CUT_OFF_TEXT } from '../../provider/finish.js';
import type { RunStats } from '../../store/types.js';
import { holdStopSignals } from '../held-stop.js';

interface RetryFailedFlags {
  db?: string;
  error?: string;
  maxTokens?: number;
  cutOff?: boolean;
  json?: boolean;
}

export function registerRetryFailed(program: Command): Command {
  return program
    .command('retry-failed')
    .description('Put failed jobs back to pending with fresh attempts, so the next llmq run tries them again.')
    .addOption(dbOption())
    .option('--error <text>', 'only failures whose error contains this text (case-insensitive)', (v: string) => {
      // "" is in every error: it would retry them all, which leaving --error out says plainly
      if (v.trim() === '')
        throw new InvalidArgumentError('Expected some text to look for in the errors; leave --error out to retry every failed job.');
      return v;
    })
    .option(
      '--max-tokens <n>',
      'send them again with this longest answer, in tokens (for answers cut off at max_tokens): only their documents move to the new request',
      (v: string) => {
        const n = Number(v);
        if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('Expected a whole number of tokens, 1 or more.');
        return n;
      },
    )
    .option(
      '--cut-off',
      'with --max-tokens: also the answers cut off at max_tokens that were kept as done (plain text cut short); their documents move to the new request, the cut-off answers stay kept',
    )
    .option('--json', 'print {"requeued": n} on stdout')
    .addHelpText(
      'after',
      `
Examples:
  $ llmq retry-failed && llmq run
  $ llmq retry-failed --error "HTTP 500"
  $ llmq retry-failed --error timeout --db big.db
  $ llmq retry-failed --error "cut off" --max-tokens 2000
  $ llmq retry-failed --cut-off --max-tokens 2000    # answers kept as done, cut short, too`,
    )
    .action(retryFailedCommand);
}

async function retryFailedCommand(flags: RetryFailedFlags): Promise<void> {
  const release = holdStopSignals('the failed jobs are put back and said');
  try {
    await retryAndSay(flags);
  } finally {
    release();
  }
}

async function retryAndSay(flags: RetryFailedFlags): Promise<void> {
  const { resolveDbLocation } = await import('../../store/open-store.js');
  const { dbArgument, runArgumentsOfRun } = await import('../again.js');
  const { openExistingStore } = await import('../../report/open-existing.js');
  const { workingRuns } = await import('../../report/status-cost.js');
  const store = await openExistingStore(resolveDbLocation(flags.db));
  try {
    const now = Date.now();
    // read once: what it says of the failures and the last run, a retry does not change
    let read: ReturnType<typeof store.status> | null = null;
    const snapshot = () => (read ??= store.status());
    if (flags.cutOff && flags.maxTokens === undefined)
      throw new LlmqError('--cut-off asks the answers cut off at max_tokens again with more room: give it --max-tokens N too.');
    const cut = flags.cutOff && flags.maxTokens !== undefined ? await resendCutOff(store, flags.maxTokens, now) : 0;
    const {
      n: failed,
      raised,
      left = 0,
    }: { n: number; raised: string; left?: number } = flags.maxTokens === undefined
      ? await retryAsTheyWere(store, snapshot, flags, dbArgument(flags.db), now)
      : await retryWithRoom(store, flags, flags.maxTokens, now, cut > 0);
    const n = failed + cut;
    if (flags.json) process.stdout.write(JSON.stringify({ requeued: n }) + '\n');
    const which = (flags.error ? ` whose error contains "${flags.error}"` : '') + raised;
    // the cut-off answers sent again are said above (resendCutOff): what follows is of the failed jobs, or theirs
    const put =
      failed > 0 ? `Put ${int(failed)} failed job${failed === 1 ? '' : 's'}${which} back to pending` : 'Their documents are pending';
    // a run working the queue claims pending jobs as it goes: it takes these too, no new run needed
    const working = n === 0 ? [] : workingRuns(await store.activeRuns(), now);
    if (working.length) {
      const who =
        working.length === 1
          ? `the run working on this queue (${working[0]!.host} pid ${working[0]!.pid})`
          : `the ${working.length} runs working on this queue`;
      const takes = working.length === 1 ? 'takes' : 'take';
      process.stderr.write(`${put}: ${who} ${takes} ${n === 1 ? 'it' : 'them'}.\n`);
      return;
    }
    if (n === 0 && flags.error) {
      // a filter that matched none of the failures there are may be mistyped: an error (exit 1, as
      // forget's), naming those errors, so that `retry-failed --error X && llmq run` stops there
      const failures = (await snapshot()).failures;
      if (failures.length) throw new LlmqError(`No failed jobs${which}. ${failedErrorsText(failures)}`);
      process.stderr.write(`No failed jobs${which}. No job has failed.\n`);
      return;
    }
    // every document joined a request answered (or failed) already: "to try them again" read as work left
    if (n > 0 && flags.maxTokens !== undefined && (await store.stateCounts()).pending === 0) {
      const whose = failed > 0 ? `The items of ${int(failed)} failed job${failed === 1 ? '' : 's'}${which}` : 'Their documents';
      process.stderr.write(`${whose} joined requests answered (or failed) already: nothing is pending.\n`);
      return;
    }
    // the run proposed goes where the last run went: after a mock run, not to OpenAI
    const lastRun = n === 0 ? null : (await snapshot()).lastRun;
    const again =
      runArgumentsOfRun(
        lastRun
          ? {
              ...lastRun.options,
              budgetReached: lastRun.stats?.budgetReached,
              budgetTooSmall: lastRun.stats?.budgetTooSmall,
              wrongEndpoint: lastRun.stats?.wrongEndpoint,
            }
          : null,
      ) + dbArgument(flags.db);
    // every failed job was cut off, and left: said above
    if (n === 0 && left > 0) return;
    process.stderr.write(
      n === 0
        ? `No failed jobs${which}${flags.cutOff ? ', and no answer cut off at max_tokens' : ''}.\n`
        : `${put}. Run llmq run${again} to try ${n === 1 ? 'it' : 'them'} again` + raiseBudgetText(lastRun?.stats ?? null),
    );
  } finally {
    await store.close();
  }
}

type OpenStore = Awaited<ReturnType<typeof import('../../report/open-existing.js').openExistingStore>>;

/**
 * The failed jobs back to pending as they are. Those cut off at max_tokens are left failed unless
 * `--error` names them: sent as they were, they are most likely cut off, and paid for, again, and
 * once pending, `--max-tokens` no longer reaches them (it takes failed jobs). Asked for by `--error`,
 * they go, said.
 */
async function retryAsTheyWere(
  store: OpenStore,
  snapshot: () => ReturnType<OpenStore['status']>,
  flags: RetryFailedFlags,
  /** the queue's `--db` as the commands proposed give it */
  dbArg: string,
  now: number,
): Promise<{ n: number; raised: string; left: number }> {
  const taken = (await snapshot()).failures.filter((f) => !flags.error || f.error.toLowerCase().includes(flags.error.toLowerCase()));
  const leave = flags.error === undefined;
  const n = await store.retryFailed({ errorContains: flags.error, ...(leave ? { errorLacks: CUT_OFF_TEXT } : {}) }, now);
  // what is left failed is the cut-off ones (status's groups are its top ten: they may not show them all)
  const cutOff = leave ? (await store.stateCounts()).failed : cutOffCount(taken);
  const them = cutOff === 1 ? 'it' : 'them';
  const roomier = `${roomierRetryCommand(taken) ?? 'llmq retry-failed --error "cut off" --max-tokens N'}${dbArg}`;
  if (leave && cutOff > 0)
    process.stderr.write(
      `Left ${int(cutOff)} failed ${cutOff === 1 ? 'job' : 'jobs'} cut off at max_tokens as ${cutOff === 1 ? 'it is' : 'they are'}: sent as ${cutOff === 1 ? 'it was' : 'they were'}, ` +
        `most likely cut off, and paid for, again. ${roomier} sends ${them} with more room ` +
        `(--error "cut off" alone, as ${cutOff === 1 ? 'it was' : 'they were'}).\n`,
    );
  else if (cutOff > 0)
    process.stderr.write(
      `${int(cutOff)} of them ${cutOff === 1 ? 'was' : 'were'} cut off at max_tokens: sent as ${cutOff === 1 ? 'it is' : 'they are'}, most likely cut off again. ` +
        `If they fail so again, ${roomier} sends them with more room.\n`,
    );
  // put back all the same, as asked (a provider's fault fixed since, a model enabled), but said, as
  // status and the dashboard's Retry say it
  const refused = refusedCount(taken);
  if (n > 0 && refused > 0)
    process.stderr.write(
      `${int(refused)} of them the provider refused as ${refused === 1 ? 'it was' : 'they were'} sent (HTTP 4xx): sent again unchanged, ` +
        `${refused === 1 ? 'it most likely fails' : 'they most likely fail'} the same way, and may be billed.\n`,
    );
  return { n, raised: '', left: leave ? cutOff : 0 };
}

/** The answers cut off at max_tokens and kept as done, their documents moved to requests asking for up to `maxTokens` (`resendCutOffAnswers`), said. */
async function resendCutOff(store: OpenStore, maxTokens: number, now: number): Promise<number> {
  const { resendCutOffAnswers } = await import('../../ingest/resend-failed.js');
  const resent = await resendCutOffAnswers(store, maxTokens, now);
  const m = resent.alreadyAt;
  if (m > 0)
    process.stderr.write(
      `Left ${int(m)} answer${m === 1 ? '' : 's'} cut off at max_tokens whose request asked for ${maxTokens} tokens or more already: give --max-tokens a higher number.\n`,
    );
  if (resent.jobs > 0) {
    const n = resent.jobs;
    process.stderr.write(
      `${int(n)} ${n === 1 ? 'answer' : 'answers'} cut off at max_tokens asked again for up to ${maxTokens} tokens (${int(resent.items)} ${resent.items === 1 ? 'item' : 'items'} moved); ` +
        `the cut-off ${n === 1 ? 'answer is' : 'answers are'} kept, no item needs ${n === 1 ? 'it' : 'them'} now.\n`,
    );
  }
  return resent.jobs;
}

/** The failed jobs' documents moved to requests asking for answers of up to `maxTokens` (`resendFailedWithMaxTokens`). */
async function retryWithRoom(
  store: OpenStore,
  flags: RetryFailedFlags,
  maxTokens: number,
  now: number,
  answersToo = false,
): Promise<{ n: number; raised: string }> {
  const { resendFailedWithMaxTokens } = await import('../../ingest/resend-failed.js');
  // --cut-off: the failed ones cut off too, not every failure (a 500 is not helped by room)
  const errorContains = flags.error ?? (flags.cutOff ? CUT_OFF_TEXT : undefined);
  const resent = await resendFailedWithMaxTokens(store, { errorContains }, maxTokens, now);
  const n = resent.jobs;
  const m = resent.alreadyAt;
  // sent again as they were, they would end the same way
  const already = `${int(m)} failed job${m === 1 ? '' : 's'} asked for answers of up to ${maxTokens} tokens or more already`;
  if (n === 0 && m > 0 && !answersToo) {
    if (flags.json) process.stdout.write(JSON.stringify({ requeued: 0 }) + '\n');
    throw new LlmqError(`${already}: give --max-tokens a higher number.`);
  }
  if (m > 0) process.stderr.write(`Left ${already}: give --max-tokens a higher number for ${m === 1 ? 'it' : 'them'}.\n`);
  if (n === 0) return { n, raised: '' };
  const joined = resent.joined > 0 ? `; ${resent.joined} of them joined a request of that limit queued already` : '';
  const items = `${resent.items} ${resent.items === 1 ? 'item' : 'items'} moved to ${n === 1 ? 'that request' : 'those requests'}${joined}`;
  return { n, raised: `, asking for answers of up to ${maxTokens} tokens (${items})` };
}

/** After a budget the same amount would hit again at once, which one to raise (the proposed run has `USD` in its place). */
function raiseBudgetText(stats: Pick<RunStats, 'budgetReached' | 'budgetTooSmall'> | null): string {
  if (stats?.budgetReached === 'total') return " (the last run stopped at the queue's --budget-total: raise it).\n";
  if (stats?.budgetReached === 'run' && stats.budgetTooSmall)
    return " (the last run's --budget is too small for its requests: raise it).\n";
  return '.\n';
}

/** The failures by error, most common first (the first five), as `--error` takes them. */
function failedErrorsText(failures: ReadonlyArray<{ error: string; count: number }>): string {
  const shown = failures.slice(0, 5).map((f) => `${f.count} "${printable(oneLine(f.error, 70))}"`);
  const more = failures.length > shown.length ? `, and ${failures.length - shown.length} other errors` : '';
  return `The failed jobs' errors: ${shown.join(', ')}${more}. Give --error a part of one of them.`;
}
