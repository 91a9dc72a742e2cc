import { MockProvider } from '../../src/provider/mock.js';
import type { CompletionResult, Provider } from '../../src/provider/types.js';
import { jobKey } from '../../src/request.js';

/**
 * The mock provider with its first `held` requests held until `release`: a run with requests out,
 * for as long as a test needs (with `padding`, answers that long more). `sent` is the job key of each request, in order; `firstSent`
 * resolves when the `held`-th request has arrived.
 */
export function gatedProvider(
  held = 1,
  o: { padding?: number } = {},
): { provider: Provider; sent: string[]; firstSent: Promise<void>; release: () => void } {
  const mock = new MockProvider({ latencyMs: 1 });
  const sent: string[] = [];
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let firstSentNow!: () => void;
  const firstSent = new Promise<void>((r) => (firstSentNow = r));
  const provider: Provider = {
    name: 'mock',
    async complete(body, options): Promise<CompletionResult> {
      sent.push(jobKey(body));
      if (sent.length <= held) {
        if (sent.length === held) firstSentNow();
        await gate;
      }
      const answer = await mock.complete(body, options);
      // answers of `padding` more characters: each needs new pages of the database
      return o.padding ? { ...answer, output: answer.output + ' '.repeat(o.padding) } : answer;
    },
  };
  return { provider, sent, firstSent, release };
}
