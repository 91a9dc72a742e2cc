import { int } from '../report/format.js';
import { STALE_RUN_MS } from '../report/status-cost.js';
import type { JobQueue } from '../store/types.js';
import { info } from './output.js';

/**
 * Before a run of a real provider: the jobs the offline mock answered (its stand-ins, from trying
 * llmq on this queue) go back to pending, so this run sends them; said in one line. A mock run
 * still heartbeating keeps its answers for now.
 */
export async function takeBackMockAnswers(store: JobQueue, provider: 'openai' | 'mock'): Promise<void> {
  if (provider === 'mock') return;
  const now = Date.now();
  const back = await store.takeBackMockAnswers(now, now - STALE_RUN_MS);
  if (back === 0) return;
  const one = back === 1;
  info(
    `${int(back)} ${one ? 'job' : 'jobs'} answered by the offline mock provider ${one ? 'goes' : 'go'} back to pending, to be sent for real like the others (the mock's answers were stand-ins)`,
  );
}
