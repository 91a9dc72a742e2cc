import { MOCK_BASE_URL } from '../mock-base-url.js';
import { resolveBaseUrl } from '../provider/endpoint.js';

/** What lanes, learned limits and batches are keyed by: the endpoint without credentials or query (`mock` offline). */
export function laneBaseUrl(flags: { provider: 'openai' | 'mock'; baseUrl?: string }): string {
  if (flags.provider === 'mock') return MOCK_BASE_URL;
  const url = new URL(resolveBaseUrl(flags.baseUrl, process.env).url);
  url.username = url.password = '';
  url.search = '';
  url.hash = '';
  return url.href.replace(/\/$/, '');
}
