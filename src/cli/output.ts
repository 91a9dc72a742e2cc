import { Chalk, type ChalkInstance } from 'chalk';

/** Colors only for a terminal, never with NO_COLOR or through a pipe. */
export function useColor(stream: NodeJS.WriteStream, env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0') return true;
  return Boolean(stream.isTTY);
}

export function colorsFor(stream: NodeJS.WriteStream, env: NodeJS.ProcessEnv = process.env): ChalkInstance {
  return new Chalk({ level: useColor(stream, env) ? 1 : 0 });
}

/** Messages go to stderr, data to stdout. */
export function info(message: string): void {
  process.stderr.write(message + '\n');
}

export function warn(message: string): void {
  const c = colorsFor(process.stderr);
  process.stderr.write(c.yellow('warning: ') + message + '\n');
}
