import type { BilledAnswer, ProgressSnapshot, RunSummary, SchedulerEventMap, SchedulerEventName } from '../../scheduler/events.js';
import { costOf } from '../../pricing/cost.js';
import type { PriceTable } from '../../pricing/price-table.js';

/**
 * What every renderer needs to know, folded from the scheduler's events: the latest snapshot,
 * the cost so far (priced per model as answers arrive), the pause state, and the end summary.
 */
export class ProgressState {
  readonly #prices: PriceTable;
  /** Model of each job in flight: `job:done` carries usage but not the model. Entries leave on done/failed. */
  readonly #models = new Map<string, string>();
  #defaultModel: string | null = null;
  snapshot: ProgressSnapshot | null = null;
  total = 0;
  /** USD of this run's answers so far, counting only priced models. */
  knownCost = 0;
  /** Set when some answer came from a model without a price: the cost is then a lower bound. */
  /** Models answered without a known price, in the order first met. */
  readonly unpricedModels = new Set<string>();
  /** Answers that came and were not kept (not the JSON asked for, cut off, declined): billed, and in the cost. */
  billedNotKept = 0;
  /** Their USD, counting only priced models. */
  billedNotKeptUsd = 0;
  paused: SchedulerEventMap['paused'] | null = null;
  stopping: SchedulerEventMap['stopping'] | null = null;
  summary: RunSummary | null = null;
  startedAt: number | null = null;

  constructor(prices: PriceTable) {
    this.#prices = prices;
  }

  /** USD so far, or null when some of it is unknown. */
  get cost(): number | null {
    return this.unpricedModels.size > 0 ? null : this.knownCost;
  }

  #addCost(model: string, usd: number | null): void {
    if (usd === null) this.unpricedModels.add(model);
    else this.knownCost += usd;
  }

  #billed(key: string, billed: BilledAnswer): void {
    const model = this.#models.get(key) ?? this.#defaultModel ?? 'unknown';
    this.#addCost(model, billed.costUsd);
    this.billedNotKept++;
    this.billedNotKeptUsd += billed.costUsd ?? 0;
  }

  apply<E extends SchedulerEventName>(event: E, payload: SchedulerEventMap[E]): void {
    switch (event) {
      case 'run:start': {
        const p = payload as SchedulerEventMap['run:start'];
        this.total = p.total;
        const model = p.options.model;
        if (typeof model === 'string') this.#defaultModel = model;
        break;
      }
      case 'job:start': {
        const p = payload as SchedulerEventMap['job:start'];
        this.#models.set(p.key, p.model);
        break;
      }
      case 'job:done': {
        const p = payload as SchedulerEventMap['job:done'];
        const model = this.#models.get(p.key) ?? this.#defaultModel ?? 'unknown';
        this.#models.delete(p.key);
        this.#addCost(model, p.costUsd !== undefined ? p.costUsd : costOf(model, p.usage, this.#prices));
        break;
      }
      case 'job:retry': {
        const p = payload as SchedulerEventMap['job:retry'];
        if (p.billed) this.#billed(p.key, p.billed);
        break;
      }
      case 'job:failed': {
        const p = payload as SchedulerEventMap['job:failed'];
        if (p.billed) this.#billed(p.key, p.billed);
        this.#models.delete(p.key);
        break;
      }
      case 'paused':
        this.paused = payload as SchedulerEventMap['paused'];
        break;
      case 'resumed':
        this.paused = null;
        break;
      case 'stopping':
        this.stopping = payload as SchedulerEventMap['stopping'];
        break;
      case 'progress': {
        const p = payload as ProgressSnapshot;
        this.snapshot = p;
        this.total = p.total;
        this.startedAt ??= p.startedAt;
        // The snapshot is the source of truth for pauses too, in case an event was missed.
        if (!p.paused) this.paused = null;
        break;
      }
      case 'run:end':
        this.summary = payload as RunSummary;
        this.paused = null;
        break;
    }
  }
}
