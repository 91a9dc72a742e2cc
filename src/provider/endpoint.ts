/**
 * Which endpoint and key a provider uses, apart from the provider: `estimate`, `serve` and the lanes
 * read them without loading the HTTP client (undici takes longer to load than `llmq status` to run).
 */
import { LlmqError, UsageError } from '../errors.js';
import { hasUrlCredentials, redactUrlCredentials } from '../url-credentials.js';

export const DEFAULT_BASE_URL = 'https://api.openai.com/v1';

export type Env = Readonly<Record<string, string | undefined>>;

/**
 * Trailing slashes and a pasted `/chat/completions` removed from the path: the base the endpoint
 * path is added to. A query (Azure's `?api-version=...`) is kept as it is.
 */
export function normalizeBaseUrl(baseUrl: string): string {
  const trimmed = baseUrl.trim();
  const q = trimmed.indexOf('?');
  const [path, query] = q < 0 ? [trimmed, ''] : [trimmed.slice(0, q), trimmed.slice(q)];
  return path.replace(/\/+$/, '').replace(/\/chat\/completions$/, '') + query;
}

/**
 * The URL of an endpoint `path` (`/chat/completions`, `/batches?limit=100`) under a base URL: the
 * path goes after the base's path and before its query, which is kept (`?api-version=...`), with
 * the path's own query added to it.
 */
export function endpointUrl(baseUrl: string, path: string): URL {
  const url = new URL(normalizeBaseUrl(baseUrl));
  const q = path.indexOf('?');
  url.pathname = url.pathname.replace(/\/+$/, '') + (q < 0 ? path : path.slice(0, q));
  if (q >= 0) for (const [name, value] of new URLSearchParams(path.slice(q + 1))) url.searchParams.append(name, value);
  return url;
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

/** Where the API key is read from, in that order. */
export const API_KEY_VARIABLES = ['LLMQ_API_KEY', 'OPENAI_API_KEY'] as const;

/** The API key and the variable it came from (for messages), or undefined when neither is set. */
export function findApiKey(env: Env): { key: string; name: (typeof API_KEY_VARIABLES)[number] } | undefined {
  for (const name of API_KEY_VARIABLES) {
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
