import * as crypto from 'node:crypto';

/** One chat message as OpenAI's chat-completions API takes it. */
export interface ChatMessage {
  readonly role: 'system' | 'user' | 'assistant' | 'developer' | 'tool';
  readonly content: string | unknown[];
  readonly [extra: string]: unknown;
}

/** The body of a `POST /chat/completions` request, exactly as it will be sent. */
export interface ChatRequest {
  readonly model: string;
  readonly messages: readonly ChatMessage[];
  readonly max_tokens?: number;
  readonly max_completion_tokens?: number;
  readonly temperature?: number;
  readonly [extra: string]: unknown;
}

/**
 * JSON with object keys sorted at every depth, no whitespace. Two requests that mean the same
 * thing serialize to the same bytes, so their hash (the job key) is the same.
 *
 * Recursive, one stack frame per level: callers with untrusted input bound its depth first
 * (enqueue rejects JSON nested deeper than MAX_JSON_DEPTH), or a RangeError escapes.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    // No prototype, so a "__proto__" key is kept as a key instead of setting the prototype.
    const out: Record<string, unknown> = Object.create(null);
    for (const k of Object.keys(value as object).sort()) {
      const v = (value as Record<string, unknown>)[k];
      if (v !== undefined) out[k] = sortKeys(v);
    }
    return out;
  }
  return value;
}

/** The job key: SHA-256 (hex) of the canonical request JSON. */
export function jobKey(canonicalRequestJson: string): string {
  return sha256Hex(canonicalRequestJson);
}

// One-shot crypto.hash (Node >= 20.12) is about twice as fast as createHash().update().digest() for
// ~1 KB inputs, and enqueue hashes every document; older Node 20 releases fall back.
const sha256Hex: (s: string) => string =
  typeof crypto.hash === 'function' ? (s) => crypto.hash('sha256', s, 'hex') : (s) => crypto.createHash('sha256').update(s).digest('hex');
