/**
 * `--timeout auto`: how long a request of a lane may take before it is taken for hung, from the
 * latencies that lane has shown. Several times the p99 of recent answers, never below a floor;
 * until enough answers are seen, the hard cap. Re-read while requests are in flight, so a request
 * that hung before the lane had answers is cut as soon as it has them.
 *
 * A request may generate more tokens than the answers seen so far (`max_tokens` over their p99).
 * Its latency is predicted from a line fitted through the answers' (completion tokens, latency):
 * where latency grows with tokens the line says by how much; where it does not (time spent queueing
 * rather than generating), a large `max_tokens` earns no extra wait. The slope is taken at the top
 * of its uncertainty, and the prediction never exceeds the proportional stretch `max_tokens / p99
 * tokens`, at most MAX_STRETCH (no line with a non-negative intercept grows faster), which is also
 * what is used when the answers' token counts do not differ and no slope can be read.
 */
export class LatencyStats {
  static readonly SAMPLES = 256;
  /** Answers needed before the p99 is trusted. */
  static readonly MIN_SAMPLES = 20;
  static readonly P99_MULTIPLE = 6;
  static readonly FLOOR_MS = 500;
  /** Longest stretch for a request allowed many more tokens than typical answers. */
  static readonly MAX_STRETCH = 10;
  /**
   * Standard errors added to the fitted slope: a slope read low from noisy latencies must not cut a
   * long answer (P99_MULTIPLE leaves room on top of that).
   */
  static readonly SLOPE_ERRORS = 2;

  readonly #latencies: number[] = [];
  readonly #completions: number[] = [];
  #next = 0;
  #p99: number | null = null;
  #completionP99 = 0;
  /** ms per completion token, at the top of its uncertainty; null when it cannot be read. */
  #slope: number | null = null;
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
    const usual = Math.max(LatencyStats.FLOOR_MS, LatencyStats.P99_MULTIPLE * this.#p99);
    if (!(maxTokens > this.#completionP99 && this.#completionP99 > 0)) return Math.min(capMs, usual);
    const stretched = usual * Math.min(LatencyStats.MAX_STRETCH, maxTokens / this.#completionP99);
    const fitted =
      this.#slope === null
        ? Infinity
        : Math.max(LatencyStats.FLOOR_MS, LatencyStats.P99_MULTIPLE * (this.#p99 + this.#slope * (maxTokens - this.#completionP99)));
    return Math.min(capMs, stretched, fitted);
  }

  #refresh(): void {
    if (!this.#dirty) return;
    this.#dirty = false;
    if (this.#latencies.length < LatencyStats.MIN_SAMPLES) return;
    this.#p99 = percentile(this.#latencies, 0.99);
    this.#completionP99 = percentile(this.#completions, 0.99);
    this.#slope = slopeUpperBound(this.#completions, this.#latencies, LatencyStats.SLOPE_ERRORS);
  }
}

/**
 * The least-squares slope of y over x (at least 0) plus `errors` standard errors; null when x does
 * not vary. Where x barely varies the standard error is large and the bound with it.
 */
function slopeUpperBound(xs: readonly number[], ys: readonly number[], errors: number): number | null {
  const n = xs.length;
  if (n < 3) return null;
  let mx = 0,
    my = 0;
  for (let i = 0; i < n; i++) {
    mx += xs[i]!;
    my += ys[i]!;
  }
  mx /= n;
  my /= n;
  let sxx = 0,
    sxy = 0;
  for (let i = 0; i < n; i++) {
    sxx += (xs[i]! - mx) ** 2;
    sxy += (xs[i]! - mx) * (ys[i]! - my);
  }
  if (sxx === 0) return null;
  const slope = sxy / sxx;
  let residuals = 0;
  for (let i = 0; i < n; i++) residuals += (ys[i]! - my - slope * (xs[i]! - mx)) ** 2;
  const standardError = Math.sqrt(residuals / (n - 2) / sxx);
  return Math.max(0, slope) + errors * standardError;
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}
