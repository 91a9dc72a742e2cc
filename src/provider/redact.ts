/**
 * Keeping the API key out of every message (invariant 7, docs/architecture.md). A server may echo the
 * Authorization header into its error body (whole, or a prefix like `sk-SUPERSECR...`) and Node may
 * put header values and URLs into error messages, so every text that leaves the provider goes
 * through here.
 */
import { redactUrlCredentials } from '../url-credentials.js';

const REDACTED = '[REDACTED]';

/**
 * The shortest run of the key's characters that is redacted. Shorter runs occur in ordinary text
 * by chance (a one-character key would redact every letter it shares with a message), and a key
 * shorter than this cannot be told apart from ordinary text at all: it is not redacted, and the
 * run warns about it instead (see `isRedactableKey`).
 */
export const MIN_REDACTED_RUN = 8;

/** Shapes of well-known API keys, removed even when they are not the configured key. */
const KEY_SHAPES = /\b(sk-[A-Za-z0-9_-]{16,}|Bearer\s+[A-Za-z0-9._~+/=-]{16,})/g;

/** Whether `redactSecret` can recognize this key in text; false for keys under MIN_REDACTED_RUN characters. */
export function isRedactableKey(key: string): boolean {
  return key.length >= MIN_REDACTED_RUN;
}

/**
 * `text` with every run of MIN_REDACTED_RUN or more consecutive characters of `secret` replaced,
 * anything shaped like an API key replaced, and URL passwords masked.
 */
export function redactSecret(text: string, secret: string | undefined): string {
  const out = secret && isRedactableKey(secret) ? redactKeyRuns(text, secret) : text;
  return redactUrlCredentials(out.replace(KEY_SHAPES, REDACTED));
}

/**
 * Every character of `text` inside a MIN_REDACTED_RUN-long window that also occurs in `key` is
 * covered, and each covered stretch becomes one REDACTED. A stretch is then exactly the union of
 * the key's substrings found in the text, of any length >= MIN_REDACTED_RUN: one set lookup per
 * position, linear in the text, however long the key.
 */
function redactKeyRuns(text: string, key: string): string {
  const n = MIN_REDACTED_RUN;
  if (text.length < n) return text;
  const windows = new Set<string>();
  for (let i = 0; i + n <= key.length; i++) windows.add(key.slice(i, i + n));
  let out = '';
  let kept = 0; // text[kept..] is not yet in `out`
  let coveredUntil = -1; // the end (exclusive) of the stretch being covered, or -1
  for (let i = 0; i + n <= text.length; i++) {
    if (!windows.has(text.slice(i, i + n))) continue;
    if (i > coveredUntil) {
      if (coveredUntil !== -1) out += REDACTED;
      out += text.slice(kept, i);
    }
    coveredUntil = i + n;
    kept = coveredUntil;
  }
  if (coveredUntil !== -1) out += REDACTED;
  return out + text.slice(kept);
}

/**
 * A copy of an error (and its cause chain) whose messages are redacted, for `ProviderError.cause`:
 * keeps name, message and `code` (ECONNREFUSED, UND_ERR_SOCKET...), drops everything else.
 */
export function redactError(err: unknown, secret: string | undefined, depth = 0): Error | undefined {
  if (err === undefined || err === null || depth > 4) return undefined;
  const source = err instanceof Error ? err : new Error(String(err));
  const copy = new Error(redactSecret(source.message, secret), { cause: redactError(source.cause, secret, depth + 1) });
  copy.name = source.name;
  const code = (source as { code?: unknown }).code;
  if (typeof code === 'string') (copy as Error & { code?: string }).code = code;
  copy.stack = `${copy.name}: ${copy.message}`; // the original stack may quote the message
  return copy;
}
