import type { ProviderError } from './types.js';

/**
 * A connection refused, a host name that resolves to nothing or a resolver not answering, no route
 * to the host or its network: the request never left this machine, so nothing can have been billed,
 * and no provider failed (it is not an outage of theirs).
 */
const NEVER_LEFT = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|EHOSTUNREACH|ENETUNREACH/i;

/**
 * Of those, the ones that say the address is wrong rather than this machine offline: nobody listens
 * where the run sends. Not EAI_AGAIN (the resolver not answering: offline), nor the unreachable
 * routes (a network down).
 */
const NOBODY_LISTENS = /ECONNREFUSED|ENOTFOUND/;

/** The try failed before its request left this machine (NEVER_LEFT). */
export function neverLeft(error: Pick<ProviderError, 'reason' | 'message'>): boolean {
  return error.reason === 'network' && NEVER_LEFT.test(error.message);
}

/** A failure's words say nobody listens at the address (NOBODY_LISTENS): most often a mistyped --base-url or port. */
export function nobodyListens(detail: string): boolean {
  return NOBODY_LISTENS.test(detail);
}
