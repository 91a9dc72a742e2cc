import type { ProviderError } from '../provider/types.js';
import { neverLeft } from '../provider/unreachable.js';

/**
 * Whether a failed try may still be billed: its request reached the provider and no answer says
 * what it cost. Providers bill work they did, answered or not: a timeout, a connection cut after
 * the request was sent, a 200 whose body was cut short. An error answer (4xx, 5xx, 429, or at 200 an
 * HTML page or an error object: `unbilled`) is not billed; a refused connection or this machine's
 * own limit never sent anything.
 */
export function mayBeBilled(error: ProviderError): boolean {
  switch (error.reason) {
    case 'timeout':
      return true;
    case 'bad_body':
      return !error.unbilled;
    case 'network':
      return !neverLeft(error);
    default:
      return false;
  }
}
