/**
 * Whether a stored response body is an answer cut off at max_tokens, loaded when first asked:
 * src/provider/finish.ts is the provider's, which `status` (and every store read) does not load.
 */
export async function cutOffReader(): Promise<(response: string | null) => boolean> {
  const { CUT_OFF, finishReasonOf } = await import('../provider/finish.js');
  return (response) => finishReasonOf(response) === CUT_OFF;
}
