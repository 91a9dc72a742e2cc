/**
 * One line on a terminal, redrawn in place and erased when the work is done: for a command that
 * works for seconds or minutes and prints nothing until it ends (`estimate` of a million prompts,
 * `enqueue` of a big file). On a pipe or a file it writes nothing, so what a script reads is the
 * result alone.
 */
export interface StatusLine {
  /** Show this text, at most every REDRAW_MS (the text is made only when drawn). */
  update(text: () => string): void;
  /** Show this text at once: a step whose end will not be drawn soon (a long synchronous one). */
  now(text: string): void;
  /** Erase the line, leaving the cursor where the line began. */
  done(): void;
}

/** Redraws come this often at most: often enough to look alive, rarely enough to cost nothing. */
const REDRAW_MS = 200;

/** `wanted` false: a line that shows nothing, as on a pipe. */
export function statusLine(stream: NodeJS.WriteStream, wanted = true): StatusLine {
  if (!stream.isTTY || !wanted) return { update() {}, now() {}, done() {} };
  // the first redraw waits too: work that ends within it leaves nothing to erase
  let last = Date.now();
  let shown = false;
  const draw = (text: string): void => {
    // cut to the terminal's width: a wrapped line cannot be redrawn in place
    const width = Math.max(20, (stream.columns || 80) - 1);
    stream.write(`\r\x1b[2K${text.length > width ? `${text.slice(0, width - 1)}…` : text}`);
    shown = true;
  };
  return {
    update(text) {
      const at = Date.now();
      if (at - last < REDRAW_MS) return;
      last = at;
      draw(text());
    },
    now(text) {
      last = Date.now();
      draw(text);
    },
    done() {
      if (shown) stream.write('\r\x1b[2K');
      shown = false;
    },
  };
}
