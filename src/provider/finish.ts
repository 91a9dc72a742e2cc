/**
 * How an answer ended, as the provider said in `choices[0].finish_reason` (`stop`, `length`,
 * `content_filter`, `tool_calls`), or `refusal` when the model declined and said why in
 * `message.refusal` (OpenAI reports those with `stop`). Null when the body does not say.
 *
 * The two that matter to a user are answers that are not the whole answer: `length` (cut off at
 * max_tokens) and a refusal or `content_filter`. Both are stored as done (the provider billed them,
 * and the same request would most likely end the same way), and both are marked where answers go.
 */
export type FinishReason = string;

/** The answer was cut off at max_tokens. */
export const CUT_OFF = 'length';

/** Not an answer to the question: the model declined, or the provider's filter stopped it. */
export function isRefusal(finish: FinishReason | null): boolean {
  return finish === 'refusal' || finish === 'content_filter';
}

/** Which of a run's counts (`cutOff`, `refused`) an answer that ended so goes in; null for a whole answer. */
export function incompleteKind(finish: FinishReason | null): 'cutOff' | 'refused' | null {
  return finish === CUT_OFF ? 'cutOff' : isRefusal(finish) ? 'refused' : null;
}

/**
 * Which of a run's counts an answer stored goes in: `incompleteKind`'s, or `empty` for one that ended
 * by itself (`stop`) with no text at all (billed, and most often a gateway that dropped the content); null
 * for an everyday answer.
 */
export function answerKind(finish: FinishReason | null, output: string): 'cutOff' | 'refused' | 'empty' | null {
  return incompleteKind(finish) ?? (finish === 'stop' && output === '' ? 'empty' : null);
}

/** The finish of a parsed chat completion body. */
export function finishOf(json: unknown): FinishReason | null {
  const choice = (json as { choices?: Array<{ finish_reason?: unknown; message?: { content?: unknown; refusal?: unknown } }> })
    ?.choices?.[0];
  const message = choice?.message;
  const declined = typeof message?.refusal === 'string' && message.refusal !== '' && (message.content ?? '') === '';
  if (declined) return 'refusal';
  return typeof choice?.finish_reason === 'string' ? choice.finish_reason : null;
}

/** Looks like the everyday answer: it stopped by itself and has no refusal (then no parse is needed). */
const STOPPED = /"finish_reason"\s*:\s*"stop"/;
const REFUSAL_TEXT = /"refusal"\s*:\s*"/;

/**
 * The finish of a stored response body (null when there is none or it is not JSON). Most bodies are
 * told apart by two searches; only the rest is parsed: an export reads a million of them.
 */
export function finishReasonOf(body: string | null): FinishReason | null {
  if (body === null || body === '') return null;
  // one choice only: with n > 1, another choice's "stop" says nothing of the first's
  const first = body.indexOf('"finish_reason"');
  if (first >= 0 && first === body.lastIndexOf('"finish_reason"') && STOPPED.test(body) && !REFUSAL_TEXT.test(body)) return 'stop';
  try {
    return finishOf(JSON.parse(body));
  } catch {
    return null;
  }
}

/** What the error of a job failed for an answer cut off at max_tokens says (`checkAnswer`): `status` and the run's summary find such failures by it. */
export const CUT_OFF_TEXT = 'cut off at max_tokens';
