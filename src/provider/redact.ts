/**
 * Keeping the API key out of every message (DESIGN invariant 7). A server may echo the
 * Authorization header into its error body and Node may put header values into error messages, so
 * every text that leaves the provider goes through here.
 */

const REDACTED = '[REDACTED]';

/** Shapes of well-known API keys, removed even when they are not the configured key. */
const KEY_SHAPES = /\b(sk-[A-Za-z0-9_-]{16,}|Bearer\s+[A-Za-z0-9._~+/=-]{16,})/g;

/** `text` with every occurrence of `secret` (and anything shaped like an API key) replaced. */
export function redactSecret(text: string, secret: string | undefined): string {
  let out = text;
  if (secret) out = out.split(secret).join(REDACTED);
  return out.replace(KEY_SHAPES, REDACTED);
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
