import { CUT_OFF_TEXT } from '../provider/finish.js';

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

/**
 * Of `failures` (grouped by error), the jobs a run failed without sending them (`not sent: ...`: no
 * max_tokens, or too long for the budget left): the same run fails them the same way; their error says what to change.
 */
export function notSentCount(failures: ReadonlyArray<{ readonly error: string; readonly count: number }>): number {
  return failures.filter((f) => f.error.startsWith('not sent: ')).reduce((sum, f) => sum + f.count, 0);
}

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

/** A retry-failed to propose: for which failed jobs (`all` of them, or `count`), and the command. */
export interface RetryHint {
  /** `room`: the cut-off ones, with --max-tokens; `retry`: the others, as they were. */
  readonly kind: 'room' | 'retry';
  readonly count: number;
  readonly all: boolean;
  readonly command: string;
}

/**
 * What sends the failed jobs again, in order: the cut-off ones with room first (sent as they were,
 * they are cut off again), then the others, as they were (a plain retry-failed leaves the cut-off
 * ones), leaving out those the provider refused as sent (they fail the same way): tries that ran out
 * say "gave up after", and when other reasons are among the rest, or some are not listed
 * (`failures` holds the top groups), --error TEXT is the tool.
 * Empty when every failure was refused as sent. `status` and the run's summary say the same.
 */
export function retryHints(failures: ReadonlyArray<{ readonly error: string; readonly count: number }>, failed: number): RetryHint[] {
  // neither the refused as sent nor the ones not sent go again as they are: both end the same way
  const refused = refusedCount(failures) + notSentCount(failures);
  const cutOff = cutOffCount(failures);
  const listed = failures.reduce((sum, f) => sum + f.count, 0);
  const hints: RetryHint[] = [];
  const roomier = roomierRetryCommand(failures);
  if (roomier) hints.push({ kind: 'room', count: cutOff, all: cutOff === failed, command: roomier });
  const others = failed - refused - cutOff;
  if (others > 0) {
    const ranOut =
      listed === failed &&
      failures.every(
        (f) =>
          refusedAsSent(f.error) || f.error.startsWith('not sent: ') || f.error.includes(CUT_OFF_TEXT) || f.error.includes('gave up after'),
      );
    // a plain retry-failed leaves the cut-off ones failed: only refusals need it narrowed
    const only = refused === 0 ? '' : ranOut ? ' --error "gave up after"' : ' --error TEXT';
    hints.push({ kind: 'retry', count: others, all: only === '', command: `llmq retry-failed${only}` });
  }
  return hints;
}
