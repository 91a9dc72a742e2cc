import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { hostname } from 'node:os';

/** The header actions carry the token in. Never a URL parameter: URLs end up in history and logs. */
export const TOKEN_HEADER = 'x-llmq-token';

/** A fresh action token: 32 random bytes, hex. */
export function newToken(): string {
  return randomBytes(32).toString('hex');
}

export type Refusal = { readonly status: 401 | 403; readonly message: string } | null;

/**
 * The names and port the dashboard answers to: what it was bound to (with every loopback name when
 * that is loopback), and the names given with `--allow-host`. Bound to every interface (0.0.0.0,
 * `::`), it has no one name: any IP address reaches it, and so do `localhost` and this machine's own
 * name, but no other name does unless allowed. A name is what DNS rebinding needs: an attacker's
 * domain pointed at this machine, so that the attacker's page counts as the dashboard's own origin.
 */
export class OwnAddress {
  readonly #port: string;
  readonly #names = new Set<string>();
  readonly #allowed: ReadonlySet<string>;
  readonly #anyIp: boolean;

  constructor(host: string, port: number, o: { allowHosts?: readonly string[]; machineName?: string } = {}) {
    this.#port = String(port);
    this.#anyIp = host === '0.0.0.0' || host === '::';
    this.#allowed = new Set((o.allowHosts ?? []).map(normalName));
    if (this.#anyIp) {
      this.#names.add('localhost');
      this.#names.add(normalName(o.machineName ?? hostname()));
    } else {
      this.#names.add(normalName(host));
      if (LOOPBACK.has(normalName(host))) for (const h of LOOPBACK) this.#names.add(h);
    }
  }

  /** A Host header (`name:port`) that names this dashboard. */
  isOwnHost(host: string): boolean {
    const url = parsed(`http://${host}`);
    return url !== null && url.username === '' && url.pathname === '/' && this.#isOwn(url);
  }

  /** The Origin of a page this dashboard served (or, for an allowed name, a proxy in front of it served). */
  isOwnOrigin(origin: string): boolean {
    const url = parsed(origin);
    if (url === null) return false;
    if (url.protocol === 'https:') return this.#allowed.has(url.hostname);
    return url.protocol === 'http:' && this.#isOwn(url);
  }

  #isOwn(url: URL): boolean {
    const name = url.hostname;
    // an allowed name may sit behind a proxy on another port
    if (this.#allowed.has(name)) return true;
    if ((url.port || '80') !== this.#port) return false;
    return this.#names.has(name) || (this.#anyIp && isIP(name.replace(/^\[|\]$/g, '')) !== 0);
  }
}

const LOOPBACK: ReadonlySet<string> = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** A name as the URL parser spells a hostname: lower case, an IPv6 address in brackets. */
function normalName(name: string): string {
  const n = name.trim().toLowerCase();
  return isIP(n) === 6 ? `[${n}]` : n;
}

function parsed(text: string): URL | null {
  try {
    return new URL(text);
  } catch {
    return null;
  }
}

/**
 * Who may talk to the dashboard.
 *
 * - A request whose Origin is someone else's is refused: another site open in the same browser
 *   could otherwise post to 127.0.0.1 (a "simple" cross-site POST needs no preflight).
 * - A request whose Host is not the dashboard's is refused: that is DNS rebinding (`OwnAddress`).
 */
export function refuseForeign(req: IncomingMessage, own: OwnAddress): Refusal {
  const origin = req.headers.origin;
  if (origin !== undefined && !own.isOwnOrigin(origin)) {
    return { status: 403, message: `requests from ${origin} are refused: only the dashboard's own page may call it` };
  }
  const host = req.headers.host;
  if (host === undefined || !own.isOwnHost(host)) {
    const name = host === undefined ? null : parsed(`http://${host}`)?.hostname;
    return {
      status: 403,
      message:
        `Host ${host ?? '(none)'} is not this dashboard's address, so the request is refused (a foreign name pointed at ` +
        `this machine is how DNS rebinding reads it)${name ? `; if ${name} does name this machine, start llmq serve with --allow-host ${name}` : ''}`,
    };
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
