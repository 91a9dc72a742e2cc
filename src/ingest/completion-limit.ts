/**
 * OpenAI's reasoning models (o1, o3, o4-mini, gpt-5 and its kin, also under an `openai/` prefix, and
 * fine-tuned: `ft:o4-mini-...`)
 * refuse `max_tokens` with a 400 ("Use 'max_completion_tokens' instead"): every job would fail.
 * OpenAI's other models take either name; servers that imitate the API (vLLM, Ollama, older Azure
 * versions) may know only `max_tokens`, so it stays the name for every other model.
 */
const REFUSES_MAX_TOKENS = /^(?:openai\/)?(?:ft:)?(?:o\d+|gpt-5)(?:[.:-]|$)/i;

/** The request's name for --max-tokens with `model`: `max_completion_tokens` where `max_tokens` is refused. */
export function completionLimitField(model: string): 'max_tokens' | 'max_completion_tokens' {
  return REFUSES_MAX_TOKENS.test(model) ? 'max_completion_tokens' : 'max_tokens';
}

/** Whether `model` thinks before it answers, its reasoning counted in the limit: gpt-5's chat model does not. */
export function reasonsBeforeAnswering(model: string): boolean {
  return completionLimitField(model) === 'max_completion_tokens' && !/-chat(?:[.-]|$)/i.test(model);
}
