import { afterEach, describe, expect, it } from 'vitest';
import { answerFor, FakeOpenAI, openAiDuration, reply, uniformLatency, type FakeRequest } from './helpers/fake-openai.js';
import { parseDuration } from '../src/provider/headers.js';
import { canonicalJson, jobKey } from '../src/request.js';
import { waitFor } from './helpers/wait.js';

let fake: FakeOpenAI | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

const body = (text: string, extra: Record<string, unknown> = {}) =>
  canonicalJson({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: text }], ...extra });

const post = (f: FakeOpenAI, b: string, signal?: AbortSignal) =>
  fetch(`${f.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: b, signal });

/** Wait for the start of the next 1-second window, so a burst lands in one window. */
const nextWindow = () => new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 5));

describe('fake OpenAI server', () => {
  it('answers deterministically, counts by job key and records requests', async () => {
    fake = await FakeOpenAI.start();
    const b = body('hello world');
    const res = await post(fake, b);
    expect(res.status).toBe(200);
    const json = (await res.json()) as any;
    expect(json.object).toBe('chat.completion');
    expect(json.choices[0].message.content).toBe(answerFor(b));
    expect(json.usage.prompt_tokens).toBe(2);
    await post(fake, b);
    expect(fake.sentCount(jobKey(b))).toBe(2);
    expect(fake.sentCount(b)).toBe(2);
    expect(fake.duplicates()).toEqual([jobKey(b)]);
    expect(fake.requests.map((r) => r.attempt)).toEqual([1, 2]);
    expect(fake.answers.get(200)).toBe(2);
  });

  it('plays the script first, then the respond function, then the default', async () => {
    fake = await FakeOpenAI.start();
    fake.script(reply.serverError(503));
    fake.respond((r) => (r.json.messages[0].content === 'bad' ? reply.badRequest() : undefined));
    expect((await post(fake, body('x'))).status).toBe(503);
    expect((await post(fake, body('bad'))).status).toBe(400);
    expect((await post(fake, body('x'))).status).toBe(200);
  });

  it('enforces RPM per 1-second window; headers describe the per-minute budget', async () => {
    fake = await FakeOpenAI.start({ rpm: 300 }); // 5 per second, a budget of 300 refilling 5 per second
    // Start at the beginning of a window so all 8 land in the same one.
    await nextWindow();
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => post(fake!, body(`r${i}`))));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(3);
    const limited = results.find((r) => r.status === 429)!;
    expect(Number(limited.headers.get('retry-after-ms'))).toBeGreaterThan(0);
    expect(Number(limited.headers.get('retry-after-ms'))).toBeLessThanOrEqual(1000);
    expect(limited.headers.get('retry-after')).toBe('1');
    // the window is spent but the minute's budget is not: OpenAI's headers don't show the window
    expect(limited.headers.get('x-ratelimit-limit-requests')).toBe('300');
    expect(Number(limited.headers.get('x-ratelimit-remaining-requests'))).toBeGreaterThanOrEqual(295);
    expect(Number(limited.headers.get('x-ratelimit-remaining-requests'))).toBeLessThanOrEqual(296);
    // 5 used, refilling 5 per second: full again in about 1 s
    const reset = parseDuration(limited.headers.get('x-ratelimit-reset-requests'))!;
    expect(reset).toBeGreaterThan(700);
    expect(reset).toBeLessThanOrEqual(1000);
    expect(fake.rateLimited).toBe(3);
  });

  it('the per-minute budget drains, refills continuously, and says how long until it is full', async () => {
    // 2-minute windows allow 120: only the bucket (60, refilling 1 per second) can refuse here
    fake = await FakeOpenAI.start({ rpm: 60, windowMs: 120_000 });
    const first = await post(fake, body('b0'));
    expect(first.headers.get('x-ratelimit-remaining-requests')).toBe('59');
    expect(first.headers.get('x-ratelimit-reset-requests')).toMatch(/^(\d+ms|1s|0\.\d+s)$/);
    // The bucket refills 1 a second while we send, so count the answers up to the first 429
    // rather than expect it at exactly the 61st (a loaded machine sends slowly).
    let ok = 1;
    let empty = await post(fake, body('b1'));
    for (let i = 2; empty.status === 200 && i < 120; i++) {
      ok++;
      empty = await post(fake, body(`b${i}`));
    }
    expect(ok).toBeGreaterThanOrEqual(60);
    expect(empty.status).toBe(429);
    expect(empty.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(Number(empty.headers.get('retry-after-ms'))).toBeLessThanOrEqual(1000); // one request's refill
    const toFull = parseDuration(empty.headers.get('x-ratelimit-reset-requests'))!;
    expect(toFull).toBeGreaterThan(55_000);
    expect(toFull).toBeLessThanOrEqual(60_000);
    await new Promise((r) => setTimeout(r, 1100)); // one request's refill: time is what the limiter counts
    const refilled = await post(fake, body('over'));
    expect(refilled.status).toBe(200);
    expect(refilled.headers.get('x-ratelimit-remaining-requests')).toBe('0');
  });

  it('enforces TPM with the tokenizer estimate plus max_tokens', async () => {
    fake = await FakeOpenAI.start({ tpm: 6000 }); // 100 tokens per second
    await nextWindow();
    const a = await post(fake, body('hi', { max_tokens: 60 })); // 1 + 60
    const b = await post(fake, body('hi', { max_tokens: 50 })); // 61 + 51 > 100
    expect(a.status).toBe(200);
    expect(b.status).toBe(429);
    expect(a.headers.get('x-ratelimit-limit-tokens')).toBe('6000');
    expect(Number(a.headers.get('x-ratelimit-remaining-tokens'))).toBeGreaterThanOrEqual(5939);
    expect(Number(a.headers.get('x-ratelimit-remaining-tokens'))).toBeLessThan(5960);
    expect(a.headers.get('x-ratelimit-reset-tokens')).toMatch(/^\d+ms$/); // 61 tokens at 100/s: ~610ms
    expect(a.headers.get('x-ratelimit-limit-requests')).toBeNull();
  });

  it("sends no rate-limit headers and a bare 429 with headers: 'none'", async () => {
    fake = await FakeOpenAI.start({ rpm: 120, headers: 'none' }); // 2 per second
    await nextWindow();
    const results = await Promise.all(Array.from({ length: 3 }, (_, i) => post(fake!, body(`n${i}`))));
    expect(results.map((r) => r.status).sort()).toEqual([200, 200, 429]);
    for (const r of results) {
      const names = [...r.headers.keys()];
      expect(names.filter((n) => /ratelimit|retry-after/.test(n))).toEqual([]);
      const text = await r.text();
      expect(text).not.toMatch(/try again/i);
    }
  });

  it("sends Anthropic's headers with headers: 'anthropic'", async () => {
    fake = await FakeOpenAI.start({ rpm: 60, tpm: 60_000, headers: 'anthropic' });
    const res = await post(fake, body('a', { max_tokens: 99 }));
    expect(res.headers.get('anthropic-ratelimit-requests-limit')).toBe('60');
    expect(res.headers.get('anthropic-ratelimit-requests-remaining')).toBe('59');
    expect(res.headers.get('anthropic-ratelimit-tokens-remaining')).toBe('59900');
    const reset = Date.parse(res.headers.get('anthropic-ratelimit-requests-reset')!);
    expect(reset - Date.now()).toBeGreaterThan(0);
    expect(reset - Date.now()).toBeLessThanOrEqual(1000);
    expect(res.headers.get('x-ratelimit-remaining-requests')).toBeNull();
  });

  it('writes durations as OpenAI does, readable by llmq', () => {
    const cases: Array<[number, string]> = [
      [0, '0s'],
      [120, '120ms'],
      [1000, '1s'],
      [8640, '8.64s'],
      [90_500, '1m30.5s'],
      [360_000, '6m0s'],
      [3_720_000, '1h2m0s'],
    ];
    for (const [ms, text] of cases) {
      expect(openAiDuration(ms)).toBe(text);
      expect(parseDuration(text)).toBe(ms);
    }
  });

  it('hangs a reproducible share of requests, chosen by seed and arrival order', async () => {
    const hungIndexes = async (seed: number) => {
      const f = await FakeOpenAI.start({ hangRate: 0.3, seed });
      try {
        // arrival order among these varies; which indexes hang does not
        const gone = new AbortController();
        const sent = Promise.all(Array.from({ length: 40 }, (_, i) => post(f, body(`h${i}`), gone.signal).catch(() => null)));
        await f.waitForRequests(40);
        await waitFor(() => f.requests.every((r) => r.answered !== null), { what: 'the fake to answer or hang each of 40 requests' });
        gone.abort();
        await sent;
        return f.requests
          .filter((r) => r.answered === 'hang')
          .map((r) => r.index)
          .sort((x, y) => x - y);
      } finally {
        await f.close();
      }
    };
    const a = await hungIndexes(7);
    expect(a.length).toBeGreaterThan(4);
    expect(a.length).toBeLessThan(20);
    expect(await hungIndexes(7)).toEqual(a);
    expect(await hungIndexes(8)).not.toEqual(a);
  });

  it('draws uniform latencies around a mean, the same for the same request index', () => {
    const latency = uniformLatency(200, 50);
    const draws = Array.from({ length: 500 }, (_, i) => latency({ index: i + 1 } as FakeRequest));
    expect(Math.min(...draws)).toBeGreaterThanOrEqual(150);
    expect(Math.max(...draws)).toBeLessThanOrEqual(250);
    expect(Math.abs(draws.reduce((a, b) => a + b, 0) / draws.length - 200)).toBeLessThan(8);
    expect(latency({ index: 3 } as FakeRequest)).toBe(draws[2]);
  });

  it('tracks the concurrency high-water mark', async () => {
    fake = await FakeOpenAI.start({ latencyMs: 50 });
    await Promise.all(Array.from({ length: 6 }, (_, i) => post(fake!, body(`c${i}`))));
    expect(fake.maxInFlight).toBe(6);
    expect(fake.inFlight).toBe(0);
  });

  it('goes down (connections refused) and comes back on the same port', async () => {
    fake = await FakeOpenAI.start();
    const port = fake.port;
    await fake.down();
    await expect(post(fake, body('x'))).rejects.toThrow(/fetch failed/);
    await fake.up();
    expect(fake.port).toBe(port);
    expect((await post(fake, body('x'))).status).toBe(200);
  });

  it('cuts hanging requests when it goes down', async () => {
    fake = await FakeOpenAI.start();
    fake.script(reply.hang());
    const pending = post(fake, body('x'));
    await fake.waitForRequests(1);
    await fake.down();
    await expect(pending).rejects.toThrow();
  });
});
