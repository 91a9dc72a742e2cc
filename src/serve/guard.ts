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
 * The names the dashboard answers to: what it was bound to (with every loopback name when that is
 * loopback), and the names given with `--allow-host`. Bound to every interface (0.0.0.0, `::`), it
 * has no one name: any IP address reaches it, and so do `localhost` and this machine's own name, but
 * no other name does unless allowed. A name is what DNS rebinding needs: an attacker's domain pointed
 * at this machine, so that the attacker's page counts as the dashboard's own origin. The port is not
 * checked: rebinding does not need another one, and a forwarded port (`ssh -L`, `docker -p`,
 * `kubectl port-forward`) reaches the dashboard by another.
 */
export class OwnAddress {
  readonly #names = new Set<string>();
  readonly #allowed: ReadonlySet<string>;
  readonly #anyIp: boolean;

  constructor(host: string, o: { allowHosts?: readonly string[]; machineName?: string } = {}) {
    this.#anyIp = host === '0.0.0.0' || host === '::';
    this.#allowed = new Set((o.allowHosts ?? []).map(hostName));
    if (this.#anyIp) {
      this.#names.add('localhost');
      this.#names.add(hostName(o.machineName ?? hostname()));
    } else {
      this.#names.add(hostName(host));
      if (LOOPBACK.has(hostName(host))) for (const h of LOOPBACK) this.#names.add(h);
    }
  }

  /** A Host header (`name:port`) that names this dashboard, whatever the port. */
  isOwnHost(host: string): boolean {
    const url = parsed(`http://${host}`);
    return url !== null && url.username === '' && url.password === '' && url.pathname === '/' && this.isOwnName(url.hostname);
  }

  /** A hostname as the URL parser spells it (lower case, IPv6 in brackets) that names this dashboard. */
  isOwnName(name: string): boolean {
    return this.#allowed.has(name) || this.#names.has(name) || (this.#anyIp && isIpName(name));
  }

  /**
   * The Origin of a page that may call: one loaded from where the request was sent (`host`, an own
   * name by isOwnHost), or from an allowed name (a proxy in front, `https` too, any port).
   */
  isOwnOrigin(origin: string, host: string | undefined): boolean {
    const url = parsed(origin);
    if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) return false;
    if (this.#allowed.has(url.hostname)) return true;
    return host !== undefined && url.protocol === 'http:' && url.origin === parsed(`http://${host}`)?.origin;
  }
}

const LOOPBACK: ReadonlySet<string> = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** A hostname as the URL parser spells it that is an IP address (an IPv6 one in brackets). */
function isIpName(name: string): boolean {
  return isIP(name.replace(/^\[|\]$/g, '')) !== 0;
}

/** A name or address given alone (an IPv6 one without brackets) as the host of a URL, or null. */
function asHost(nameOrAddress: string): URL | null {
  return parsed(`http://${isIP(nameOrAddress) === 6 ? `[${nameOrAddress}]` : nameOrAddress}`);
}

/**
 * A name or address as the URL parser spells a hostname: lower case, an IPv6 address in brackets
 * and in its short form (`::ffff:127.0.0.1` is `[::ffff:7f00:1]` in a Host header too).
 */
export function hostName(name: string): string {
  const n = name.trim();
  return asHost(n)?.hostname ?? n.toLowerCase();
}

/** What `--allow-host` takes: a bare host name or address, no scheme, port, path or user. */
export function isBareHostName(value: string): boolean {
  const v = value.trim();
  if (v === '' || v.includes('://')) return false;
  const url = asHost(v);
  return url !== null && url.port === '' && url.pathname === '/' && url.username === '' && url.search === '' && url.hash === '';
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
  const host = req.headers.host;
  const origin = req.headers.origin;
  if (origin !== undefined && !own.isOwnOrigin(origin, host)) {
    const name = parsed(origin)?.hostname;
    const proxy = name && !isIpName(name) ? `; if ${name} is a proxy in front of it, start llmq serve with --allow-host ${name}` : '';
    return { status: 403, message: `requests from ${origin} are refused: only the dashboard's own page may call it${proxy}` };
  }
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
