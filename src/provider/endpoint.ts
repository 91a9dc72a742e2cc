/**
 * Which endpoint and key a provider uses, apart from the provider: `estimate`, `serve` and the lanes
 * read them without loading the HTTP client (undici takes longer to load than `llmq status` to run).
 */
import { LlmqError, UsageError } from '../errors.js';
import { hasUrlCredentials, redactUrlCredentials } from '../url-credentials.js';

export const DEFAULT_BASE_URL = 'https://api.openai.com/v1';

export type Env = Readonly<Record<string, string | undefined>>;

/** Trailing slashes and a pasted `/chat/completions` removed: the base the endpoint path is added to. */
export function normalizeBaseUrl(baseUrl: string): string {
  return baseUrl
    .trim()
    .replace(/\/+$/, '')
    .replace(/\/chat\/completions$/, '');
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

/**
 * The name an OpenAI-compatible endpoint goes by in messages and in `runs.options`
 * (`openai-compatible (https://api.openai.com/v1)`), without credentials or query: a key passed as
 * ?api-key=... must not reach the queue or the screen. `runArgumentsOfRun` (src/cli/again.ts) reads it back.
 */
export function openAiProviderName(baseUrl: string): string {
  const shown = new URL(normalizeBaseUrl(baseUrl));
  shown.username = shown.password = '';
  shown.search = '';
  return `openai-compatible (${shown.href.replace(/\/$/, '')})`;
}
