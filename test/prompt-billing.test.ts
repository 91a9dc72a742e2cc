import { describe, expect, it } from 'vitest';
import { PromptBilling } from '../src/scheduler/run-money.js';

describe('PromptBilling: what to reserve for a prompt, from what answers were billed', () => {
  it('before any answer, the count', () => {
    expect(new PromptBilling().worst(500)).toBe(500);
  });

  it("a proxy's own text on every prompt: the count and those tokens, at any length", () => {
    const b = new PromptBilling();
    b.learn(26, 2026); // "hi", 78 times its count
    // not 78 times a document of 2,029 tokens (158,262), which stopped a $100 run after $2
    expect(b.worst(2029)).toBe(4029);
    expect(b.worst(20)).toBe(2020);
    b.learn(2029, 4029);
    expect(b.worst(2029)).toBeGreaterThanOrEqual(4029);
    expect(b.worst(2029)).toBeLessThan(4100);
  });

  it('another tokenizer counting ten times as many: the ratio, for prompts as long as those answered or shorter', () => {
    const b = new PromptBilling();
    b.learn(2000, 20_000);
    expect(b.worst(2000)).toBe(20_000);
    // of the same size class (1,024 to 2,047): the 18,000 an answer of it added holds too
    expect(b.worst(1500)).toBe(19_500);
    expect(b.worst(100)).toBe(1000);
    // half again as long as any answered: the ratio of the nearest still applies
    expect(b.worst(3000)).toBe(30_000);
  });

  it('a tokenizer counting 1.3 times as many, prompts of every size: what a long one added is not put on a short one', () => {
    const b = new PromptBilling();
    for (const counted of [400, 1500, 3000, 60_000]) b.learn(counted, Math.round(counted * 1.3));
    // not 200 + 18,000 (what the 60,000-token prompt added)
    expect(b.worst(200)).toBe(260);
    expect(b.worst(1500)).toBe(1950);
    expect(b.worst(60_000)).toBe(78_000);
  });

  it('learns nothing from answers billed at or under the count', () => {
    const b = new PromptBilling();
    b.learn(100, 90);
    b.learn(100, 100);
    b.learn(0, 50);
    expect(b.worst(100)).toBe(100);
  });
});
