import type { Usage } from '../store/types.js';
import { budgetedCompletionTokens, countTextTokens, messageTokens } from '../provider/tokens.js';
import type { PriceTable } from './price-table.js';
import { usdValue } from './usd-value.js';

/** USD for this usage, or null when the model's price is unknown. */
export function costOf(model: string, usage: Usage, table: PriceTable): number | null {
  return usdValue(table.lookup(model)?.cost(usage) ?? null);
}

interface RequestLike {
  readonly messages?: unknown;
  readonly max_tokens?: unknown;
  readonly max_completion_tokens?: unknown;
}

/** What to do about a job that sets no max_tokens under --budget, for every message that meets one. */
export const NO_MAX_TOKENS_FIX =
  "Set max_tokens in the request (enqueue documents with --max-tokens; a batch line's body is sent as it is: add max_tokens to it), or run without --budget.";

/** The same, said of a job a run failed for it: failed, it goes again only once put back. */
export const NO_MAX_TOKENS_FIX_FAILED =
  "Set max_tokens in the request (enqueue documents with --max-tokens; a batch line's body is sent as it is: add max_tokens to it), " +
  'or send it without a cap: llmq retry-failed --error "no max_tokens", then llmq run without --budget.';

/**
 * The most a request can be billed for: every token it could be charged for on the way in, and
 * its whole `max_tokens` on the way out. Providers count a little more than the message text
 * (role markers, separators, tools), so the prompt side counts the text of the messages plus the
 * tokens of the request's JSON without them, which is always more than that framing.
 * `completionTokens` is null when the request sets no limit on its answer: then there is no
 * worst case.
 */
export function worstCaseUsage(requestJson: string): { promptTokens: number; completionTokens: number | null } {
  let request: RequestLike;
  try {
    request = JSON.parse(requestJson) as RequestLike;
  } catch {
    return { promptTokens: countTextTokens(requestJson), completionTokens: null };
  }
  const framing = Array.isArray(request.messages)
    ? { ...request, messages: request.messages.map((m: unknown) => (m && typeof m === 'object' ? { ...m, content: '' } : m)) }
    : request;
  const completion = budgetedCompletionTokens(request);
  return {
    // the framing's JSON holds the schema and tools: they are counted there, once
    promptTokens: messageTokens(request) + countTextTokens(JSON.stringify(framing)),
    completionTokens: completion > 0 ? completion : null,
  };
}
