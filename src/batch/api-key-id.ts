import { createHash } from 'node:crypto';

/**
 * Which API key a batch was sent with, kept without the key: a fingerprint to compare with, and the
 * key's last four characters to name it (as the provider's own dashboards do). A provider answers
 * 404 for a batch made with a key of another project: with another key that 404 says nothing of the
 * batch, which may still run and be billed.
 */
export interface ApiKeyId {
  readonly fingerprint: string;
  /** `…x9Qz`; empty for a key too short to show any of it. */
  readonly hint: string;
}

export function apiKeyId(key: string | undefined): ApiKeyId | null {
  if (!key) return null;
  const fingerprint = createHash('sha256').update(`llmq api key\0${key}`).digest('hex').slice(0, 16);
  return { fingerprint, hint: key.length >= 20 ? `…${key.slice(-4)}` : '' };
}

/** Whether a batch recorded as sent with `sentWith` was sent with a key other than `key`. */
export function sentWithAnotherKey(sentWith: ApiKeyId | null, key: ApiKeyId | null): boolean {
  return sentWith !== null && sentWith.fingerprint !== key?.fingerprint;
}

/** "the API key ending in …x9Qz", or "another API key" when nothing of it can be shown. */
export function nameKey(key: ApiKeyId | null, otherwise: string): string {
  return key?.hint ? `the API key ending in ${key.hint}` : otherwise;
}
