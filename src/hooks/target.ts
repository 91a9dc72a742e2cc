import { UsageError } from '../errors.js';
import { redactUrl, redactUrlCredentials } from '../url-credentials.js';

/** Where a hook goes: a URL gets the JSON as a POST body, a command gets it on stdin. */
export type HookTarget = { readonly kind: 'url'; readonly url: string } | { readonly kind: 'command'; readonly command: string };

/** `http(s)://...` is a URL; anything else is a shell command. */
export function parseHookTarget(value: string, flag: string): HookTarget {
  const text = value.trim();
  if (text === '') throw new UsageError(`${flag} needs a command or an http(s):// URL.`);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) {
    if (/^https?:\/\//i.test(text) && !URL.canParse(text)) {
      throw new UsageError(
        `${flag} ${redactUrlCredentials(text)}: not a whole URL (write it as http://host:port/path); anything without a scheme:// is run as a shell command.`,
      );
    }
    if (!URL.canParse(text) || !/^https?:$/.test(new URL(text).protocol)) {
      throw new UsageError(
        `${flag} ${redactUrlCredentials(text)}: hooks post to http:// or https:// URLs only; anything else is run as a shell command.`,
      );
    }
    const url = new URL(text);
    if (url.username || url.password) {
      // the post would not send them (no Authorization header from a URL), and every message quoting the URL would
      throw new UsageError(
        `${flag} ${redactUrl(text)}: a hook URL cannot carry a user or password. Put a token in its path or query, ` +
          'or let the receiver check the x-llmq-signature header (LLMQ_HOOK_SECRET).',
      );
    }
    return { kind: 'url', url: text };
  }
  return { kind: 'command', command: text };
}
