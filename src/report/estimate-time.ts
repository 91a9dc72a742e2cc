import { reachablePerSecond } from '../scheduler/pace/window-pacer.js';

/** The limits a lane would pace at, per minute, and whether the provider told them. */
export interface LaneLimits {
  readonly rpm: number | null;
  readonly tpm: number | null;
  /**
   * Learned from the provider for this endpoint and model (its headers, or 429s), and when; null
   * when the flags are lower on both counts (the learned figures are then not what paces the run).
   */
  readonly learned: { readonly source: 'headers' | '429s'; readonly at: number } | null;
  /** Which of `rpm` and `tpm` are the learned figures (the others are the flags', or none). */
  readonly learnedLimits: { readonly rpm: boolean; readonly tpm: boolean };
  /** Other endpoints a run learned this model's limits at: the estimate is for one endpoint (`--base-url`). */
  readonly learnedElsewhere: readonly string[];
}

/**
 * Seconds a lane needs for `jobs` requests weighing `tokens` (prompt + max_tokens, as its pacer
 * counts) at its limits; null when it has none.
 */
export function paceSeconds(jobs: number, tokens: number, limits: Pick<LaneLimits, 'rpm' | 'tpm'>): number | null {
  if (jobs === 0) return limits.rpm || limits.tpm ? 0 : null;
  // at the pace the windows admit requests of the average weight, as the lane sends them
  const reachable = reachablePerSecond({ rpm: limits.rpm || null, tpm: limits.tpm || null }, tokens / jobs);
  return reachable === null ? null : jobs / reachable.perSecond;
}
