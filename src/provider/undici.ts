import { createRequire } from 'node:module';

type Undici = typeof import('undici');

let undici: Undici | null = null;

/**
 * undici, loaded by the first caller that sends over HTTP: the OpenAI-compatible provider, a hook
 * URL. Its load takes about 0.15 s and 0.2 s of CPU, which a run on the offline mock (the demo)
 * and every command that sends nothing no longer pay.
 */
export function loadUndici(): Undici {
  undici ??= createRequire(import.meta.url)('undici') as Undici;
  return undici;
}
