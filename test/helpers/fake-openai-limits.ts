/**
 * The fake OpenAI server's rate limits: what it enforces and which headers describe them.
 *
 * Enforcement is two rules, both must admit a request:
 * - fixed windows of `windowMs` aligned to the clock, each allowing `rpm * windowMs / 60000` requests
 *   and `tpm * windowMs / 60000` tokens (how providers quantize a per-minute limit in practice). A
 *   request bigger than a window's token budget is admitted only into an untouched window;
 * - a per-minute budget refilling continuously (a token bucket of capacity `rpm`, refilling `rpm / 60`
 *   per second; the same for `tpm`). A request bigger than the whole bucket goes only when it is full.
 * Rejected requests use no budget.
 *
 * The headers describe the bucket, as OpenAI's do, not the window that actually rejects bursts:
 * - 'openai': `x-ratelimit-limit-requests` = rpm, `x-ratelimit-remaining-requests` = the bucket's
 *   whole units left, `x-ratelimit-reset-requests` = time until the bucket is full again, in OpenAI's
 *   duration format (`120ms`, `1s`, `1m30.5s`, `6m0s`); the same with `-tokens` for tpm. A 429 adds
 *   `retry-after-ms` and `retry-after` (seconds, rounded up): the time until the request would fit.
 * - 'anthropic': `anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}`, reset as an RFC 3339
 *   time when the bucket is full; a 429 adds `retry-after` (seconds, rounded up).
 * - 'none': no rate-limit header at all, and a bare 429 (providers that say nothing).
 * - 'google': no header either, and a 429 whose body says the wait as Google's endpoints do (its
 *   OpenAI-compatible one too): in a list, `google.rpc.RetryInfo`'s `retryDelay` in whole seconds and
 *   "Please retry in 36.429760048s." in the message (the time until the request would fit).
 */
import type { FakeHeaders } from './fake-openai-replies.js';

export type HeaderStyle = 'openai' | 'anthropic' | 'none' | 'google';

export interface LimitSettings {
  readonly rpm: number | null;
  readonly tpm: number | null;
  readonly windowMs: number;
  readonly headers: HeaderStyle;
}

export interface Admission {
  readonly rejected: boolean;
  /** Which limit refused the request (for the 429's message). */
  readonly over: 'requests' | 'tokens' | null;
  readonly headers: FakeHeaders;
  /** How long until the request would be admitted; 0 when it was. */
  readonly retryAfterMs: number;
}

/** A per-minute budget that refills continuously; starts full. */
class Bucket {
  #level: number;
  #at: number;
  constructor(
    readonly capacity: number,
    now: number,
  ) {
    this.#level = capacity;
    this.#at = now;
  }

  /** Units refilled per ms. */
  get rate(): number {
    return this.capacity / 60_000;
  }

  level(now: number): number {
    if (now > this.#at) {
      this.#level = Math.min(this.capacity, this.#level + (now - this.#at) * this.rate);
      this.#at = now;
    }
    return this.#level;
  }

  /** ms until `cost` fits; a cost above the capacity fits only a full bucket. */
  waitFor(cost: number, now: number): number {
    const need = Math.min(cost, this.capacity) - this.level(now);
    return need <= 1e-9 ? 0 : Math.ceil(need / this.rate);
  }

  take(cost: number, now: number): void {
    this.#level = this.level(now) - cost;
  }

  msToFull(now: number): number {
    return Math.max(0, Math.ceil((this.capacity - this.level(now)) / this.rate));
  }
}

export class FakeRateLimits {
  #window = { id: -1, requests: 0, tokens: 0 };
  #requests: Bucket | null = null;
  #tokens: Bucket | null = null;

  /** Refill both budgets and forget the current window (a fresh provider account). */
  reset(): void {
    this.#window = { id: -1, requests: 0, tokens: 0 };
    this.#requests = this.#tokens = null;
  }

  /** Count a request of `cost` tokens at `now`, or say why not and for how long. */
  admit(s: LimitSettings, cost: number, now: number): Admission {
    if (s.rpm === null && s.tpm === null) return { rejected: false, over: null, headers: {}, retryAfterMs: 0 };
    if (s.rpm !== null) this.#requests = this.#bucket(this.#requests, s.rpm, now);
    if (s.tpm !== null) this.#tokens = this.#bucket(this.#tokens, s.tpm, now);
    const requests = s.rpm === null ? null : this.#requests;
    const tokens = s.tpm === null ? null : this.#tokens;
    const id = Math.floor(now / s.windowMs);
    if (this.#window.id !== id) this.#window = { id, requests: 0, tokens: 0 };
    const w = this.#window;
    const windowEndMs = Math.max(1, (id + 1) * s.windowMs - now);
    const untouched = w.requests === 0 && w.tokens === 0;
    const waitRequests = Math.max(
      s.rpm !== null && w.requests + 1 > (s.rpm * s.windowMs) / 60_000 + 1e-9 ? windowEndMs : 0,
      requests?.waitFor(1, now) ?? 0,
    );
    const waitTokens = Math.max(
      s.tpm !== null && !untouched && w.tokens + cost > (s.tpm * s.windowMs) / 60_000 + 1e-9 ? windowEndMs : 0,
      tokens?.waitFor(cost, now) ?? 0,
    );
    const rejected = waitRequests > 0 || waitTokens > 0;
    if (!rejected) {
      w.requests++;
      w.tokens += tokens ? cost : 0;
      requests?.take(1, now);
      tokens?.take(cost, now);
    }
    const retryAfterMs = Math.max(waitRequests, waitTokens);
    const headers = describe(s.headers, { requests, tokens }, now, rejected ? retryAfterMs : null);
    return { rejected, over: waitRequests > 0 ? 'requests' : waitTokens > 0 ? 'tokens' : null, headers, retryAfterMs };
  }

  /** The same bucket, or a fresh full one when the limit changed. */
  #bucket(current: Bucket | null, perMinute: number, now: number): Bucket {
    return current && current.capacity === perMinute ? current : new Bucket(perMinute, now);
  }
}

function describe(
  style: HeaderStyle,
  buckets: { requests: Bucket | null; tokens: Bucket | null },
  now: number,
  retryAfterMs: number | null,
): FakeHeaders {
  const headers: Record<string, string> = {};
  if (style === 'none' || style === 'google') return headers;
  for (const [unit, bucket] of Object.entries(buckets)) {
    if (!bucket) continue;
    const remaining = String(Math.max(0, Math.floor(bucket.level(now) + 1e-9)));
    const toFull = bucket.msToFull(now);
    if (style === 'openai') {
      headers[`x-ratelimit-limit-${unit}`] = String(bucket.capacity);
      headers[`x-ratelimit-remaining-${unit}`] = remaining;
      headers[`x-ratelimit-reset-${unit}`] = openAiDuration(toFull);
    } else {
      headers[`anthropic-ratelimit-${unit}-limit`] = String(bucket.capacity);
      headers[`anthropic-ratelimit-${unit}-remaining`] = remaining;
      headers[`anthropic-ratelimit-${unit}-reset`] = new Date(now + toFull).toISOString();
    }
  }
  if (retryAfterMs !== null) {
    if (style === 'openai') headers['retry-after-ms'] = String(retryAfterMs);
    headers['retry-after'] = String(Math.ceil(retryAfterMs / 1000));
  }
  return headers;
}

/** A duration the way OpenAI writes it: `0s`, `120ms`, `1s`, `8.64s`, `1m30.5s`, `6m0s`, `1h2m0s`. */
export function openAiDuration(ms: number): string {
  const whole = Math.max(0, Math.round(ms));
  if (whole === 0) return '0s';
  if (whole < 1000) return `${whole}ms`;
  const h = Math.floor(whole / 3_600_000);
  const m = Math.floor((whole % 3_600_000) / 60_000);
  const s = `${Number(((whole % 60_000) / 1000).toFixed(3))}s`;
  return h ? `${h}h${m}m${s}` : m ? `${m}m${s}` : s;
}
