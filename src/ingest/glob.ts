/**
 * A small glob matcher for `--glob` (Node 20 has no fs.glob). Supports `*` (any characters but `/`),
 * `**` (any number of folders, as a whole path segment), `?` (one character but `/`), `{a,b}`
 * (alternatives, nestable), `[abc]`/`[!abc]` (character classes) and `\` escapes.
 *
 * A pattern without `/` matches the file name at any depth (`*.md` matches `a/b/c.md`), as in
 * .gitignore; a pattern with `/` matches the whole path relative to the folder (`notes/**\/*.txt`).
 */
export type PathMatcher = (relativePath: string) => boolean;

/** One matcher for several patterns: a file is included when any pattern matches. */
export function globMatcher(patterns: readonly string[]): PathMatcher {
  if (patterns.length === 0) return () => true;
  const byName: RegExp[] = [];
  const byPath: RegExp[] = [];
  for (const raw of patterns) {
    const p = raw.replace(/^\.\//, '');
    (p.includes('/') ? byPath : byName).push(globToRegExp(p));
  }
  return (rel) => {
    if (byPath.some((r) => r.test(rel))) return true;
    if (byName.length === 0) return false;
    const name = rel.slice(rel.lastIndexOf('/') + 1);
    return byName.some((r) => r.test(name));
  };
}

export function globToRegExp(pattern: string): RegExp {
  return new RegExp(`^${convert(pattern, true)}$`);
}

function convert(p: string, segmentStart: boolean): string {
  let out = '';
  for (let i = 0; i < p.length; i++) {
    const c = p[i]!;
    const atStart = i === 0 ? segmentStart : p[i - 1] === '/';
    if (c === '\\' && i + 1 < p.length) {
      out += escapeChar(p[++i]!);
    } else if (c === '*' && p[i + 1] === '*' && atStart && (i + 2 === p.length || p[i + 2] === '/')) {
      // `**/` is zero or more whole folders; a trailing `**` is anything below.
      if (i + 2 === p.length) out += '.*';
      else out += '(?:[^/]*/)*';
      i += 2; // also skips the `/` after `**`
    } else if (c === '*') {
      while (p[i + 1] === '*') i++;
      out += '[^/]*';
    } else if (c === '?') {
      out += '[^/]';
    } else if (c === '[') {
      const end = p.indexOf(']', i + 2);
      if (end === -1) {
        out += '\\[';
      } else {
        let body = p.slice(i + 1, end);
        if (body.startsWith('!')) body = '^' + body.slice(1);
        out += `(?!/)[${body.replace(/\\/g, '\\\\')}]`;
        i = end;
      }
    } else if (c === '{') {
      const end = matchingBrace(p, i);
      if (end === -1) {
        out += '\\{';
      } else {
        const alternatives = splitTopLevel(p.slice(i + 1, end));
        out += `(?:${alternatives.map((a) => convert(a, atStart)).join('|')})`;
        i = end;
      }
    } else {
      out += escapeChar(c);
    }
  }
  return out;
}

function matchingBrace(p: string, open: number): number {
  let depth = 0;
  for (let i = open; i < p.length; i++) {
    if (p[i] === '\\') i++;
    else if (p[i] === '{') depth++;
    else if (p[i] === '}' && --depth === 0) return i;
  }
  return -1;
}

function splitTopLevel(body: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < body.length; i++) {
    const c = body[i];
    if (c === '\\') i++;
    else if (c === '{') depth++;
    else if (c === '}') depth--;
    else if (c === ',' && depth === 0) {
      parts.push(body.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(body.slice(start));
  return parts;
}

function escapeChar(c: string): string {
  return /[.+^$(){}|[\]\\/*?]/.test(c) ? `\\${c}` : c;
}
