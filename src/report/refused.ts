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
