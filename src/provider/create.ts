import { LlmqError, UsageError } from '../errors.js';
import { hasUrlCredentials, redactUrlCredentials } from '../url-credentials.js';
import { MockProvider, type MockProviderOptions } from './mock.js';
import { normalizeBaseUrl, OpenAIProvider } from './openai.js';
import type { Provider } from './types.js';

export const PROVIDER_KINDS = Object.freeze(['openai', 'mock'] as const);
export type ProviderKind = (typeof PROVIDER_KINDS)[number];

export const DEFAULT_BASE_URL = 'https://api.openai.com/v1';

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

export type Env = Readonly<Record<string, string | undefined>>;

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

/** The base URL and where it came from (for messages): flag, then env, then the OpenAI API. */
export function resolveBaseUrl(flag: string | undefined, env: Env): { url: string; source: string } {
  const candidates: Array<[string | undefined, string]> = [
    [flag, '--base-url'],
    [env.LLMQ_BASE_URL, 'LLMQ_BASE_URL'],
    [env.OPENAI_BASE_URL, 'OPENAI_BASE_URL'],
  ];
  const found = candidates.find(([v]) => v !== undefined && v.trim() !== '');
  if (!found) return { url: DEFAULT_BASE_URL, source: 'default' };
  const [raw, source] = found as [string, string];
  const name = source === '--base-url' ? '--base-url' : `--base-url (from ${source})`;
  const url = normalizeBaseUrl(raw);
  const parsed = URL.canParse(url) ? new URL(url) : null;
  if (!parsed || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:')) {
    throw new UsageError(
      `Expected ${name} to be an http(s) URL like https://api.openai.com/v1 or http://127.0.0.1:11434/v1, got '${redactUrlCredentials(raw)}'.`,
    );
  }
  // fetch refuses such URLs on every request, which would look like an outage and be retried
  // forever; and the password would be in every error. The value is not echoed: it holds a secret.
  if (hasUrlCredentials(url)) {
    throw new UsageError(`${name} contains a user name or password; put the key in LLMQ_API_KEY instead.`);
  }
  return { url, source };
}

/** LLMQ_API_KEY, then OPENAI_API_KEY; undefined when neither is set. */
export function resolveApiKey(env: Env): string | undefined {
  return findApiKey(env)?.key;
}

/** The API key and the variable it came from (for messages), or undefined when neither is set. */
export function findApiKey(env: Env): { key: string; name: 'LLMQ_API_KEY' | 'OPENAI_API_KEY' } | undefined {
  for (const name of ['LLMQ_API_KEY', 'OPENAI_API_KEY'] as const) {
    const key = env[name]?.trim();
    if (!key) continue;
    // A key with spaces or control characters cannot go into a header; fetch would throw on every
    // request with the key in its message.
    if (!/^[\x21-\x7e]+$/.test(key)) {
      throw new LlmqError(`${name} contains spaces or non-ASCII characters; an API key is one printable token. Set it again.`);
    }
    return { key, name };
  }
  return undefined;
}
