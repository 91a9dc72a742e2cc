/**
 * A failure the provider gave for the request as it was (400, 404, 413, 422, too long, a 403 for one
 * model): the same request gets it again. Not 408/409 (retried as 5xx), 401 (a key revoked since) or
 * 402 (credit ran out): retry-failed is their fix once the key or account is. Nor tries that ran out.
 */
export function refusedAsSent(error: string): boolean {
  return /^HTTP 4\d\d:/.test(error) && !/^HTTP 40[1289]:/.test(error);
}

/** Of `failures` (grouped by error), the jobs `refusedAsSent`. */
export function refusedCount(failures: ReadonlyArray<{ readonly error: string; readonly count: number }>): number {
  return failures.filter((f) => refusedAsSent(f.error)).reduce((sum, f) => sum + f.count, 0);
}

/** What the error of a job failed for an answer cut off at max_tokens says (src/provider/structured-output.ts). */
export const CUT_OFF_TEXT = 'cut off at max_tokens';

/** Of `failures` (grouped by error), the jobs whose answer was cut off at max_tokens: sent as they were, most likely cut off again. */
export function cutOffCount(failures: ReadonlyArray<{ readonly error: string; readonly count: number }>): number {
  return failures.filter((f) => f.error.includes(CUT_OFF_TEXT)).reduce((sum, f) => sum + f.count, 0);
}

/**
 * The command that sends the cut-off jobs of `failures` again with room: `retry-failed --max-tokens` at
 * the highest limit their errors propose (twice what each had), or null when none is cut off.
 */
export function roomierRetryCommand(failures: ReadonlyArray<{ readonly error: string }>): string | null {
  let most: number | null = null;
  for (const f of failures) {
    if (!f.error.includes(CUT_OFF_TEXT)) continue;
    const proposed = /--max-tokens (\d+)/.exec(f.error);
    most = Math.max(most ?? 0, proposed ? Number(proposed[1]) : 4096);
  }
  return most === null ? null : `llmq retry-failed --error "cut off" --max-tokens ${most}`;
}
