import type { ChildProcess } from 'node:child_process';

export interface WaitOptions {
  /** What is awaited, for the failure message: "the run to report an outage". */
  readonly what: string;
  /** @default 10_000 */
  readonly timeoutMs?: number;
  /** How often the condition is checked. @default 20 */
  readonly intervalMs?: number;
}

type Truthy<T> = Exclude<T, false | 0 | '' | null | undefined>;

/**
 * Check `condition` every `intervalMs` until it returns a truthy value, and return that value.
 * Fails after `timeoutMs` saying what it waited for and what it saw last. An error thrown by the
 * condition fails at once: a check that cannot be made is not one that is not met yet.
 */
export async function waitFor<T>(condition: () => T | Promise<T>, o: WaitOptions): Promise<Truthy<T>> {
  const timeoutMs = o.timeoutMs ?? 10_000;
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await condition();
    if (value) return value as Truthy<T>;
    if (Date.now() > until) throw new Error(`waited ${timeoutMs} ms for ${o.what}; last saw ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, o.intervalMs ?? 20));
  }
}

/**
 * Resolve with the first line `stream` of `child` writes that matches `pattern` (as text; the
 * stream keeps flowing to other listeners such as `collect`). Fails if the child ends first or
 * after `timeoutMs`, with what it wrote.
 */
export function waitForLine(child: ChildProcess, stream: 'stdout' | 'stderr', pattern: RegExp, timeoutMs = 10_000): Promise<string> {
  const source = child[stream]!;
  source.setEncoding('utf8');
  let text = '';
  return new Promise((resolve, reject) => {
    const done = (error: Error | null, line?: string) => {
      clearTimeout(timer);
      source.off('data', onData);
      child.off('close', onClose);
      if (error) reject(error);
      else resolve(line!);
    };
    const onData = (d: string) => {
      text += d;
      const line = text.split('\n').find((l) => pattern.test(l));
      if (line !== undefined) done(null, line);
    };
    const onClose = () => done(new Error(`the process ended before writing ${pattern} on ${stream}; it wrote:\n${text}`));
    const timer = setTimeout(() => done(new Error(`waited ${timeoutMs} ms for ${pattern} on ${stream}; it wrote:\n${text}`)), timeoutMs);
    source.on('data', onData);
    child.on('close', onClose);
  });
}
