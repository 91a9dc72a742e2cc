import type { PriceTable } from '../pricing/price-table.js';
import type { LaneLimitRow, LaneMemory, QueueReader } from '../store/types.js';
import { paceSeconds, type LaneLimits } from './estimate-time.js';
import { stillRemembered } from '../remembered-pace.js';
import { defaultMeasureThreads, measureHere, measureOnThreads, type Measurer } from './prompt-measure.js';

export interface EstimateOptions {
  readonly prices: PriceTable;
  readonly now: number;
  /** The endpoint a run would send to (lanes and learned limits are kept per endpoint and model). */
  readonly baseUrl: string;
  /** Take at most this many jobs, as `run --limit`. */
  readonly limit?: number;
  /** A run fails a job that has used this many attempts instead of sending it. @default 5 */
  readonly maxAttempts?: number;
  /** Caps as `run --rpm/--tpm` (the learned limit when lower). */
  readonly rpm?: number;
  readonly tpm?: number;
  /** @default 8 */
  readonly concurrency?: number;
  /**
   * Every answer's latency, ms, when it is known ahead: the offline mock's `--mock-latency`. In place
   * of the queue's answers' (the mock's stand-ins are left out of those).
   */
  readonly latencyMs?: number;
  /** A run of a real provider: it also sends the jobs it takes back from mock runs quiet since then. */
  readonly mockAnswersBefore?: number;
  /** Runs whose expired leases a run leaves them (stopped here with Ctrl-Z, `goneOwners`): their jobs are not to send. */
  readonly spared?: readonly string[];
  /** Runs here whose process is gone (`runsGoneHere`' dead and pidGone): a run takes their jobs back at once, and sends them. */
  readonly deadOwners?: readonly string[];
  /**
   * Told now and then how many jobs are looked at so far, of about how many (the queue's pending
   * and running jobs, up to `limit`): counting a million prompts takes a minute.
   */
  readonly onProgress?: (looked: number, of: number) => void;
  /**
   * Threads that count the prompts (0: this one). By default one per core, at most four, when
   * PARALLEL_FROM jobs or more are to be looked at: counting is most of an estimate's time.
   */
  readonly threads?: number;
}

/** Jobs from which the prompts are counted on worker threads: fewer take less than starting them (~0.4 s each, the tokenizer's load). */
const PARALLEL_FROM = 20_000;
/** Requests sent to a counting thread at a time. */
const MEASURE_BATCH = 256;

/**
 * USD: from the mean answer length (low) to the 90th percentile (high), and every answer max_tokens
 * long (worst). `worst` is null when a job sets no max_tokens: nothing bounds its cost, and a sum of
 * the others' worst cases read as the bound (`estimate --json` gave one).
 */
export interface CostRange {
  readonly low: number;
  readonly high: number;
  readonly worst: number | null;
}

export interface ModelEstimate {
  readonly model: string;
  readonly jobs: number;
  /** Tokens the model takes in one request (prompt and max_tokens together), as genai-prices knows it; null when unknown. */
  readonly contextWindow: number | null;
  /** Of `jobs`, those asking more than `contextWindow`: the provider refuses them unbilled, so the tokens and costs leave them out. */
  readonly tooLong: number;
  /** Of those, the ones whose prompt alone is more than `contextWindow` (a lower max_tokens does not help them). */
  readonly tooLongPrompts: number;
  /** Of them, jobs whose request sets no max_tokens: nothing bounds their cost (no worst case; --budget refuses them). */
  readonly uncapped: number;
  /** Counted with the tokenizer, plus what answered jobs showed the provider counts on top (`promptCorrection` per request). */
  readonly promptTokens: number;
  readonly promptCorrection: number;
  readonly completion: {
    /** `answers`: from this queue's answered jobs of the model; `max_tokens`: none yet, so only the ceiling is known. */
    readonly basis: 'answers' | 'max_tokens';
    readonly answered: number;
    readonly mean: number | null;
    readonly p90: number | null;
    /** Tokens in all: low (mean), high (p90, or max_tokens with no answers yet) and the ceiling (max_tokens). */
    readonly low: number;
    readonly high: number;
    readonly ceiling: number;
  };
  readonly price: { readonly input: number; readonly output: number; readonly source: string } | null;
  /** Online; null without a price. */
  readonly cost: CostRange | null;
  /** At the provider's batch price; null when unknown. */
  readonly batchCost: CostRange | null;
  readonly limits: LaneLimits;
  /** Mean latency of its answers so far, ms. */
  readonly latencyMs: number | null;
  /** Seconds its pace alone needs (null without a limit). */
  readonly paceSeconds: number | null;
}

export interface Estimate {
  /** Jobs a run would send. */
  readonly jobs: number;
  /** Jobs it would fail without sending: their attempts are used up (retry-failed does not apply; they are pending). */
  readonly exhausted: number;
  /** Of `jobs`, those the offline mock answered: done in `status`, sent again by a run of a real provider. */
  readonly mockAnswered: number;
  /**
   * Jobs running now whose lease holds (a live run's, or in a batch at the provider), or held by a
   * run stopped here (`spared`): a run leaves them be, so they are not in `jobs`. Counted when every job to run was looked at (0 with `limit` reached).
   */
  readonly held: number;
  /** Jobs whose request sets no max_tokens: the worst case leaves them out, and a run under --budget refuses them. */
  readonly uncapped: number;
  /** Failed jobs in the queue: a run does not send them (retry-failed puts them back), so they are in no figure here. */
  readonly failed: number;
  /** Jobs longer than their model's context window (`ModelEstimate.tooLong`, all models). */
  readonly tooLong: number;
  /**
   * The first few of them, by their first item's id (the job's key when no item points at it: what
   * `llmq show` takes), with the tokens each asks (its prompt as counted, and its max_tokens).
   */
  readonly tooLongItems: ReadonlyArray<{ readonly id: string; readonly tokens: number }>;
  /** Of `tooLong`, the jobs whose prompt alone is over their model's context window. */
  readonly tooLongPrompts: number;
  readonly models: readonly ModelEstimate[];
  /** All models together; null when one has no price. */
  readonly cost: CostRange | null;
  readonly batchCost: CostRange | null;
  readonly unpriced: readonly string[];
  /** Seconds to send them all at the known limits and latencies; null when neither is known for some model. */
  readonly seconds: number | null;
}

/** A budget a dry run checks the estimate against: `committed` is what is already spent or held against it. */
export interface Budget {
  readonly flag: '--budget' | '--budget-total';
  readonly usd: number;
  readonly committed: number;
}

/**
 * Whether a run under `budget` would get through the estimate: `covers` the worst case (every answer
 * max_tokens long, which is what a request reserves before it leaves), `may-stop` short of it but
 * above the expected cost, `within` the expected cost's range (it stops unless answers come short),
 * `stops` below it (it would end with exit 3 and the rest pending), `unknown` without a price, or
 * `uncapped` when some job sets no max_tokens (the run refuses it).
 */
export function budgetVerdict(
  e: Estimate,
  b: Budget,
): { flag: string; usd: number; left: number; verdict: 'covers' | 'may-stop' | 'within' | 'stops' | 'unknown' | 'uncapped' } {
  const left = Math.max(0, b.usd - b.committed);
  const c = e.cost;
  const verdict = (() => {
    if (e.uncapped > 0) return 'uncapped';
    if (c === null) return 'unknown';
    if (c.worst !== null && left >= Math.max(c.worst, c.high)) return 'covers';
    if (left >= c.high) return 'may-stop';
    return left >= c.low ? 'within' : 'stops';
  })();
  return { flag: b.flag, usd: b.usd, left, verdict };
}

/** Jobs longer than their model's context named by the estimate. */
const TOO_LONG_NAMED = 5;

/** Answers read per model for the 90th percentile and latency, and for the prompt correction. */
const SAMPLE = 1000;
const CALIBRATION = 100;

interface History {
  readonly answered: number;
  readonly mean: number | null;
  readonly p90: number | null;
  readonly correction: number;
  readonly latencyMs: number | null;
}

/**
 * What a run started now would send and what it would cost: the jobs it would take (in its order,
 * up to `limit`), their prompts counted with the tokenizer, their answers as long as this queue's
 * answers of the same model have been (else up to max_tokens), priced online and at the batch
 * price, and the time at the limits known. Streams the jobs: memory holds one page, the batches
 * being counted (up to two of 256 requests per thread, and one more) and a tally per model.
 */
export async function estimateRun(store: QueueReader & Pick<LaneMemory, 'laneLimits'>, o: EstimateOptions): Promise<Estimate> {
  const maxAttempts = o.maxAttempts ?? 5;
  const limit = o.limit ?? Infinity;
  const status = await store.status();
  const lanes = await store.laneLimits();
  const histories = new Map<string, Promise<History>>();
  const tallies = new Map<string, Tally>();
  let jobs = 0,
    exhausted = 0,
    mockAnswered = 0;
  const of = Math.min(limit, status.counts.pending + status.counts.running);
  const threads = o.threads ?? (of >= PARALLEL_FROM ? defaultMeasureThreads() : 0);
  const measurer = threads > 0 ? measureOnThreads(threads) : measureHere;
  // Batches out to be counted, oldest first: their figures are added in the order the jobs came,
  // so the sums (floating point) are those of one thread counting them one by one.
  const counting: Array<{ models: string[]; keys: string[]; figures: Promise<Float64Array> }> = [];
  let batch: { models: string[]; keys: string[]; requests: string[] } = { models: [], keys: [], requests: [] };
  const send = () => {
    const figures = measurer.measure(batch.requests);
    figures.catch(() => {}); // its failure is met where it is awaited, in order
    counting.push({ models: batch.models, keys: batch.keys, figures });
    batch = { models: [], keys: [], requests: [] };
  };
  const tooLongKeys: Array<{ key: string; tokens: number }> = [];
  const addOldest = async () => {
    const { models, keys, figures } = counting.shift()!;
    const f = await figures;
    for (let i = 0; i < models.length; i++) {
      const model = models[i]!;
      const over = tallies.get(model)!.add(f[2 * i]!, f[2 * i + 1]!, await histories.get(model)!);
      if (over !== null && tooLongKeys.length < TOO_LONG_NAMED) tooLongKeys.push({ key: keys[i]!, tokens: over });
    }
  };
  try {
    for await (const job of store.jobsToRun(o.now, {
      mockAnswersBefore: o.mockAnswersBefore,
      spared: o.spared,
      deadOwners: o.deadOwners,
    })) {
      if (jobs >= limit) break;
      if ((jobs + exhausted) % 256 === 0) o.onProgress?.(jobs + exhausted, of);
      if (job.attempts >= maxAttempts) {
        exhausted++;
        continue;
      }
      jobs++;
      if (job.mockAnswered) mockAnswered++;
      if (!histories.has(job.model)) {
        const history = historyOf(
          store,
          job.model,
          status.byModel.find((m) => m.model === job.model),
          measurer,
        );
        history.catch(() => {}); // met where it is awaited
        histories.set(job.model, history);
        tallies.set(job.model, new Tally(job.model, o.prices));
      }
      batch.models.push(job.model);
      batch.keys.push(job.key);
      batch.requests.push(job.request);
      if (batch.requests.length === MEASURE_BATCH) {
        send();
        if (counting.length > 2 * Math.max(1, threads)) await addOldest();
      }
    }
    if (batch.requests.length) send();
    while (counting.length) await addOldest();
  } finally {
    await measurer.close();
  }
  const models = await Promise.all(
    [...tallies.values()].map(async (t) => t.result(await histories.get(t.model)!, limitsFor(t.model, lanes, o), o.latencyMs)),
  );
  const unpriced = models.filter((m) => m.cost === null).map((m) => m.model);
  const sum = (pick: (m: ModelEstimate) => CostRange | null): CostRange | null =>
    models.some((m) => pick(m) === null)
      ? null
      : models.reduce<CostRange>(
          (a, m) => {
            const c = pick(m)!;
            return { low: a.low + c.low, high: a.high + c.high, worst: a.worst === null || c.worst === null ? null : a.worst + c.worst };
          },
          { low: 0, high: 0, worst: 0 as number | null },
        );
  return {
    jobs,
    exhausted,
    mockAnswered,
    // the queue's unfinished jobs that the walk above did not meet: those with a lease that holds
    held: jobs >= limit ? 0 : Math.max(0, status.counts.pending + status.counts.running - (jobs - mockAnswered + exhausted)),
    uncapped: models.reduce((n, m) => n + m.uncapped, 0),
    failed: status.counts.failed,
    tooLong: models.reduce((n, m) => n + m.tooLong, 0),
    tooLongPrompts: models.reduce((n, m) => n + m.tooLongPrompts, 0),
    tooLongItems: await Promise.all(
      tooLongKeys.map(async ({ key, tokens }) => ({ id: (await store.itemsByKeyPrefix(key, 1))[0]?.itemId ?? key, tokens })),
    ),
    models,
    cost: sum((m) => m.cost),
    batchCost: sum((m) => m.batchCost),
    unpriced,
    seconds: totalSeconds(models, o.concurrency ?? 8),
  };
}

async function historyOf(
  store: Pick<QueueReader, 'answered'>,
  model: string,
  tally: { done: number; completion: number } | undefined,
  measurer: Measurer,
): Promise<History> {
  const none: History = { answered: 0, mean: null, p90: null, correction: 0, latencyMs: null };
  if (!tally || tally.done === 0) return none;
  const sample = await store.answered(model, { limit: SAMPLE, withRequest: false });
  // The sample leaves out the offline mock's stand-in answers, the counts do not: with none but
  // those, nothing is known of real answers, and the mean is the sample's (the latest real answers),
  // never the counts', which would mix them in. How many were answered is the counts' figure only
  // when the sample could hold them all and did.
  if (sample.length === 0) return none;
  const calibration = await store.answered(model, { limit: CALIBRATION, withRequest: true });
  const sorted = sample.map((a) => a.completionTokens).sort((a, b) => a - b);
  const latencies = sample.map((a) => a.latencyMs).filter((x): x is number => x !== null);
  // The provider counts a few tokens per message more than the text (roles, separators): learn how many.
  // counted where the prompts are (this thread then need not load the tokenizer's tables)
  const counted = calibration.length ? await measurer.measure(calibration.map((c) => c.request!)) : null;
  const correction = counted ? calibration.reduce((a, c, i) => a + c.promptTokens - counted[2 * i]!, 0) / calibration.length : 0;
  return {
    answered: sample.length === SAMPLE ? tally.done : sample.length,
    mean: sorted.reduce((a, b) => a + b, 0) / sorted.length,
    p90: sorted[Math.ceil(0.9 * sorted.length) - 1]!,
    correction,
    latencyMs: latencies.length ? latencies.reduce((a, b) => a + b, 0) / latencies.length : null,
  };
}

/** One model's jobs, added up as they stream past. */
class Tally {
  jobs = 0;
  prompt = 0;
  /** prompt + max_tokens: what a run's tokens-per-minute pacing counts. */
  weight = 0;
  low = 0;
  high = 0;
  ceiling = 0;
  uncapped = 0;
  tooLong = 0;
  tooLongPrompts = 0;
  readonly cost: { low: number; high: number; worst: number } | null;
  readonly batch: { low: number; high: number; worst: number } | null;
  readonly #pricing;
  readonly #contextWindow: number | null;

  constructor(
    readonly model: string,
    prices: PriceTable,
  ) {
    this.#pricing = prices.lookup(model);
    this.#contextWindow = prices.contextWindow(model);
    this.cost = this.#pricing ? { low: 0, high: 0, worst: 0 } : null;
    this.batch =
      this.#pricing && this.#pricing.batchCost({ promptTokens: 0, completionTokens: 0 }) !== null ? { low: 0, high: 0, worst: 0 } : null;
  }

  /**
   * A job whose prompt counts `counted` tokens and that asks up to `max` (0: no max_tokens)
   * (`measureRequests`). When it asks more than the model's context window, the tokens it asks (null
   * when it fits): the provider refuses such a request unbilled, and its tokens (a whole book's, at
   * times) would swamp the figures.
   */
  add(counted: number, max: number, h: History): number | null {
    const prompt = Math.max(0, Math.round(counted + h.correction));
    const low = h.mean === null ? 0 : Math.min(h.mean, max || h.mean);
    const high = h.p90 === null ? max : Math.min(h.p90, max || h.p90);
    this.jobs++;
    if (this.#contextWindow !== null && prompt + max > this.#contextWindow) {
      this.tooLong++;
      if (prompt > this.#contextWindow) this.tooLongPrompts++;
      return prompt + max;
    }
    if (max === 0) this.uncapped++;
    this.prompt += prompt;
    this.weight += prompt + max;
    this.low += low;
    this.high += high;
    this.ceiling += max;
    const p = this.#pricing;
    if (!p) return null;
    const usage = (completionTokens: number) => ({ promptTokens: prompt, completionTokens });
    this.cost!.low += p.cost(usage(low));
    this.cost!.high += p.cost(usage(high));
    this.cost!.worst += p.cost(usage(max));
    if (this.batch) {
      this.batch.low += p.batchCost(usage(low))!;
      this.batch.high += p.batchCost(usage(high))!;
      this.batch.worst += p.batchCost(usage(max))!;
    }
    return null;
  }

  /** A range as the estimate gives it: no worst case once a job sets no max_tokens. */
  #bounded(c: { low: number; high: number; worst: number } | null): CostRange | null {
    return c && this.uncapped > 0 ? { ...c, worst: null } : c;
  }

  result(h: History, limits: LaneLimits, latencyMs = h.latencyMs): ModelEstimate {
    const p = this.#pricing;
    return {
      model: this.model,
      jobs: this.jobs,
      contextWindow: this.#contextWindow,
      tooLong: this.tooLong,
      tooLongPrompts: this.tooLongPrompts,
      uncapped: this.uncapped,
      promptTokens: this.prompt,
      promptCorrection: h.correction,
      completion: {
        basis: h.mean === null ? 'max_tokens' : 'answers',
        answered: h.answered,
        mean: h.mean,
        p90: h.p90,
        low: Math.round(this.low),
        high: Math.round(this.high),
        ceiling: this.ceiling,
      },
      price: p ? { input: p.perMillion[0], output: p.perMillion[1], source: p.source } : null,
      cost: this.#bounded(this.cost),
      batchCost: this.#bounded(this.batch),
      limits,
      latencyMs,
      // the refused ones are answered at once, and their weight is left out with them
      paceSeconds: paceSeconds(this.jobs - this.tooLong, this.weight, limits),
    };
  }
}

/** The lower of the flag and what the provider said for this endpoint and model. */
function limitsFor(model: string, lanes: readonly LaneLimitRow[], o: EstimateOptions): LaneLimits {
  // as the run will: a pace only 429s taught, long ago, is not where it starts (stillRemembered)
  const row = lanes.find((l) => l.baseUrl === o.baseUrl && l.model === model);
  const learned = row && stillRemembered(row, o.now) ? row : null;
  const lower = (flag: number | undefined, seen: number | null | undefined) =>
    flag === undefined ? (seen ?? null) : seen === null || seen === undefined ? flag : Math.min(flag, seen);
  // the learned figure paces the run where it is below the flag (or there is none)
  const isLearned = (flag: number | undefined, seen: number | null | undefined) =>
    seen !== null && seen !== undefined && (flag === undefined || seen < flag);
  const learnedLimits = { rpm: isLearned(o.rpm, learned?.rpm), tpm: isLearned(o.tpm, learned?.tpm) };
  return {
    rpm: lower(o.rpm, learned?.rpm),
    tpm: lower(o.tpm, learned?.tpm),
    learned: learned && (learnedLimits.rpm || learnedLimits.tpm) ? { source: learned.source, at: learned.at } : null,
    learnedLimits,
    learnedElsewhere: lanes.filter((l) => l.model === model && l.baseUrl !== o.baseUrl).map((l) => l.baseUrl),
  };
}

/**
 * Lanes run side by side, each at its own pace; all of them share the concurrency slots. So the
 * run takes as long as its slowest lane, or as the work of all of them spread over the slots.
 */
function totalSeconds(models: readonly ModelEstimate[], concurrency: number): number | null {
  if (models.length === 0) return 0;
  let pace = 0,
    work = 0;
  for (const m of models) {
    if (m.paceSeconds === null && m.latencyMs === null) return null;
    pace = Math.max(pace, m.paceSeconds ?? 0);
    work += m.latencyMs === null ? 0 : (m.jobs * m.latencyMs) / 1000;
  }
  return Math.max(pace, work / concurrency);
}
