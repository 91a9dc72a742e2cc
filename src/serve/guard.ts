import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

/** The header actions carry the token in. Never a URL parameter: URLs end up in history and logs. */
export const TOKEN_HEADER = 'x-llmq-token';

/** A fresh action token: 32 random bytes, hex. */
export function newToken(): string {
  return randomBytes(32).toString('hex');
}

export type Refusal = { readonly status: 401 | 403; readonly message: string } | null;

/**
 * Who may talk to the dashboard. `origins` are the dashboard's own (`http://127.0.0.1:8787`, and
 * `http://localhost:8787` when bound to loopback).
 *
 * - A request whose Origin is someone else's is refused: another site open in the same browser
 *   could otherwise post to 127.0.0.1 (a "simple" cross-site POST needs no preflight).
 * - A request whose Host is not the dashboard's is refused: that is DNS rebinding, a foreign name
 *   pointed at 127.0.0.1 so that the page reading the answers counts as same-origin.
 */
export function refuseForeign(req: IncomingMessage, origins: ReadonlySet<string> | 'any-host'): Refusal {
  const host = req.headers.host;
  // Bound to every interface (--host 0.0.0.0), the dashboard has no one name: the user chose to
  // expose it, so any Host goes, but the Origin must still be the address the page was loaded from.
  const own = origins === 'any-host' ? new Set(host ? [`http://${host}`] : []) : origins;
  const origin = req.headers.origin;
  if (origin !== undefined && !own.has(origin)) {
    return { status: 403, message: `requests from ${origin} are refused: only the dashboard's own page may call it` };
  }
  if (host === undefined || !own.has(`http://${host}`)) {
    return { status: 403, message: `Host ${host ?? '(none)'} is not this dashboard's address` };
  }
  return null;
}

/** Actions need the token printed at start, compared in constant time. */
export function refuseWithoutToken(req: IncomingMessage, token: string): Refusal {
  const given = req.headers[TOKEN_HEADER];
  if (typeof given !== 'string' || given === '') {
    return { status: 401, message: `this action needs the token llmq serve printed at start (header ${TOKEN_HEADER})` };
  }
  const a = Buffer.from(given);
  const b = Buffer.from(token);
  if (a.length !== b.length || !timingSafeEqual(a, b)) {
    return { status: 401, message: 'wrong token: use the one llmq serve printed at start' };
  }
  return null;
}

/** The origins a dashboard listening on host:port is reached at. */
export function ownOrigins(host: string, port: number): Set<string> | 'any-host' {
  if (host === '0.0.0.0' || host === '::') return 'any-host';
  const hosts = new Set([host.includes(':') ? `[${host}]` : host]);
  if (host === '127.0.0.1' || host === 'localhost' || host === '::1') {
    for (const h of ['127.0.0.1', 'localhost', '[::1]']) hosts.add(h);
  }
  return new Set([...hosts].map((h) => `http://${h}:${port}`));
}
