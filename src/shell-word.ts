import { redactUrlCredentials } from './url-credentials.js';

/**
 * A value as a shell word for a command llmq suggests: quoted when needed (`$'...'`, bash's and zsh's,
 * for one holding a control character), a URL's password masked (invariant 7: such a hint is shown,
 * not pasted).
 */
export function shellWord(value: string): string {
  const shown = redactUrlCredentials(value);
  if (/^[\w@%+=:,./-]+$/.test(shown)) return shown;
  // A control character in single quotes reached the terminal raw: a file's name broke the line, or
  // set the terminal's colours and title. Bash's and zsh's $'...' say each as an escape, pasted back
  // as the same character.
  if (CONTROL.test(shown)) return `$'${shown.replace(CONTROL_OR_QUOTE, ansiCEscape)}'`;
  return `'${shown.replaceAll("'", `'\\''`)}'`;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it escapes
const CONTROL_OR_QUOTE = /[\\'\u0000-\u001f\u007f-\u009f\u2028\u2029]/g;
const NAMED: Readonly<Record<string, string>> = { '\\': '\\\\', "'": "\\'", '\n': '\\n', '\t': '\\t', '\r': '\\r', '\u001b': '\\e' };

/** One character as $'...' says it; past ASCII as its UTF-8 bytes, which bash reads back in any locale (its \u escapes only in a UTF-8 one). */
function ansiCEscape(c: string): string {
  return NAMED[c] ?? [...Buffer.from(c, 'utf8')].map((b) => `\\x${b.toString(16).padStart(2, '0')}`).join('');
}
