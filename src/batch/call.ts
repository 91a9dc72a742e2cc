import { LlmqError } from '../errors.js';
import { ProviderError } from '../provider/types.js';
import { sleep } from '../scheduler/wait.js';
import type { BatchContext } from './context.js';

/**
 * Call the Batch API, retrying what is retryable (5xx, 429, network) with backoff doubling from 1 s
 * to 60 s, for at most `ctx.maxRetryMs`. Other errors, and the last retryable one, are thrown.
 * `before` runs before each retry: a create whose answer was lost may have happened anyway.
 */
export async function callWithRetry<T>(
  ctx: BatchContext,
  what: string,
  call: () => Promise<T>,
  before?: () => Promise<T | null>,
): Promise<T> {
  const started = ctx.now();
  for (let attempt = 0; ; attempt++) {
    try {
      if (attempt > 0 && before) {
        const found = await before();
        if (found !== null) return found;
      }
      return await call();
    } catch (error) {
      if (ctx.stopSignal.aborted) throw new LlmqError('run stopped');
      if (!(error instanceof ProviderError) || !error.retryable) throw error;
      const delay = error.retryAfterMs ?? Math.min(60_000, 1000 * 2 ** attempt);
      if (ctx.now() - started + delay > ctx.maxRetryMs) throw error;
      ctx.emit({ type: 'waiting', reason: 'error', untilMs: ctx.now() + delay, message: `${what}: ${error.message}` });
      await sleep(delay, ctx.stopSignal).catch(() => {});
    }
  }
}
