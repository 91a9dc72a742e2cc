import { resolveBaseUrl } from '../provider/endpoint.js';

/** What lanes and learned limits are keyed by: the endpoint without credentials or query (`mock` offline). */
export function laneBaseUrl(flags: { provider: 'openai' | 'mock'; baseUrl?: string }): string {
  if (flags.provider === 'mock') return 'mock';
  const url = new URL(resolveBaseUrl(flags.baseUrl, process.env).url);
  url.username = url.password = '';
  url.search = '';
  return url.href.replace(/\/$/, '');
}
