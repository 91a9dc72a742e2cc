/**
 * A LIMIT bound per call, written so SQLite does not plan with its value. Since 3.47 SQLite reads
 * the value bound to a bare `LIMIT ?` while it plans, and so marks the statement to be prepared
 * again whenever that parameter is bound. better-sqlite3 binds every parameter on every call, so
 * such a statement was compiled anew on each use: for the claim (an UPDATE with its triggers), about
 * 700,000 instructions per claim, a fifth of the store's work per job at 32 jobs a claim. An
 * expression is not a bare parameter: its value is read when the statement runs.
 */
export function unplannedLimit(parameter: string): string {
  return `(${parameter} + 0)`;
}
