import { LlmqError } from '../errors.js';
import { int, usd as usdText } from '../report/format.js';
import { sleep } from './wait.js';
import { NO_MAX_TOKENS_FIX_FAILED, costOf, worstCaseUsage } from '../pricing/cost.js';
import type { PriceTable } from '../pricing/price-table.js';
import type { AttemptRecord, ClaimedJob, RunBudget, StatusSnapshot, Usage } from '../store/types.js';

/** --budget and --budget-total, USD; null for no limit. */
export interface Budget {
  readonly runUsd: number | null;
  readonly totalUsd: number | null;
}

/** Why a run stopped taking jobs: what was committed in the budget that the next request would have exceeded. */
export interface BudgetReached {
  readonly scope: 'run' | 'total';
  readonly limitUsd: number;
  readonly committedUsd: number;
  /** The worst case of the request that did not fit. */
  readonly nextUsd: number;
}

/**
 * The budget stopped the run with much of it left (none spent, or a tenth or more): one request's
 * worst case is more than what was left, so the same amount again stops the next run at once, or
 * after a request or two. The run says to raise it, and so do `status` and `retry-failed`.
 */
export function budgetTooSmallForRequests(b: Pick<BudgetReached, 'limitUsd' | 'committedUsd'>): boolean {
  return b.committedUsd === 0 || b.limitUsd - b.committedUsd >= b.limitUsd / 10;
}

/** A reservation held for one request while it is out: its worst case, USD (0 without a budget). */
export interface Hold {
  readonly usd: number;
}

const NO_HOLD: Hold = Object.freeze({ usd: 0 });

/** A request the budget cannot hold, and why, said to the user: its job fails unsent, and the run goes on with the others. */
export interface Unholdable {
  readonly refused: string;
}

/** How often a run with nothing out looks again while other runs' reservations block --budget-total. */
const OTHERS_SETTLE_POLL_MS = 250;

/** The money fields of an attempt row. */
export type AttemptMoney = Pick<AttemptRecord, 'costUsd' | 'mayBeBilled' | 'reservedUsd'>;

/**
 * One run's money: what each try cost at the price known now, and, under a budget, a reservation
 * of each request's worst case in the store before it leaves, settled by the attempt row that
 * records how it ended. The store is the shared place, so one budget holds across runs, machines
 * and a SIGKILL (see Store.reclaim).
 */
export class RunMoney {
  /** Set once the next request did not fit: the run stops taking jobs. */
  reached: BudgetReached | null = null;
  readonly #store: RunBudget;
  readonly #runId: string;
  readonly #prices: PriceTable;
  readonly #budget: Budget;
  readonly #now: () => number;
  /** Each job's worst case as llmq counts it (prompt, and max_tokens; null when none is set). */
  readonly #counted = new WeakMap<ClaimedJob, { promptTokens: number; completionTokens: number | null }>();
  /**
   * Per model, what this run's answers showed the provider bills for prompts beyond llmq's count.
   * Another tokenizer, or a proxy adding its own text, bills more than llmq counts: reserved at the
   * count alone, requests settled past the budget.
   */
  readonly #promptBilling = new Map<string, PromptBilling>();
  /** Tries of this run whose request left and no answer came, at their worst case (null: no price): what it may be billed. */
  readonly mayBeBilled = { tries: 0, usd: 0 as number | null };
  /** This run's reservations not settled yet, and who waits for one to settle. */
  #out = 0;
  #waiting: Array<() => void> = [];

  constructor(o: { store: RunBudget; runId: string; prices: PriceTable; budget?: Budget | null; now: () => number }) {
    this.#store = o.store;
    this.#runId = o.runId;
    this.#prices = o.prices;
    this.#budget = o.budget ?? { runUsd: null, totalUsd: null };
    this.#now = o.now;
  }

  get budgeted(): boolean {
    return this.#budget.runUsd !== null || this.#budget.totalUsd !== null;
  }

  #learnBilled(model: string, counted: number, billed: number): void {
    let billing = this.#promptBilling.get(model);
    if (!billing) {
      billing = new PromptBilling();
      this.#promptBilling.set(model, billing);
    }
    billing.learn(counted, billed);
  }

  /** Under a budget, refuse to start when a model with jobs to send has no price: its spending could not be held. */
  checkPriced(s: StatusSnapshot): void {
    if (!this.budgeted) return;
    const unpriced = s.byModel.filter((m) => m.pending > 0 && this.#prices.lookup(m.model) === null);
    if (unpriced.length === 0) return;
    throw budgetNeedsPrice(unpriced.map((m) => `${m.model} (${m.pending} jobs pending)`).join(', '));
  }

  /**
   * Reserve the request's worst case before it leaves. When it does not fit while this run has
   * requests out, wait for one of them to settle (usually for far less than its worst case) and try
   * again; when it does not fit with nothing out, the budget is reached: null. A request with no
   * worst case (no max_tokens), or one longer than its model takes that does not fit, is Unholdable:
   * stopping the run for it left the rest of the queue unsent, and the job's attempt used, every run.
   */
  async hold(job: ClaimedJob, signal: AbortSignal): Promise<Hold | Unholdable | null> {
    if (!this.budgeted) return NO_HOLD;
    if (this.reached) return null;
    const usd = this.worstUsd(job);
    if (usd === null)
      return this.unbounded(job) ?? { refused: `${job.model} has no price, so --budget cannot hold it. Give one with --price IN,OUT.` };
    for (;;) {
      const r = await this.#store.reserve({
        runId: this.#runId,
        usd,
        runBudget: this.#budget.runUsd,
        totalBudget: this.#budget.totalUsd,
        now: this.#now(),
      });
      if (r.ok) {
        // A stop while the reservation was being committed (the store may commit it a turn later,
        // with others): the request never leaves, so its reservation is given back rather than left
        // to count as a try that may be billed.
        if (signal.aborted) {
          await this.#store.unreserve(this.#runId, usd, this.#now());
          signal.throwIfAborted();
        }
        if (usd > 0) this.#out++;
        return { usd };
      }
      // Nothing of this run's out, but other runs hold --budget-total for requests of theirs that
      // are out: those settle, usually far below their worst case. Stopping now left the budget to
      // the run that happened to hold it, the others ending with it unspent.
      if (this.#out === 0 && !this.reached && r.scope === 'total' && r.othersOutUsd > 0) {
        await sleep(OTHERS_SETTLE_POLL_MS, signal);
        continue;
      }
      if (this.#out === 0 || this.reached) {
        // the provider refuses it unbilled: no reason to stop the run for its worst case
        const tooLong = this.#tooLong(job, usd, r.scope);
        if (tooLong !== null) return { refused: tooLong };
        this.reached ??= {
          scope: r.scope,
          committedUsd: r.committedUsd,
          limitUsd: (r.scope === 'run' ? this.#budget.runUsd : this.#budget.totalUsd)!,
          nextUsd: usd,
        };
        return null;
      }
      await new Promise<void>((resolve) => {
        // One listener per wait on the run's long-lived signal, removed when woken: a tight
        // budget waits often, and the listeners must not pile up.
        const wake = (): void => {
          signal.removeEventListener('abort', wake);
          resolve();
        };
        this.#waiting.push(wake);
        signal.addEventListener('abort', wake, { once: true });
      });
      signal.throwIfAborted();
    }
  }

  /**
   * A request under a budget that has no worst case (no max_tokens): known before it waits for its
   * place, which it would take from the pace of the requests that do go (null when it has one, or no budget).
   */
  unbounded(job: ClaimedJob): Unholdable | null {
    if (!this.budgeted || this.worstUsd(job) !== null || this.#prices.lookup(job.model) === null) return null;
    return {
      refused: `it sets no max_tokens, so nothing bounds what it may cost and --budget cannot hold it. ${NO_MAX_TOKENS_FIX_FAILED}`,
    };
  }

  /** Why a request the budget cannot hold is not sent: its model takes fewer tokens than it asks (null when it does not). */
  #tooLong(job: ClaimedJob, usd: number, scope: 'run' | 'total'): string | null {
    const window = this.#prices.contextWindow(job.model);
    const counted = this.#countedOf(job);
    const asked = counted.promptTokens + (counted.completionTokens ?? 0);
    if (window === null || asked <= window) return null;
    return (
      `${int(asked)} tokens counted (its prompt and max_tokens), more than ${job.model} takes in one request ` +
      `(${int(window)}): the provider would refuse it, unbilled, and its worst case (${usdText(usd)}) is more than ` +
      `${scope === 'run' ? '--budget' : '--budget-total'} has left. Split or shorten the document, or lower max_tokens.`
    );
  }

  /** A hold whose request will not leave after all (its lease lapsed): its reservation given back. */
  async giveBack(hold: Hold): Promise<void> {
    if (hold.usd > 0) await this.#store.unreserve(this.#runId, hold.usd, this.#now());
    this.settled(hold);
  }

  /** The try that held this has been written down (which settled it in the store). */
  settled(hold: Hold): void {
    if (hold.usd === 0) return;
    this.#out--;
    const waiting = this.#waiting;
    this.#waiting = [];
    for (const wake of waiting) wake();
  }

  /** An answer: its cost at the price known now (null without one). */
  answered(job: ClaimedJob, usage: Usage, hold: Hold): AttemptMoney {
    // learned under a budget only: counting a prompt is the tokenizer's work, too much for every answer
    if (this.budgeted) this.#learnBilled(job.model, this.#countedOf(job).promptTokens, usage.promptTokens);
    return { costUsd: costOf(job.model, usage, this.#prices), mayBeBilled: false, reservedUsd: hold.usd };
  }

  /** A try without an answer: free when the provider said no, its worst case when it may be billed. */
  unanswered(job: ClaimedJob, mayBeBilled: boolean, hold: Hold): AttemptMoney {
    const costUsd = mayBeBilled ? this.worstUsd(job) : 0;
    if (mayBeBilled) {
      this.mayBeBilled.tries++;
      this.mayBeBilled.usd = costUsd === null || this.mayBeBilled.usd === null ? null : this.mayBeBilled.usd + costUsd;
    }
    return { costUsd, mayBeBilled, reservedUsd: hold.usd };
  }

  /**
   * The most the job's request can cost (prompt + max_tokens), its prompt as llmq counts it raised
   * by what answers of its model showed the provider bills (`PromptBilling`); null without a price
   * or a max_tokens.
   */
  worstUsd(job: ClaimedJob): number | null {
    const pricing = this.#prices.lookup(job.model);
    if (!pricing) return null;
    const worst = this.#countedOf(job);
    if (worst.completionTokens === null) return null;
    const promptTokens = this.#promptBilling.get(job.model)?.worst(worst.promptTokens) ?? worst.promptTokens;
    return pricing.cost({ promptTokens, completionTokens: worst.completionTokens });
  }

  #countedOf(job: ClaimedJob): { promptTokens: number; completionTokens: number | null } {
    let counted = this.#counted.get(job);
    if (counted === undefined) {
      counted = worstCaseUsage(job.request);
      this.#counted.set(job, counted);
    }
    return counted;
  }

  /** What is committed in the budget that stopped the run, once its requests in flight have settled. */
  async committedIn(scope: 'run' | 'total'): Promise<number> {
    const c = await this.#store.committed(this.#runId);
    return scope === 'run' ? c.run : c.total;
  }
}

/**
 * What a provider bills for prompts beyond llmq's count, learned from answers, kept by the size of
 * the counted prompt (powers of two). A proxy's own text adds the same tokens to every prompt: the
 * most an answer of the same size or shorter added holds for a prompt, and for any longer one.
 * Another tokenizer adds a share of each: the largest ratio of answers of the same size or longer
 * (or of half the size) holds for it, and for any shorter one. A prompt is reserved at whichever is
 * more. Neither is carried the other way: "hi" billed with a proxy's 2,000 tokens is 78 times its
 * count, and would have made every prompt of 2,000 tokens look like 158,000; the 18,000 tokens a
 * 60,000-token prompt added at 1.3 times would have made a prompt of 200 look like 18,200. A prompt
 * more than twice as long as any answered yet is reserved at its count and the most added.
 */
export class PromptBilling {
  /** By bucket (log2 of the counted tokens): the most tokens billed beyond the count, and the largest billed/counted. */
  readonly #extra: number[] = [];
  readonly #ratio: number[] = [];

  learn(counted: number, billed: number): void {
    if (counted <= 0 || billed <= counted) return;
    const b = bucketOf(counted);
    this.#extra[b] = Math.max(this.#extra[b] ?? 0, billed - counted);
    this.#ratio[b] = Math.max(this.#ratio[b] ?? 1, billed / counted);
  }

  /** Prompt tokens to reserve for a prompt llmq counts at `counted`. */
  worst(counted: number): number {
    const at = bucketOf(counted);
    let extra = 0;
    for (let b = 0; b <= Math.min(at, this.#extra.length - 1); b++) extra = Math.max(extra, this.#extra[b] ?? 0);
    let ratio = 1;
    for (let b = Math.max(0, at - 1); b < this.#ratio.length; b++) ratio = Math.max(ratio, this.#ratio[b] ?? 1);
    return Math.ceil(Math.max(counted + extra, counted * ratio));
  }
}

function bucketOf(tokens: number): number {
  return Math.floor(Math.log2(Math.max(1, tokens)));
}

/** A run under a budget refused: `which` models (as the user should read them) have no price. */
export function budgetNeedsPrice(which: string): LlmqError {
  return new LlmqError(
    `--budget needs a price for every model it may send to, and none is known for ${which}. ` +
      'Give one with --price IN,OUT (USD per million input,output tokens) or --prices FILE.',
  );
}
