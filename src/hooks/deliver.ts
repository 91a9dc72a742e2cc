import { API_KEY_VARIABLES } from '../provider/endpoint.js';
import { redactUrlCredentials } from '../url-credentials.js';
import { spawn } from 'node:child_process';
import { createHmac } from 'node:crypto';
import type { HookTarget } from './target.js';
import { sleep } from '../scheduler/wait.js';

/**
 * Sends one body; resolves when the hook took it, rejects with why it did not. Once `stop` aborts
 * (the run's deadline for its hooks passed), it gives up at once: no retry, no post or command left
 * behind to keep the process alive. `tryFailed` hears each failed try as it happens, retried or
 * not: a delivery still retrying at the deadline is dropped, and the report still says why.
 */
export type Deliver = (body: string, stop: AbortSignal, tryFailed?: (why: string) => void) => Promise<void>;

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
    ? (body, stop, tryFailed) =>
        postWithRetries(target.url, body, o.secret, o.attempts ?? 4, o.retryDelayMs ?? 500, timeoutMs, stop, tryFailed)
    : (body, stop, tryFailed) =>
        runCommand(target.command, body, timeoutMs, stop).catch((error: unknown) => {
          if (!stop.aborted) tryFailed?.(error instanceof Error ? error.message : String(error));
          throw error;
        });
}

async function postWithRetries(
  url: string,
  body: string,
  secret: string | undefined,
  attempts: number,
  delayMs: number,
  timeoutMs: number,
  stop: AbortSignal,
  tryFailed: (why: string) => void = () => {},
): Promise<void> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'user-agent': 'llmq-hook' };
  if (secret) headers[SIGNATURE_HEADER] = sign(body, secret);
  let last = '';
  for (let attempt = 1; attempt <= attempts && !stop.aborted; attempt++) {
    try {
      const res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.any([stop, AbortSignal.timeout(timeoutMs)]) });
      await res.arrayBuffer().catch(() => undefined);
      if (res.ok) return;
      last = `HTTP ${res.status}`;
      // A 4xx other than 408/429 will not change by asking again.
      if (res.status < 500 && res.status !== 408 && res.status !== 429) break;
    } catch (error) {
      if (stop.aborted) break;
      // a URL in the message (fetch quotes it) keeps no password of its query
      last = redactUrlCredentials(
        error instanceof Error ? (error.cause instanceof Error ? error.cause.message : error.message) : String(error),
      );
    }
    tryFailed(last);
    // cut short by the deadline, which the loop then sees
    if (attempt < attempts) await sleep(delayMs * 2 ** (attempt - 1) * (1 + Math.random()), stop).catch(() => {});
  }
  throw new Error(stop.aborted ? 'given up at the deadline for hooks' : last);
}

/**
 * The process groups of hook commands running now. In groups of their own, they do not get the
 * terminal's Ctrl-C with llmq: `killHookCommands` ends them when llmq ends (its `exit`, or a signal
 * while it waits for its hooks, run-action.ts).
 */
const running = new Set<number>();

let watchingExit = false;
/** Once per process: a listener per command would pile up, one for every hook of a long run. */
function watchExit(): void {
  if (watchingExit) return;
  watchingExit = true;
  process.on('exit', killHookCommands);
}

export function killHookCommands(): void {
  for (const group of running) {
    try {
      process.kill(-group, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  running.clear();
}

/**
 * A hook command's environment: llmq's, less the API key and the hook secret. The key is never
 * exported (README, "What llmq promises about secrets"): a hook such as `env | curl ...` or one
 * that logs its environment would carry it off.
 */
function hookEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of [...API_KEY_VARIABLES, 'LLMQ_HOOK_SECRET']) delete env[name];
  return env;
}

/**
 * `sh -c command` with the body on stdin; its output is not shown (it would break the progress
 * display and --json). It runs in a process group of its own, so a command cut off (its timeout, or
 * the run's deadline for hooks) is killed with everything it started, not only the shell.
 */
function runCommand(command: string, body: string, timeoutMs: number, stop: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', command], { stdio: ['pipe', 'ignore', 'ignore'], detached: true, env: hookEnv() });
    watchExit();
    if (child.pid !== undefined) running.add(child.pid);
    const killAll = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // gone already
      }
    };
    const timer = setTimeout(killAll, timeoutMs);
    stop.addEventListener('abort', killAll, { once: true });
    child.stdin.on('error', () => undefined); // a command that does not read its stdin is fine
    child.stdin.end(body);
    child.on('error', (e) => {
      clearTimeout(timer);
      stop.removeEventListener('abort', killAll);
      reject(e);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      stop.removeEventListener('abort', killAll);
      running.delete(child.pid!);
      if (code === 0) resolve();
      else reject(new Error(signal ? `killed by ${signal} (over ${timeoutMs / 1000} s?)` : `exit code ${code}`));
    });
  });
}
