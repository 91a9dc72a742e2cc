import { int } from '../report/format.js';
import { STALE_RUN_MS } from '../report/status-cost.js';
import type { JobQueue, QueueReader } from '../store/types.js';
import type { PriceTable } from '../pricing/price-table.js';
import { mockRunToTakeBack } from '../store/mock-answers.js';
import { budgetNeedsPrice } from '../scheduler/run-money.js';
import { info } from './output.js';

/**
 * Before a run of a real provider: the jobs the offline mock answered (its stand-ins, from trying
 * llmq on this queue) go back to pending, so this run sends them; said in one line. A mock run
 * still heartbeating keeps its answers for now.
 */
export async function takeBackMockAnswers(
  store: JobQueue & Pick<QueueReader, 'status'>,
  provider: 'openai' | 'mock',
  budget?: { readonly prices: PriceTable },
): Promise<void> {
  if (provider === 'mock') return;
  const now = Date.now();
  if (budget) await refuseUnpriced(store, budget.prices, now - STALE_RUN_MS);
  const back = await store.takeBackMockAnswers(now, now - STALE_RUN_MS);
  if (back === 0) return;
  const one = back === 1;
  info(
    `${int(back)} ${one ? 'job' : 'jobs'} answered by the offline mock provider ${one ? 'goes' : 'go'} back to pending, to be sent for real like the others (the mock's answers were stand-ins)`,
  );
}

/**
 * Under a budget the run refuses a model without a price (RunMoney.checkPriced), after the
 * take-back: a refused run had already put the mock's answers back to pending. So, when there are
 * mock answers to take back, every model with jobs done or pending must have a price first (the
 * mock's answers are among the done ones).
 */
async function refuseUnpriced(store: Pick<QueueReader, 'status'>, prices: PriceTable, quietSince: number): Promise<void> {
  const s = await store.status();
  if (!s.spend.some((r) => mockRunToTakeBack(r, quietSince))) return;
  const unpriced = s.byModel.filter((m) => m.pending + m.done > 0 && prices.lookup(m.model) === null);
  if (unpriced.length) throw budgetNeedsPrice(`${unpriced.map((m) => m.model).join(', ')} (jobs the offline mock answered among them)`);
}
