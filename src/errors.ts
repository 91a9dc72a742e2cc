/**
 * Errors a user can act on. The CLI prints `message` (one line, ends with the fix) and exits with
 * `exitCode`; anything that is not an LlmqError is a bug and gets a stack trace.
 */
export class LlmqError extends Error {
  readonly exitCode: number;
  constructor(message: string, options: { exitCode?: number; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = 'LlmqError';
    this.exitCode = options.exitCode ?? 1;
  }
}

/** A flag or config value is wrong: names the option, the value and what was expected. */
export class UsageError extends LlmqError {
  constructor(message: string) {
    super(message, { exitCode: 1 });
    this.name = 'UsageError';
  }
}

/** The database cannot be used (newer schema, not an llmq file, unreachable server). */
export class StoreError extends LlmqError {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { exitCode: 1, cause: options.cause });
    this.name = 'StoreError';
  }
}

/**
 * The queue a command opened is not at its place any more (its file removed, or another made there):
 * what it writes from now on goes where nothing reads it. A run stops at once on it.
 */
export class QueueGoneError extends LlmqError {
  constructor(message: string) {
    super(message, { exitCode: 1 });
    this.name = 'QueueGoneError';
  }
}

export const EXIT = Object.freeze({
  OK: 0,
  ERROR: 1,
  PARTIAL: 2,
  /** `llmq run` stopped by --budget or --budget-total: the jobs it did not take stay pending. */
  BUDGET: 3,
  SIGNAL: 130,
});
