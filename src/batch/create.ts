import { createProvider, resolveApiKey, resolveBaseUrl, type Env } from '../provider/create.js';
import type { BatchApi } from './api.js';
import { HttpBatchApi } from './http-api.js';
import { MockBatchApi } from './mock-api.js';

/**
 * The Batch API a `--via batch` run uses, from the same flags and environment as an online run
 * (so the same checks apply: a key for api.openai.com, a valid --base-url).
 */
export function createBatchApi(
  options: { provider: 'openai' | 'mock'; baseUrl?: string; mockCompleteAfterMs?: number; mockFailureRate?: number },
  env: Env,
): BatchApi {
  if (options.provider === 'mock') {
    return new MockBatchApi({ completeAfterMs: options.mockCompleteAfterMs, failureRate: options.mockFailureRate });
  }
  createProvider({ provider: 'openai', baseUrl: options.baseUrl }, env);
  return new HttpBatchApi({ baseUrl: resolveBaseUrl(options.baseUrl, env).url, apiKey: resolveApiKey(env) });
}
