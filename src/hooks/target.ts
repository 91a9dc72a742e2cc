import { UsageError } from '../errors.js';
import { redactUrlCredentials } from '../url-credentials.js';

/** Where a hook goes: a URL gets the JSON as a POST body, a command gets it on stdin. */
export type HookTarget = { readonly kind: 'url'; readonly url: string } | { readonly kind: 'command'; readonly command: string };

/** `http(s)://...` is a URL; anything else is a shell command. */
export function parseHookTarget(value: string, flag: string): HookTarget {
  const text = value.trim();
  if (text === '') throw new UsageError(`${flag} needs a command or an http(s):// URL.`);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(text)) {
    if (!URL.canParse(text) || !/^https?:$/.test(new URL(text).protocol)) {
      throw new UsageError(
        `${flag} ${redactUrlCredentials(text)}: hooks post to http:// or https:// URLs only; anything else is run as a shell command.`,
      );
    }
    return { kind: 'url', url: text };
  }
  return { kind: 'command', command: text };
}
