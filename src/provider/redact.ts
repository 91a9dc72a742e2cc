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
  return redactUrlCredentials(out.replace(KEY_SHAPES, REDACTED).replace(CUT_KEY_SHAPE, REDACTED));
}

/**
 * What is left of a key-shaped token that shared a run with the key: the run went first, and its
 * ends, no longer key-shaped, stayed (`sk-abcdef[REDACTED]abcd`). They go with it.
 */
const CUT_KEY_SHAPE = /\bsk-[A-Za-z0-9_-]*\[REDACTED\][A-Za-z0-9_-]*/g;

/**
 * Every character of `text` inside a MIN_REDACTED_RUN-long window that also occurs in `key` is
 * covered, and each covered stretch becomes one REDACTED. A stretch is then exactly the union of
 * the key's substrings found in the text, of any length >= MIN_REDACTED_RUN: one set lookup per
 * position, linear in the text, however long the key.
 */
function redactKeyRuns(text: string, key: string, n = MIN_REDACTED_RUN): string {
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
 * The shortest run of the key's characters taken out of an answer. Longer than in error texts: keys
 * open with a public prefix (`sk-proj-`, `sk-or-v1-`, `sk-ant-api03-`), which an answer about API
 * keys may quote, and changing the user's results over it would be wrong. A key echoed into an
 * answer comes whole (a proxy copying the Authorization header), and any 16 of its characters go.
 */
export const MIN_ANSWER_RUN = 16;

/**
 * The key's runs taken out of an answer's values (`json`, parsed from `text`), for what is stored:
 * the output and the body. Only the key itself: a key-shaped string or a URL with a password in an
 * answer is the model's text (a summary of API documentation), kept as it came. Null when the
 * answer holds no run of the key, which `mayHoldKeyRun` tells from the raw text at the cost of a few
 * searches, so the common answer is neither walked nor copied.
 */
export function answerWithoutKey(text: string, json: unknown, secret: string | undefined): { text: string; json: unknown } | null {
  if (!secret || secret.length < MIN_ANSWER_RUN || !mayHoldKeyRun(text, secret, MIN_ANSWER_RUN)) return null;
  let changed = false;
  const clean = (value: unknown): unknown => {
    if (typeof value === 'string') {
      const out = redactKeyRuns(value, secret, MIN_ANSWER_RUN);
      if (out !== value) changed = true;
      return out;
    }
    if (Array.isArray(value)) return value.map(clean);
    if (value !== null && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, clean(v)]));
    }
    return value;
  };
  const cleaned = clean(json);
  return changed ? { text: JSON.stringify(cleaned), json: cleaned } : null;
}

/** The key's blocks that `mayHoldKeyRun` looks for, kept for the last key and run asked about (a run has one). */
let blocksOf: { key: string; size: number; blocks: readonly string[] } | null = null;

/**
 * Whether `text` may hold a run of `run` characters of `key`: such a run always holds one of the
 * key's blocks of half that length that start at a multiple of it, so `text` is searched for those
 * alone. A 164-character key and runs of 16: 20 searches, about 1.5 us for a 400-byte answer and
 * 25 for 4 KB (an answer that long took its provider seconds), where `redactKeyRuns` takes 27 and 320.
 */
export function mayHoldKeyRun(text: string, key: string, run = MIN_REDACTED_RUN): boolean {
  const size = Math.floor(run / 2);
  if (blocksOf?.key !== key || blocksOf.size !== size) {
    const blocks: string[] = [];
    for (let i = 0; i + size <= key.length; i += size) blocks.push(key.slice(i, i + size));
    blocksOf = { key, size, blocks };
  }
  for (const block of blocksOf.blocks) if (text.includes(block)) return true;
  return false;
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
