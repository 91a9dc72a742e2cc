/** How many characters V8 quotes before the token it could not parse, when it cuts the text ("..."). */
const QUOTED_BEFORE = 10;

/**
 * JSON.parse's complaint on one line, with the line and column it points at, so that a hand-edited
 * file's mistake is found: Node says "at position 57", or quotes the text around it, new lines and all.
 * Returned as ` (line 3, column 14): what` to follow the file's name.
 */
export function jsonComplaint(text: string, error: unknown): string {
  const message = (error as Error).message;
  let at: number | null = null;
  let what = message;
  const positioned = /^(.*?) (?:in|after) JSON at position (\d+)/s.exec(message);
  const quoted = /^(Unexpected token '(.+?)'), (\.\.\.)?"([\s\S]*?)"(\.\.\.)? is not valid JSON$/.exec(message);
  if (positioned) {
    what = positioned[1]!;
    at = Number(positioned[2]);
  } else if (quoted) {
    what = quoted[1]!;
    const token = quoted[2]!;
    const excerpt = quoted[4]!;
    if (quoted[3]) {
      // V8 quotes from QUOTED_BEFORE characters before the token: the first place the excerpt is with the token there
      for (let i = text.indexOf(excerpt); i !== -1 && at === null; i = text.indexOf(excerpt, i + 1))
        if (text.startsWith(token, i + QUOTED_BEFORE)) at = i + QUOTED_BEFORE;
    } else if (quoted[5]) {
      // quoted from the start and cut: V8 quotes QUOTED_BEFORE characters after the token
      const i = excerpt.length - QUOTED_BEFORE;
      if (i >= 0 && text.startsWith(token, i)) at = i;
    } else {
      // the whole text quoted: the token's place is known when it is there once
      const i = text.indexOf(token);
      if (i !== -1 && text.indexOf(token, i + 1) === -1) at = i;
    }
  }
  what = what.replace(/\s+/g, ' ');
  if (at === null) return `: ${what}`;
  const before = text.slice(0, at);
  // JSON allows no comma before a closing bracket: said, as V8 names only what it expected after it
  const trailing = /,\s*$/.test(before) && /^[}\]]/.test(text.slice(at)) ? ' (a comma before it ends nothing: take it out)' : '';
  return ` (line ${before.split('\n').length}, column ${before.length - before.lastIndexOf('\n')}): ${what}${trailing}`;
}
