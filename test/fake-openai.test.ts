import { afterEach, describe, expect, it } from 'vitest';
import { answerFor, FakeOpenAI, reply } from './helpers/fake-openai.js';
import { canonicalJson, jobKey } from '../src/request.js';

let fake: FakeOpenAI | undefined;
afterEach(async () => {
  await fake?.close();
  fake = undefined;
});

const body = (text: string, extra: Record<string, unknown> = {}) =>
  canonicalJson({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: text }], ...extra });

const post = (f: FakeOpenAI, b: string) =>
  fetch(`${f.url}/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: b });

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

  it('enforces RPM per 1-second window with 429 headers', async () => {
    fake = await FakeOpenAI.start({ rpm: 300 }); // 5 per second
    // Start at the beginning of a window so all 8 land in the same one.
    await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 5));
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => post(fake!, body(`r${i}`))));
    const statuses = results.map((r) => r.status).sort();
    expect(statuses.filter((s) => s === 200)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(3);
    const limited = results.find((r) => r.status === 429)!;
    expect(Number(limited.headers.get('retry-after-ms'))).toBeGreaterThan(0);
    expect(Number(limited.headers.get('retry-after-ms'))).toBeLessThanOrEqual(1000);
    expect(limited.headers.get('retry-after')).toBe('1');
    expect(limited.headers.get('x-ratelimit-remaining-requests')).toBe('0');
    expect(limited.headers.get('x-ratelimit-reset-requests')).toMatch(/^\d+ms$/);
    expect(fake.rateLimited).toBe(3);
  });

  it('enforces TPM with the tokenizer estimate plus max_tokens', async () => {
    fake = await FakeOpenAI.start({ tpm: 6000 }); // 100 tokens per second
    await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 5));
    const a = await post(fake, body('hi', { max_tokens: 60 })); // 1 + 60
    const b = await post(fake, body('hi', { max_tokens: 50 })); // 61 + 51 > 100
    expect(a.status).toBe(200);
    expect(b.status).toBe(429);
    expect(b.headers.get('x-ratelimit-remaining-tokens')).toBe('39');
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
