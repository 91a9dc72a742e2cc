import { redactUrlCredentials } from '../url-credentials.js';

/**
 * What a follow-up command printed as a hint ("llmq retry-failed && llmq run") needs to reach the
 * same queue: ` --db PATH` when the queue was named with --db, nothing when it came from LLMQ_DB
 * (still set in the user's shell) or is the default. Quoted for a POSIX shell when needed; a URL's
 * password is masked (invariant 7), so such a hint is shown, not pasted.
 */
export function dbArgument(dbFlag: string | undefined): string {
  if (dbFlag === undefined) return '';
  const shown = redactUrlCredentials(dbFlag);
  return ` --db ${/^[\w@%+=:,./-]+$/.test(shown) ? shown : `'${shown.replaceAll("'", `'\\''`)}'`}`;
}
