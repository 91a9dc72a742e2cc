/**
 * `--timeout auto`: how long a request of a lane may take before it is taken for hung, from the
 * latencies that lane has shown. Several times the p99 of recent answers, stretched for a request
 * that may generate more tokens than the answers seen so far, never below a floor; until enough
 * answers are seen, the hard cap. Re-read while requests are in flight, so a request that hung
 * before the lane had answers is cut as soon as it has them.
 */
export class LatencyStats {
  static readonly SAMPLES = 256;
  /** Answers needed before the p99 is trusted. */
  static readonly MIN_SAMPLES = 20;
  static readonly P99_MULTIPLE = 6;
  static readonly FLOOR_MS = 500;
  /** Longest stretch for a request allowed many more tokens than typical answers. */
  static readonly MAX_STRETCH = 10;

  readonly #latencies: number[] = [];
  readonly #completions: number[] = [];
  #next = 0;
  #p99: number | null = null;
  #completionP99 = 0;
  #dirty = false;

  record(latencyMs: number, completionTokens: number): void {
    if (this.#latencies.length < LatencyStats.SAMPLES) {
      this.#latencies.push(latencyMs);
      this.#completions.push(completionTokens);
    } else {
      this.#latencies[this.#next] = latencyMs;
      this.#completions[this.#next] = completionTokens;
      this.#next = (this.#next + 1) % LatencyStats.SAMPLES;
    }
    this.#dirty = true;
  }

  /** The p99 of recent latencies, null until there are enough. */
  get p99(): number | null {
    this.#refresh();
    return this.#p99;
  }

  /** The time a request asking for up to `maxTokens` (0: not said) may take, at most `capMs`. */
  timeoutMs(maxTokens: number, capMs: number): number {
    this.#refresh();
    if (this.#p99 === null) return capMs;
    const stretch = maxTokens > 0 && this.#completionP99 > 0
      ? Math.min(LatencyStats.MAX_STRETCH, Math.max(1, maxTokens / this.#completionP99))
      : 1;
    return Math.min(capMs, Math.max(LatencyStats.FLOOR_MS, LatencyStats.P99_MULTIPLE * this.#p99) * stretch);
  }

  #refresh(): void {
    if (!this.#dirty) return;
    this.#dirty = false;
    if (this.#latencies.length < LatencyStats.MIN_SAMPLES) return;
    this.#p99 = percentile(this.#latencies, 0.99);
    this.#completionP99 = percentile(this.#completions, 0.99);
  }
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}
