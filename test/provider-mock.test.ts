import { describe, expect, it } from 'vitest';
import { MockProvider, mockAnswer } from '../src/provider/mock.js';
import { ProviderError } from '../src/provider/types.js';
import { canonicalJson } from '../src/request.js';
import { countTokens } from 'gpt-tokenizer';

const live = () => new AbortController().signal;
const request = (text: string) =>
  canonicalJson({
    model: 'gpt-4o-mini',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: text },
    ],
  });

describe('MockProvider', () => {
  it('answers deterministically with labelled output, realistic usage and an OpenAI-shaped body', async () => {
    const p = new MockProvider({ latencyMs: 0, now: () => 1_700_000_000_000 });
    const text = 'The quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat';
    const a = await p.complete(request(text), { signal: live() });
    const b = await new MockProvider({ latencyMs: 0, now: () => 1_700_000_000_000 }).complete(request(text), { signal: live() });
    expect(a.output).toBe('[mock] Summary of: The quick brown fox jumps over the lazy dog while the cat …');
    expect(b).toEqual(a);
    expect(a.usage).toEqual({ promptTokens: countTokens('Be brief.') + countTokens(text), completionTokens: countTokens(a.output) });
    const body = JSON.parse(a.body);
    expect(body).toMatchObject({
      object: 'chat.completion',
      created: 1_700_000_000,
      model: 'gpt-4o-mini',
      choices: [{ index: 0, message: { role: 'assistant', content: a.output }, finish_reason: 'stop' }],
    });
    expect(body.usage.total_tokens).toBe(a.usage.promptTokens + a.usage.completionTokens);
    expect(mockAnswer({ messages: [{ role: 'user', content: [{ type: 'text', text: 'short one' }] }] })).toBe(
      '[mock] Summary of: short one',
    );
  });

  it('stops at max_tokens as a provider does (finish_reason length), and quotes no more than 200 characters of one long word', async () => {
    const p = new MockProvider({ latencyMs: 0 });
    const long = await p.complete(request('x'.repeat(40_000)), { signal: live() });
    expect(long.output).toBe(`[mock] Summary of: ${'x'.repeat(200)} …`);
    const body = (text: string, maxTokens: number) =>
      JSON.stringify({ model: 'gpt-4o-mini', max_tokens: maxTokens, messages: [{ role: 'user', content: text }] });
    const cut = await p.complete(body('The quick brown fox jumps over the lazy dog while the cat sleeps', 4), { signal: live() });
    expect(cut.usage.completionTokens).toBeLessThanOrEqual(4);
    expect(cut.usage.completionTokens).toBe(countTokens(cut.output));
    expect(JSON.parse(cut.body).choices[0].finish_reason).toBe('length');
    expect('[mock] Summary of: The quick brown fox'.startsWith(cut.output)).toBe(true);
    const whole = await p.complete(body('short one', 100), { signal: live() });
    expect(whole.output).toBe('[mock] Summary of: short one');
    expect(JSON.parse(whole.body).choices[0].finish_reason).toBe('stop');
  });

  it('simulates latency with seeded jitter', async () => {
    const p = new MockProvider({ latencyMs: 100, jitter: 0.5 });
    const started = Date.now();
    await p.complete(request('x'), { signal: live() });
    const took = Date.now() - started;
    expect(took).toBeGreaterThanOrEqual(45);
    expect(took).toBeLessThan(1000);
  });

  it('fails a seeded, reproducible fraction of tries with a retryable 500, and every request succeeds eventually', async () => {
    const outcomes = async (seed: number) => {
      const p = new MockProvider({ latencyMs: 0, failureRate: 0.3, seed });
      const seen: string[] = [];
      for (let i = 0; i < 200; i++) {
        for (let tries = 0; ; tries++) {
          try {
            await p.complete(request(`doc ${i}`), { signal: live() });
            seen.push(`${i}:${tries}`);
            break;
          } catch (err) {
            expect(err).toBeInstanceOf(ProviderError);
            expect(err).toMatchObject({ scope: 'retryable', reason: 'server', status: 500 });
            expect(tries).toBeLessThan(20);
          }
        }
      }
      return seen;
    };
    const one = await outcomes(7);
    expect(await outcomes(7)).toEqual(one);
    expect(await outcomes(8)).not.toEqual(one);
    const firstTryFailures = one.filter((s) => !s.endsWith(':0')).length;
    expect(firstTryFailures).toBeGreaterThan(30);
    expect(firstTryFailures).toBeLessThan(90);
  });

  it('rejects with the signal reason when aborted', async () => {
    const p = new MockProvider({ latencyMs: 10_000 });
    const controller = new AbortController();
    const pending = p.complete(request('x'), { signal: controller.signal });
    const reason = new Error('stop');
    setTimeout(() => controller.abort(reason), 20);
    await expect(pending).rejects.toBe(reason);
  });
});

describe('MockProvider in a fresh process', () => {
  it('has loaded its tokenizer once made, so no request it answers carries the load (about 0.4 s) in its latency', async () => {
    const { spawnSync } = await import('node:child_process');
    const { pathToFileURL } = await import('node:url');
    const { join } = await import('node:path');
    const mock = pathToFileURL(join(import.meta.dirname, '../dist/provider/mock.js')).href;
    const tokenizerLoaded = "Object.keys(createRequire(import.meta.url).cache).some((k) => k.includes('gpt-tokenizer'))";
    const script = `import { createRequire } from 'node:module';
      const { MockProvider } = await import(${JSON.stringify(mock)});
      const before = ${tokenizerLoaded};
      new MockProvider({ latencyMs: 0 });
      console.log(JSON.stringify({ before, after: ${tokenizerLoaded} }));`;
    const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ before: false, after: true });
  });
});
