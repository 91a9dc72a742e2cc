import { redactUrlCredentials } from './url-credentials.js';

/** A value as a POSIX shell word for a command llmq suggests: quoted when needed, a URL's password masked (invariant 7: such a hint is shown, not pasted). */
export function shellWord(value: string): string {
  const shown = redactUrlCredentials(value);
  return /^[\w@%+=:,./-]+$/.test(shown) ? shown : `'${shown.replaceAll("'", `'\\''`)}'`;
}
