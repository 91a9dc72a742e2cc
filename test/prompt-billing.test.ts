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
    // shorter: the most any answer added (18,000) is the larger, and holds whichever the cause
    expect(b.worst(1500)).toBe(19_500);
    expect(b.worst(100)).toBeGreaterThanOrEqual(1000);
    // half again as long as any answered: the ratio of the nearest still applies
    expect(b.worst(3000)).toBe(30_000);
  });

  it('learns nothing from answers billed at or under the count', () => {
    const b = new PromptBilling();
    b.learn(100, 90);
    b.learn(100, 100);
    b.learn(0, 50);
    expect(b.worst(100)).toBe(100);
  });
});
