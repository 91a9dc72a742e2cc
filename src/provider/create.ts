import { LlmqError, UsageError } from '../errors.js';
import { resolveApiKey, resolveBaseUrl, type Env } from './endpoint.js';
import { MockProvider, type MockProviderOptions } from './mock.js';
import { OpenAIProvider } from './openai.js';
import type { Provider } from './types.js';

export { DEFAULT_BASE_URL, findApiKey, resolveApiKey, resolveBaseUrl, type Env } from './endpoint.js';

export const PROVIDER_KINDS = Object.freeze(['openai', 'mock'] as const);
export type ProviderKind = (typeof PROVIDER_KINDS)[number];

export interface CreateProviderOptions {
  /** `openai` for any OpenAI-compatible endpoint, `mock` for the offline provider. @default 'openai' */
  readonly provider?: ProviderKind;
  /** `--base-url`; falls back to env LLMQ_BASE_URL, then OPENAI_BASE_URL, then the OpenAI API. */
  readonly baseUrl?: string;
  /** Per-request timeout in ms. @default 120000 */
  readonly timeoutMs?: number;
  /** Extra headers on every request. */
  readonly headers?: Readonly<Record<string, string>>;
  /** Keep-alive connections at most (the run's concurrency). @default 64 */
  readonly connections?: number;
  /** Options of the mock provider. */
  readonly mock?: MockProviderOptions;
}

/**
 * The provider a run uses, from flags and environment. The key comes only from the environment
 * (LLMQ_API_KEY, then OPENAI_API_KEY): a flag would leave it in shell history and `ps`.
 */
export function createProvider(options: CreateProviderOptions, env: Env): Provider {
  const kind = options.provider ?? 'openai';
  if (kind === 'mock') return new MockProvider(options.mock);
  if (kind !== 'openai') {
    throw new UsageError(`Expected --provider to be one of: ${PROVIDER_KINDS.join(', ')}, got '${String(kind)}'.`);
  }
  const { url } = resolveBaseUrl(options.baseUrl, env);
  const apiKey = resolveApiKey(env);
  if (!apiKey && new URL(url).hostname === 'api.openai.com') {
    throw new LlmqError(
      'No API key for the OpenAI API. Set LLMQ_API_KEY (or OPENAI_API_KEY) in the environment, point --base-url at ' +
        'another OpenAI-compatible server, or try llmq offline with --provider mock.',
    );
  }
  return new OpenAIProvider({
    baseUrl: url,
    apiKey,
    timeoutMs: options.timeoutMs,
    headers: options.headers,
    connections: options.connections,
  });
}
