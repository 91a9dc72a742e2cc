import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import type { HookTarget } from './target.js';

/** Sends one body; resolves when the hook took it, rejects with why it did not. */
export type Deliver = (body: string) => Promise<void>;

export const SIGNATURE_HEADER = 'x-llmq-signature';

/** `sha256=<hex HMAC-SHA256 of the body>`: the receiver recomputes it with the shared secret. */
export function sign(body: string, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
}

export interface DeliverOptions {
  /** LLMQ_HOOK_SECRET; without it URL posts are not signed. */
  readonly secret?: string;
  /** Tries per URL post. @default 4 */
  readonly attempts?: number;
  /** First wait before a retry, doubling. @default 500 */
  readonly retryDelayMs?: number;
  /** The longest one try (a post or a command) may take. @default 10000 */
  readonly timeoutMs?: number;
}

export function deliverTo(target: HookTarget, o: DeliverOptions = {}): Deliver {
  const timeoutMs = o.timeoutMs ?? 10_000;
  return target.kind === 'url'
    ? (body) => postWithRetries(target.url, body, o.secret, o.attempts ?? 4, o.retryDelayMs ?? 500, timeoutMs)
    : (body) => runCommand(target.command, body, timeoutMs);
}

async function postWithRetries(
  url: string,
  body: string,
  secret: string | undefined,
  attempts: number,
  delayMs: number,
  timeoutMs: number,
): Promise<void> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'llmq-hook' };
  if (secret) headers[SIGNATURE_HEADER] = sign(body, secret);
  let last = '';
  for (let attempt = 1; attempt <= attempts; attempt++) {
    try {
      const res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(timeoutMs) });
      await res.arrayBuffer().catch(() => undefined);
      if (res.ok) return;
      last = `HTTP ${res.status}`;
      // A 4xx other than 408/429 will not change by asking again.
      if (res.status < 500 && res.status !== 408 && res.status !== 429) break;
    } catch (error) {
      last = error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error);
    }
    if (attempt < attempts) await new Promise((r) => setTimeout(r, delayMs * 2 ** (attempt - 1) * (1 + Math.random())));
  }
  throw new Error(last);
}

/** `sh -c command` with the body on stdin; its output is not shown (it would break the progress display and --json). */
function runCommand(command: string, body: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', command], { stdio: ['pipe', 'ignore', 'ignore'] });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.stdin.on('error', () => undefined); // a command that does not read its stdin is fine
    child.stdin.end(body);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(signal ? `killed by ${signal} (over ${timeoutMs / 1000} s?)` : `exit code ${code}`));
    });
  });
}
