import Bottleneck from 'bottleneck';
import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { LlmqError } from '../errors.js';
import { BottleneckRateLimiter, pacing, type PauseBoard, type RateLimitOptions, type RateLimiter } from './limiter.js';

/** Raise the stored pause only if the new one ends later (two runs may get a 429 at once). */
const RAISE_PAUSE = `
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
local untilMs = tonumber(ARGV[1])
if untilMs > current then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) end
return 0`;

/** A 429's pause, kept in Redis so every run on the same budget waits it out. */
class RedisPauseBoard implements PauseBoard {
  #until = 0;
  #checkedAt = 0;
  #inflight: Promise<void> | null = null;
  constructor(private readonly client: Redis, private readonly key: string) {}

  get(): number {
    return this.#until;
  }

  set(until: number): void {
    if (until > this.#until) this.#until = until;
    void this.client.eval(RAISE_PAUSE, 1, this.key, String(until), String(Math.max(1, until - Date.now()))).catch(() => {});
  }

  /** At most one GET per 100 ms per run: a pause from another run is seen within that. */
  refresh(): Promise<void> {
    if (Date.now() - this.#checkedAt < 100) return Promise.resolve();
    this.#inflight ??= this.client.get(this.key).then((v) => {
      this.#checkedAt = Date.now();
      const until = Number(v ?? 0);
      if (until > this.#until) this.#until = until;
    }).catch(() => {}).finally(() => (this.#inflight = null));
    return this.#inflight;
  }
}

const SHARED_HEADROOM = 0.94;

export interface RedisLimiterOptions extends RateLimitOptions {
  /** `redis://host:port/db` */
  readonly url: string;
  /** The endpoint: runs against different endpoints never share a budget. */
  readonly baseUrl: string;
}

/**
 * One RPM/TPM budget (and one 429 pause) shared by every run that names the same Redis, base URL
 * and model, through bottleneck's Redis clustering. One budget per model, as providers keep them.
 */
export class RedisRateLimiter implements RateLimiter {
  readonly tokenCapacity: number | null;
  readonly #options: RedisLimiterOptions;
  readonly #client: Redis;
  readonly #connection: Bottleneck.IORedisConnection;
  readonly #byModel = new Map<string, { limiter: BottleneckRateLimiter; ready: Promise<void> }>();

  private constructor(options: RedisLimiterOptions, client: Redis) {
    // Runs on several machines reach the provider with more jitter between them than one process
    // does, and Redis round trips add their own: aim a little lower than the local limiter.
    this.#options = { ...options, headroom: options.headroom ?? SHARED_HEADROOM };
    this.#client = client;
    this.#connection = new Bottleneck.IORedisConnection({ client, Redis } as unknown as Bottleneck.IORedisConnectionOptions);
    this.#connection.on('error', () => {}); // surfaced by the commands that fail
    this.tokenCapacity = pacing(this.#options).bucket?.capacity ?? null;
  }

  static async connect(options: RedisLimiterOptions): Promise<RedisRateLimiter> {
    // Not lazyConnect: bottleneck duplicates this client for its subscriber and waits for it to connect.
    const client = new Redis(options.url, { maxRetriesPerRequest: 2, retryStrategy: (n) => (n > 3 ? null : 200 * n) });
    client.on('error', () => {});
    try {
      await client.ping();
    } catch (error) {
      client.disconnect();
      const shown = options.url.replace(/\/\/([^:@/]*):[^@/]*@/, '//$1:***@');
      throw new LlmqError(`Cannot reach Redis at ${shown}: ${(error as Error).message}. Check --redis (or LLMQ_REDIS_URL) and that Redis is running.`, { cause: error });
    }
    return new RedisRateLimiter(options, client);
  }

  /** The Redis key prefix of one budget: derived from endpoint and model, never from the key. */
  static budgetId(baseUrl: string, model: string): string {
    return 'llmq:' + createHash('sha256').update(`${baseUrl}\n${model}`).digest('hex').slice(0, 16);
  }

  #forModel(model: string): { limiter: BottleneckRateLimiter; ready: Promise<void> } {
    let entry = this.#byModel.get(model);
    if (!entry) {
      const id = RedisRateLimiter.budgetId(this.#options.baseUrl, model);
      const limiter = new BottleneckRateLimiter(this.#options, {
        pause: new RedisPauseBoard(this.#client, `${id}:paused_until`),
        bottleneck: (name) => ({
          id: `${id}:${name}`, datastore: 'ioredis', connection: this.#connection, clearDatastore: false,
          timeout: 10 * 60_000, // forget an idle budget after 10 minutes
        }),
      });
      // The newest run's --rpm/--tpm apply to the shared budget.
      entry = { limiter, ready: limiter.updateSettings(this.#options) };
      this.#byModel.set(model, entry);
    }
    return entry;
  }

  async acquire(tokens: number, signal: AbortSignal, model: string): Promise<void> {
    const { limiter, ready } = this.#forModel(model);
    await ready;
    await limiter.acquire(tokens, signal);
  }

  settle(estimatedTokens: number, actualTokens: number, model: string): void {
    this.#forModel(model).limiter.settle(estimatedTokens, actualTokens);
  }

  pauseUntil(until: number): void {
    for (const { limiter } of this.#byModel.values()) limiter.pauseUntil(until);
  }

  pausedUntil(): number {
    return Math.max(0, ...[...this.#byModel.values()].map(({ limiter }) => limiter.pausedUntil()));
  }

  async stop(): Promise<void> {
    await Promise.all([...this.#byModel.values()].map(({ limiter }) => limiter.stop().catch(() => {})));
    await this.#connection.disconnect(true).catch(() => {});
  }
}
