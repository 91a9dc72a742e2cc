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

/** What a run says the first time an answer of each kind comes (`answerKind`), online and in the batch lane. */
export const INCOMPLETE_WARNING = {
  cutOff:
    'answers are being cut off at max_tokens (finish_reason "length"): they are kept as done. llmq export marks ' +
    "each (finish_reason); the run's summary gives the command that asks only those again with more room.",
  refused:
    'the model declined some requests (a refusal, or the content filter): they are kept as done, the refusal as ' +
    'their output. llmq export marks each (finish_reason).',
  empty:
    'some answers are empty: no text, though they ended by themselves (finish_reason "stop"). They are kept as done, and were ' +
    'billed. A proxy or gateway that drops the content most often does it, or a prompt that leaves the model nothing to say; ' +
    'llmq export shows them with output "".',
  /** cutOff, of the offline mock: its stand-ins (a summary of the document) are cut as a provider cuts, and are no model's length. */
  mockCutOff:
    'the offline mock\'s stand-in answers are cut off at max_tokens (finish_reason "length"), as a provider cuts them: ' +
    "they are kept as done. A real model's answer may fit where the mock's summary of the document does not.",
} as const;
