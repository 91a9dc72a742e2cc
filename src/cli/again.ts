import { DEFAULT_BASE_URL, resolveBaseUrl, type Env } from '../provider/endpoint.js';
import { redactUrl, redactUrlQuery } from '../url-credentials.js';
import { shellWord } from '../shell-word.js';
import { limitFlagsOf, spendFlagsOf } from '../report/status.js';
import { DEFAULT_CONCURRENCY, DEFAULT_MAX_ATTEMPTS, DEFAULT_MOCK_LATENCY_MS } from './options.js';

/**
 * What a follow-up command printed as a hint ("llmq retry-failed && llmq run") needs to reach the
 * same queue: ` --db PATH` when the queue was named with --db, nothing when it came from LLMQ_DB
 * (still set in the user's shell) or is the default.
 */
export function dbArgument(dbFlag: string | undefined): string {
  return dbFlag === undefined ? '' : ` --db ${shellWord(dbFlag)}`;
}

/**
 * `llmq forget` of the items `ids` (printable already), with `db` (`dbArgument`): after `--` when
 * one of them would read as an option (stdin's line ids, `-:2`, or a numeric id `-5`).
 */
export function forgetCommand(ids: readonly string[], db: string): string {
  return `llmq forget${db}${ids.some((id) => id.startsWith('-')) ? ' --' : ''} ${ids.map(shellWord).join(' ')}`;
}

/**
 * What `llmq run` suggested after a run needs to send where that run sent: ` --provider mock` (with
 * its `--mock-latency` when not the default: the pace the user chose to watch; not its
 * `--mock-failure-rate`, a trouble to try once, which would fail the retries it proposes again), or
 * ` --base-url URL` when the endpoint was named with the flag (from LLMQ_BASE_URL or OPENAI_BASE_URL
 * it is still set in the user's shell). Without them the suggestion pasted after an offline run
 * would send to OpenAI, and be billed.
 */
export function runArguments(flags: { readonly provider?: string; readonly baseUrl?: string; readonly mockLatency?: unknown }): string {
  if (flags.provider === 'mock') {
    const latency = typeof flags.mockLatency === 'number' && flags.mockLatency !== DEFAULT_MOCK_LATENCY_MS ? flags.mockLatency : null;
    return ` --provider mock${latency === null ? '' : ` --mock-latency ${latency}`}`;
  }
  const provider = flags.provider && flags.provider !== 'openai' ? ` --provider ${flags.provider}` : '';
  return provider + (flags.baseUrl === undefined ? '' : ` --base-url ${shellWord(redactUrlQuery(flags.baseUrl))}`);
}

/**
 * ` --redis URL` when the run was given one by the flag (its password masked: the pasted command
 * says where, the password is the user's to put back): without it a run proposed after one that
 * shared its pace would pace alone, each of several machines at the whole --rpm. Nothing when it came
 * from LLMQ_REDIS_URL, which the pasted command reads too.
 */
export function redisArguments(flags: { readonly redis?: unknown }): string {
  return typeof flags.redis === 'string' && flags.redis !== '' ? ` --redis ${shellWord(redactUrl(flags.redis))}` : '';
}

/** The command that collects batches sent to `baseUrl` (as batches record it), without the queue's --db. */
export function collectCommand(baseUrl: string): string {
  return `llmq run --via batch${runArgumentsOfEndpoint(baseUrl)}`;
}

/**
 * What a suggested `llmq run` needs to spend as the run that printed it: its `--budget`,
 * `--budget-total` and `--price`/`--prices`. Without them the pasted command would run with no cap,
 * or check its budget at other prices.
 */
export function moneyArguments(flags: {
  readonly budget?: number | typeof BUDGET_TO_RAISE;
  readonly budgetTotal?: number | typeof BUDGET_TO_RAISE;
  readonly price?: readonly [number, number];
  readonly prices?: string;
}): string {
  return (
    (flags.budget === undefined ? '' : ` --budget ${flags.budget}`) +
    (flags.budgetTotal === undefined ? '' : ` --budget-total ${flags.budgetTotal}`) +
    (flags.price === undefined ? '' : ` --price ${flags.price[0]},${flags.price[1]}`) +
    (flags.prices === undefined ? '' : ` --prices ${shellWord(flags.prices)}`)
  );
}

/**
 * What a suggested `llmq run` needs to go at the pace the run that printed it went: its
 * `--concurrency`, `--rpm`, `--tpm` and `--max-attempts` when not the defaults. Without them a
 * pasted command would run at another concurrency, over a cap the user set for a key others share,
 * or fail jobs sooner.
 */
export function limitArguments(flags: {
  readonly concurrency?: number | null;
  readonly rpm?: number | null;
  readonly tpm?: number | null;
  readonly maxAttempts?: number | null;
}): string {
  const given = (flag: string, value: number | null | undefined, byDefault?: number) =>
    value === undefined || value === null || value === byDefault ? '' : ` ${flag} ${value}`;
  return (
    given('--concurrency', flags.concurrency, DEFAULT_CONCURRENCY) +
    given('--rpm', flags.rpm) +
    given('--tpm', flags.tpm) +
    given('--max-attempts', flags.maxAttempts, DEFAULT_MAX_ATTEMPTS)
  );
}

/**
 * In place of a spent `--budget-total`, or of a `--budget` that stopped its run with much of it left
 * (`budgetTooSmallForRequests`): the same amount again would stop the proposed run at once, or after
 * a request or two, and the new amount is the user's to choose (pasted as is, the flag's check names
 * what it wants).
 */
export const BUDGET_TO_RAISE = 'USD' as const;

/** A run as its stored options say it (`llmq status` after it ended): what the commands proposed after it carry. */
export type StoredRunOptions = {
  readonly provider?: unknown;
  readonly via?: unknown;
  readonly budget?: unknown;
  readonly budgetTotal?: unknown;
  readonly price?: unknown;
  readonly prices?: unknown;
  readonly concurrency?: unknown;
  readonly rpm?: unknown;
  readonly tpm?: unknown;
  readonly maxAttempts?: unknown;
  readonly mockLatency?: unknown;
  /** The --redis it was given, its password masked (`redisArguments`). */
  readonly redis?: unknown;
  /** The --base-url it was given, as a command shows it (`redactUrlQuery`: api-version kept), in place of the one its provider's name gives. */
  readonly endpoint?: unknown;
  /** Which budget ended it (`RunStats.budgetReached`): after the queue's, its amount is to raise, not repeat. */
  readonly budgetReached?: unknown;
  /** That budget stopped it with much of it left (`RunStats.budgetTooSmall`): the run's own is to raise too. */
  readonly budgetTooSmall?: unknown;
  /** It showed its endpoint wrong (`RunStats.wrongEndpoint`): the run proposed after it leaves a place for another, ` --base-url URL`. */
  readonly wrongEndpoint?: unknown;
} | null;

/**
 * `runArguments` for a run known only by its stored options (`llmq status` after it ended): its
 * lane when not online (after a batch run, the next goes through the Batch API again, at its price),
 * and `mock`, or an endpoint other than OpenAI's from "openai-compatible (URL)", the name the
 * provider gives itself (credentials and query already left out).
 */
export function runArgumentsOfRun(options: StoredRunOptions): string {
  const via = options?.via === 'batch' || options?.via === 'auto' ? ` --via ${options.via}` : '';
  // its budget and prices too: pasted without them, the run would spend with no cap, or at other prices
  const money = options ? moneyArguments(spendFlags(options)) : '';
  // a batch run's lane paces nothing through Redis
  const redis = options?.via === 'batch' ? '' : redisArguments(options ?? {});
  return via + endpointOfRun(options) + limitsOfRun(options) + redis + money;
}

/**
 * What `llmq estimate` proposed after a run needs to estimate the run proposed beside it: the same
 * endpoint (its learned limits are kept per endpoint: elsewhere the time is "no limit known"), pace
 * and prices. Not the lane or budgets, which estimate does not take (it prices both lanes).
 */
export function estimateArgumentsOfRun(options: StoredRunOptions): string {
  const prices = options ? spendFlagsOf(options) : null;
  return (
    endpointOfRun(options) +
    limitsOfRun(options) +
    moneyArguments({ price: prices?.price ?? undefined, prices: prices?.prices ?? undefined })
  );
}

/**
 * What a run stores of its --base-url for the commands proposed after it (`StoredRunOptions.endpoint`):
 * the URL as a command shows it, api-version kept. Nothing for the mock, or when no flag named it.
 */
export function endpointOption(flags: { readonly provider?: string; readonly baseUrl?: string }): { endpoint?: string } {
  return flags.baseUrl !== undefined && flags.provider !== 'mock' ? { endpoint: redactUrlQuery(flags.baseUrl) } : {};
}

/** ` --provider mock` (with its latency), or the endpoint a run sent to when not OpenAI's; a place for another after one shown wrong. */
function endpointOfRun(options: StoredRunOptions): string {
  if (options?.provider === 'mock') return runArguments({ ...options, provider: 'mock' });
  if (typeof options?.wrongEndpoint === 'string') return ' --base-url URL';
  const url = typeof options?.provider === 'string' ? /^openai-compatible \((.+)\)$/.exec(options.provider)?.[1] : undefined;
  if (!url || url === DEFAULT_BASE_URL) return '';
  // the name leaves out the query: Azure's api-version, without which the endpoint answers 404
  return runArguments({ baseUrl: typeof options?.endpoint === 'string' ? options.endpoint : url });
}

/** The online lane's pace of a stored run; a batch run's requests are paced by the Batch API, its --max-attempts still counts. */
function limitsOfRun(options: StoredRunOptions): string {
  if (!options) return '';
  const limits = limitFlagsOf(options);
  return limitArguments(options.via === 'batch' ? { maxAttempts: limits.maxAttempts } : limits);
}

/** The money flags of stored run options (`spendFlagsOf`), as `moneyArguments` takes them. */
function spendFlags(options: Record<string, unknown>) {
  const f = spendFlagsOf(options);
  const reached = options.budgetReached === 'run' || options.budgetReached === 'total' ? options.budgetReached : null;
  return {
    ...budgetsToRaise({ budget: f.budget ?? undefined, budgetTotal: f.budgetTotal ?? undefined }, reached, options.budgetTooSmall === true),
    price: f.price ?? undefined,
    prices: f.prices ?? undefined,
  };
}

/**
 * A run's budgets as the run proposed after it carries them: the one it reached in `USD`'s place
 * (the amount to raise: the same again would stop at once), the queue's `--budget-total` always, its
 * own `--budget` when too small for one request (`budgetTooSmallForRequests`). One rule for the
 * run's own end and for `status` after it.
 */
export function budgetsToRaise<F extends { readonly budget?: number; readonly budgetTotal?: number }>(
  flags: F,
  reached: 'run' | 'total' | null,
  tooSmall: boolean,
): Omit<F, 'budget' | 'budgetTotal'> & { budget?: number | typeof BUDGET_TO_RAISE; budgetTotal?: number | typeof BUDGET_TO_RAISE } {
  if (reached === 'total' && flags.budgetTotal !== undefined) return { ...flags, budgetTotal: BUDGET_TO_RAISE };
  if (reached === 'run' && tooSmall && flags.budget !== undefined) return { ...flags, budget: BUDGET_TO_RAISE };
  return flags;
}

/**
 * `runArguments` for an endpoint as the queue records it (`laneBaseUrl`: `mock`, or a URL without
 * credentials): what reaches it again. Nothing for OpenAI's own, unless LLMQ_BASE_URL or
 * OPENAI_BASE_URL would send a bare command elsewhere.
 */
export function runArgumentsOfEndpoint(baseUrl: string, env: Env = process.env): string {
  if (baseUrl === 'mock') return runArguments({ provider: 'mock' });
  return baseUrl === bareRunEndpoint(env) ? '' : runArguments({ baseUrl });
}

/** Where a run given no --base-url sends here; null when the environment's is not a valid URL. */
function bareRunEndpoint(env: Env): string | null {
  try {
    return resolveBaseUrl(undefined, env).url;
  } catch {
    return null;
  }
}
