import { createHash, randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { LlmqError } from '../errors.js';
import { redactUrl, redactUrlCredentials } from '../url-credentials.js';
import type { LaneBoards } from './lanes.js';
import type { LaneBoard, LearnedLimits } from './pace/board.js';
import { SetBackWatch } from './pace/set-back.js';
import { GUARD_MS, WINDOW_MS, windowShare, type PaceLimits, type PaceTicket } from './pace/window-pacer.js';

/**
 * The pacing rules of window-pacer.ts, run inside Redis so that every run naming the same Redis,
 * base URL and model shares one budget: a sliding log of sends (sorted sets scored by expiry) and
 * even spacing (GCRA times in a hash), checked and taken in one atomic script, on Redis's clock.
 * Returns {0, tokens expiry, request expiry, when taken} when the place was taken, {ms to wait, 0} otherwise.
 */
const TRY_TAKE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local reqShare = tonumber(ARGV[1])
local tokShare = tonumber(ARGV[2])
local tokens = tonumber(ARGV[3])
local span = tonumber(ARGV[4])
local function fmt(x) return string.format('%.3f', x) end
local paused = tonumber(redis.call('HGET', KEYS[3], 'paused') or '0')
if paused > now then return {math.ceil(paused - now), 0} end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
-- A limit raised: each place taken ends as the new limit would have it end, measured from when it
-- was taken (the time in its member), never later than it did (WindowPacer.setLimits); looked at
-- only when a place lives past a window, as one taken under a window's share does.
local function shorten(key, share, sizeOf)
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #last == 0 or tonumber(last[2]) <= now + span then return end
  local e = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  for i = 1, #e, 2 do
    local at = tonumber(string.match(e[i], '@([%d%.]+)'))
    if at then
      local ends = at + span * math.max(1, sizeOf(e[i]) / share)
      if ends < tonumber(e[i + 1]) then redis.call('ZADD', key, fmt(ends), e[i]) end
    end
  end
end
-- the time ahead of now the even spacing holds, taken at a lower limit, shrinks to the new one's
local function respace(tatField, shareField, share)
  local was = tonumber(redis.call('HGET', KEYS[3], shareField) or '0')
  if was <= 0 or share <= was then return end
  local tat = tonumber(redis.call('HGET', KEYS[3], tatField) or '0')
  if tat > now then redis.call('HSET', KEYS[3], tatField, fmt(now + (tat - now) * was / share)) end
  redis.call('HSET', KEYS[3], shareField, tostring(share))
end
if reqShare > 0 then
  shorten(KEYS[1], reqShare, function() return 1 end)
  respace('rtat', 'rtats', reqShare)
end
if tokShare > 0 then
  shorten(KEYS[2], tokShare, function(m) return tonumber(string.match(m, ':([^:]*)$')) end)
  respace('ttat', 'ttats', tokShare)
end
local wait = 0
if reqShare > 0 then
  local perWindow = math.max(1, math.floor(reqShare + 1e-9))
  local n = redis.call('ZCARD', KEYS[1])
  if n + 1 > perWindow then
    local r = redis.call('ZRANGE', KEYS[1], n - perWindow, n - perWindow, 'WITHSCORES')
    wait = math.max(wait, tonumber(r[2]) - now)
  end
  local tat = tonumber(redis.call('HGET', KEYS[3], 'rtat') or '0')
  wait = math.max(wait, tat - span / reqShare - now)
end
if tokShare > 0 and tokens > 0 then
  local entries = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
  local sum = 0
  for i = 1, #entries, 2 do sum = sum + tonumber(string.match(entries[i], ':([^:]*)$')) end
  if #entries > 0 and sum + tokens > tokShare + 1e-9 then
    local at = tonumber(entries[#entries])
    local s = sum
    for i = 1, #entries, 2 do
      s = s - tonumber(string.match(entries[i], ':([^:]*)$'))
      if s + tokens <= tokShare + 1e-9 or s <= 0 then at = tonumber(entries[i + 1]); break end
    end
    wait = math.max(wait, at - now)
  end
  local ttat = tonumber(redis.call('HGET', KEYS[3], 'ttat') or '0')
  wait = math.max(wait, ttat - span * 0.1 - now)
end
if wait > 0 then return {math.ceil(wait), 0} end
local tokUntil = 0
local reqUntil = 0
-- the member says when it was taken (shorten)
local member = ARGV[5] .. '@' .. now
if reqShare > 0 then
  reqUntil = now + span * math.max(1, 1 / reqShare)
  redis.call('ZADD', KEYS[1], fmt(reqUntil), member)
  local tat = tonumber(redis.call('HGET', KEYS[3], 'rtat') or '0')
  redis.call('HSET', KEYS[3], 'rtat', fmt(math.max(tat, now) + span / reqShare), 'rtats', tostring(reqShare))
end
if tokShare > 0 and tokens > 0 then
  tokUntil = now + span * math.max(1, tokens / tokShare)
  redis.call('ZADD', KEYS[2], fmt(tokUntil), member .. ':' .. fmt(tokens))
  local ttat = tonumber(redis.call('HGET', KEYS[3], 'ttat') or '0')
  redis.call('HSET', KEYS[3], 'ttat', fmt(math.max(ttat, now) + span * tokens / tokShare), 'ttats', tostring(tokShare))
end
for i = 1, 3 do redis.call('PEXPIRE', KEYS[i], ARGV[6]) end
return {0, math.floor(tokUntil), math.floor(reqUntil), now}`;

/**
 * Raise the shared pause only if the new one ends later (two runs may get a 429 at once). The pause
 * comes as a duration and ends on Redis's clock, the one the pacing script reads: a machine whose
 * clock runs ahead must not hold every run's lane.
 */
const RAISE_PAUSE = `
local t = redis.call('TIME')
local untilMs = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
local current = tonumber(redis.call('HGET', KEYS[1], 'paused') or '0')
if untilMs > current then redis.call('HSET', KEYS[1], 'paused', string.format('%d', untilMs)) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 0`;

/** Forget an idle lane's state after this long. */
const IDLE_TTL_MS = 10 * 60_000;

interface RedisTicket extends PaceTicket {
  readonly member: string;
  /** When it was taken, on this machine's clock: a stretch moves its entries by local time elapsed. */
  readonly takenAt: number;
  /** How long its token entry lives in the log. */
  readonly tokenLife: number;
}

/**
 * The shared pause as a duration left on Redis's clock, and the learned limits: a pause read as
 * Redis's time would be held for as long as this machine's clock is behind Redis's (minutes, on a
 * machine without NTP), for every 429 of any run, its own included.
 */
const READ_STATE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local paused = tonumber(redis.call('HGET', KEYS[1], 'paused') or '0')
return {math.max(0, paused - now), redis.call('HGET', KEYS[1], 'learned')}`;

class RedisLaneBoard implements LaneBoard {
  readonly #keys: [string, string, string];
  readonly #now: () => number;
  readonly #setBack = new SetBackWatch();
  #pausedUntil = 0;
  #learned: LearnedLimits | null = null;

  constructor(
    private readonly client: Redis,
    prefix: string,
    now: () => number,
  ) {
    this.#keys = [`${prefix}:requests`, `${prefix}:tokens`, `${prefix}:state`];
    this.#now = now;
  }

  async tryTake(tokens: number, limits: PaceLimits): Promise<PaceTicket | number> {
    const share = windowShare(limits);
    const member = randomUUID();
    const span = WINDOW_MS + GUARD_MS;
    const [wait, until, requestUntil, takenAt] = (await this.client.eval(
      TRY_TAKE,
      3,
      ...this.#keys,
      share.requests === Infinity ? -1 : share.requests,
      share.tokens === Infinity ? -1 : share.tokens,
      Math.max(0, tokens),
      span,
      member,
      IDLE_TTL_MS,
    )) as [number, number, number, number];
    if (wait > 0) return wait;
    const ticket: RedisTicket = {
      tokens,
      until,
      member: `${member}@${takenAt}`,
      takenAt: this.#now(),
      request: requestUntil > 0 ? { until: requestUntil } : null,
      tokenLife: span * Math.max(1, tokens / share.tokens),
    };
    return ticket;
  }

  settle(ticket: PaceTicket, actualTokens: number): void {
    const t = ticket as RedisTicket;
    // (Redis's clock: past its expiry the entry is gone anyway, and re-adding it would only overcount.)
    if (!t.member || t.tokens === 0 || this.#now() - t.takenAt > t.tokenLife) return;
    const fmt = (x: number): string => x.toFixed(3);
    void this.client
      .multi()
      .zrem(this.#keys[1], `${t.member}:${fmt(t.tokens)}`)
      .zadd(this.#keys[1], t.until, `${t.member}:${fmt(Math.max(0, actualTokens))}`)
      .exec()
      .catch(() => {}); // Redis gone: the correction is lost, the run goes on
    t.tokens = actualTokens;
  }

  stretch(ticket: PaceTicket, sentAt: number): void {
    const t = ticket as RedisTicket;
    // The entries' times are Redis's; move them by the time elapsed here, never by a clock difference.
    const shift = sentAt - t.takenAt;
    if (!(shift > 0)) return;
    const multi = this.client.multi();
    if (t.request) {
      t.request.until += shift;
      multi.zadd(this.#keys[0], 'XX', t.request.until, t.member);
    }
    if (t.tokens > 0 && t.until > 0) {
      t.until += shift;
      multi.zadd(this.#keys[1], 'XX', t.until, `${t.member}:${t.tokens.toFixed(3)}`);
    }
    void multi.exec().catch(() => {}); // Redis gone: the run goes on with what it has
  }

  pause(until: number): void {
    if (until > this.pausedUntil()) this.#pausedUntil = until;
    const forMs = Math.max(1, Math.ceil(until - this.#now()));
    void this.client.eval(RAISE_PAUSE, 1, this.#keys[2], forMs, IDLE_TTL_MS).catch(() => {});
  }

  pausedUntil(): number {
    // a clock set back moves the pause back with it (the pace itself is on Redis's clock)
    this.#pausedUntil += this.#setBack.by(this.#now());
    return this.#pausedUntil;
  }

  learned(): LearnedLimits | null {
    return this.#learned;
  }

  learn(limits: LearnedLimits): void {
    this.#learned = limits;
    void this.client.hset(this.#keys[2], 'learned', JSON.stringify(limits)).catch(() => {});
  }

  async refresh(): Promise<void> {
    const [pausedFor, learned] = (await this.client.eval(READ_STATE, 1, this.#keys[2])) as [number, string | null];
    const pausedUntil = this.#now() + Number(pausedFor);
    if (pausedFor > 0 && pausedUntil > this.pausedUntil()) this.#pausedUntil = pausedUntil;
    if (learned) {
      try {
        const l = JSON.parse(learned) as LearnedLimits;
        if (!this.#learned || l.at > this.#learned.at) this.#learned = l;
      } catch {
        /* another version's value: keep ours */
      }
    }
  }

  async close(): Promise<void> {}
}

/**
 * One budget (pace, 429 pause, learned limits) per (base URL, model), shared by every run that
 * names the same Redis. Keys derive from endpoint and model, never from the API key.
 */
export class RedisLaneBoards implements LaneBoards {
  private constructor(
    private readonly client: Redis,
    private readonly now: () => number,
  ) {}

  /** `now`: this machine's clock, as the run reads it (its lanes compare the pause with it). */
  static async connect(url: string, now: () => number = Date.now): Promise<RedisLaneBoards> {
    // ioredis reads another scheme's URL as a host name and fails with "Connection is closed"
    const scheme = URL.canParse(url) ? new URL(url).protocol : null;
    if (scheme !== null && scheme !== 'redis:' && scheme !== 'rediss:') {
      throw new LlmqError(
        `--redis ${redactUrl(url)} is not a Redis URL: give redis://host:port (or rediss:// for TLS), e.g. redis://127.0.0.1:6379.`,
      );
    }
    // Commands fail fast while Redis is away (the lane waits and asks again); the client keeps
    // reconnecting, so a Redis restart does not end the runs that share it.
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 2, retryStrategy: (n) => Math.min(200 * n, 2000) });
    client.on('error', () => {}); // surfaced by the commands that fail
    try {
      await client.connect();
      await client.ping();
    } catch (error) {
      client.disconnect();
      throw new LlmqError(
        `Cannot reach Redis at ${redactUrl(url)}: ${redactUrlCredentials((error as Error).message).replace(/\.+$/, '')}. Check --redis (or LLMQ_REDIS_URL) and that Redis is running.`,
        { cause: error },
      );
    }
    return new RedisLaneBoards(client, now);
  }

  /** The Redis key prefix of one budget: derived from endpoint and model, never from the key. */
  static budgetId(baseUrl: string, model: string): string {
    return 'llmq:' + createHash('sha256').update(`${baseUrl}\n${model}`).digest('hex').slice(0, 16);
  }

  board(baseUrl: string, model: string): LaneBoard {
    const board = new RedisLaneBoard(this.client, RedisLaneBoards.budgetId(baseUrl, model), this.now);
    void board.refresh().catch(() => {});
    return board;
  }

  async close(): Promise<void> {
    await this.client.quit().catch(() => this.client.disconnect());
  }
}
