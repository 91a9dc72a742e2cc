/** The limits a lane would pace at, per minute, and whether the provider told them. */
export interface LaneLimits {
  readonly rpm: number | null;
  readonly tpm: number | null;
  /** Learned from the provider for this endpoint and model (its headers, or 429s), and when. */
  readonly learned: { readonly source: 'headers' | '429s'; readonly at: number } | null;
  /** Other endpoints a run learned this model's limits at: the estimate is for one endpoint (`--base-url`). */
  readonly learnedElsewhere: readonly string[];
}

/**
 * Seconds a lane needs for `jobs` requests weighing `tokens` (prompt + max_tokens, as its pacer
 * counts) at its limits; null when it has none.
 */
export function paceSeconds(jobs: number, tokens: number, limits: LaneLimits): number | null {
  const byRequests = limits.rpm ? (jobs / limits.rpm) * 60 : null;
  const byTokens = limits.tpm ? (tokens / limits.tpm) * 60 : null;
  if (byRequests === null && byTokens === null) return null;
  return Math.max(byRequests ?? 0, byTokens ?? 0);
}
