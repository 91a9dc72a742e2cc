/**
 * The one owner of URL credential redaction. A password in `--db postgres://u:pw@host` or
 * `--redis redis://:pw@host` is legitimate, but it must never reach a message, a log line, the
 * database or `status`: every text that may quote such a URL goes through `redactUrlCredentials`
 * (invariant 7, docs/architecture.md).
 */

const MASK = '***';

/**
 * `scheme://` then the rest of the token, up to whitespace (which no URL holds unescaped). Not at
 * `/`, a quote or a bracket: a password may hold any of them (`u:S3c(r3t@h`, `u:it's@h`), and the
 * token stopped there once, before the `@` that ends the password. A quote or bracket after the URL
 * (`'postgres://u:pw@h/db'`) stays with it, and masking a little too much of an odd URL in a message
 * costs nothing.
 */
const URL_TOKEN = /\b([a-z][a-z0-9+.-]*:\/\/)(\S*)/gi;

/**
 * `text` with the password of every URL in it masked: `postgres://u:pw@h/db` becomes
 * `postgres://u:***@h/db`, `redis://:pw@h` becomes `redis://:***@h`, `?password=pw` becomes
 * `?password=***`. A user name without a password
 * (`postgres://postgres@h`) is kept: pg, ioredis and fetch all read it as a name, not a secret.
 */
export function redactUrlCredentials(text: string): string {
  return text.replace(URL_TOKEN, (whole, scheme: string, rest: string) => maskPasswordParams(maskUserinfo(whole, scheme, rest)));
}

/**
 * A password in the query: pg reads `postgres://h/db?password=...` (and `sslpassword`), ioredis
 * `redis://h?password=...`. Its value is masked up to the next `&` or `#`.
 */
function maskPasswordParams(url: string): string {
  return url.replace(/([?&](?:ssl)?password=)[^&#]*/gi, `$1${MASK}`);
}

/** `user:password@` masked; a user name alone is kept. */
function maskUserinfo(whole: string, scheme: string, rest: string): string {
  // The user information ends at the last `@` before the query or fragment, as URL parsers read it.
  const end = rest.search(/[?#]/);
  const authority = end === -1 ? rest : rest.slice(0, end);
  const at = authority.lastIndexOf('@');
  if (at === -1) return whole;
  const userinfo = authority.slice(0, at);
  const colon = userinfo.indexOf(':');
  if (colon === -1) return whole;
  return `${scheme}${userinfo.slice(0, colon)}:${MASK}${rest.slice(at)}`;
}

/**
 * Query parameters whose value is never a secret and without which a command shown is not the one
 * that ran: Azure OpenAI answers 404 to a request without its `api-version`.
 */
const PLAIN_PARAMS = new Set(['api-version']);

/**
 * A URL with its password and the value of every query parameter masked but `api-version`'s: for a
 * URL shown whole (a command to type next), where a key some endpoints take as a parameter
 * (`?api-key=...`) would otherwise be quoted. Not a URL: as `redactUrlCredentials` leaves it.
 */
export function redactUrlQuery(url: string): string {
  if (!URL.canParse(url)) return redactUrlCredentials(url);
  const { search } = new URL(url);
  if (search === '') return redactUrlCredentials(url);
  const params = new URLSearchParams(search);
  const names = [...new Set(params.keys())];
  const shown = (n: string) =>
    PLAIN_PARAMS.has(n.toLowerCase())
      ? params
          .getAll(n)
          .map((v) => `${n}=${encodeURIComponent(v)}`)
          .join('&')
      : `${n}=${MASK}`;
  return redactUrlCredentials(`${url.slice(0, url.indexOf('?'))}?${names.map(shown).join('&')}`);
}

/** Whether a URL carries a user name or password (`new URL` decodes neither away). */
export function hasUrlCredentials(url: string): boolean {
  if (!URL.canParse(url)) return false;
  const parsed = new URL(url);
  return parsed.username !== '' || parsed.password !== '';
}

/**
 * One URL for a message, parsed and shown as the parser spells it, its password masked. Not a URL:
 * as `redactUrlCredentials` leaves it.
 */
export function redactUrl(url: string): string {
  if (!URL.canParse(url)) return redactUrlCredentials(url);
  const parsed = new URL(url);
  if (parsed.password === '') return redactUrlCredentials(url);
  parsed.password = MASK;
  return redactUrlCredentials(parsed.href);
}
