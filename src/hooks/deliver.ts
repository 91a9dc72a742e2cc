import { API_KEY_VARIABLES } from '../provider/endpoint.js';
import { redactUrlCredentials } from '../url-credentials.js';
import { redactSecret } from '../provider/redact.js';
import { spawn } from 'node:child_process';
import { loadUndici } from '../provider/undici.js';
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
  if (target.kind === 'url') {
    // The HTTP client now, while the run starts: loaded by the first post, its 0.15 s (more on a busy
    // machine) came out of that post's time, and out of the deadline at the run's end.
    loadUndici();
    return (body, stop, tryFailed) =>
      postWithRetries(target.url, body, o.secret, o.attempts ?? 4, o.retryDelayMs ?? 500, timeoutMs, stop, tryFailed);
  }
  return (body, stop, tryFailed) =>
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
    const tryTimeout = AbortSignal.timeout(timeoutMs);
    try {
      const res = await loadUndici().request(url, { method: 'POST', headers, body, signal: AbortSignal.any([stop, tryTimeout]) });
      await res.body.dump().catch(() => undefined);
      const status = res.statusCode;
      if (status >= 200 && status < 300) return;
      last = `HTTP ${status}${redirectHint(status, res.headers.location)}`;
      // A 4xx other than 408/429 will not change by asking again, nor will a redirect.
      if (status < 500 && status !== 408 && status !== 429) {
        tryFailed(last);
        break;
      }
    } catch (error) {
      if (stop.aborted) break;
      last = tryTimeout.aborted ? `no answer within ${timeoutMs / 1000} s` : whyPostFailed(error);
    }
    tryFailed(last);
    // cut short by the deadline, which the loop then sees
    if (attempt < attempts) await sleep(delayMs * 2 ** (attempt - 1) * (1 + Math.random()), stop).catch(() => {});
  }
  throw new Error(stop.aborted ? 'given up at the deadline for hooks' : last);
}

/**
 * A redirect is not followed: a POST redirected by 301 or 302 arrives as a GET without its body,
 * so the hook would seem delivered and be lost. The user is told where to point the hook instead.
 */
function redirectHint(status: number, location: string | string[] | undefined): string {
  if (status < 300 || status >= 400) return '';
  const to = Array.isArray(location) ? location[0] : location;
  return to ? `: redirected to ${redactUrlCredentials(to)}; hooks do not follow redirects, give that URL` : '';
}

/** A failed try's words: the system's own (`connect ECONNREFUSED 127.0.0.1:9`), with no password of a URL they quote. */
function whyPostFailed(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return redactUrlCredentials(message);
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

/** Of a failing command's stderr, this much of the end is kept to say why it failed. */
const STDERR_TAIL_BYTES = 4096;
/** How long a failed command's stderr is read after it exits, for its last line. */
const STDERR_END_WAIT_MS = 250;

/**
 * Why a command failed, in its own words when it left any: the last line it wrote to stderr
 * (`sh: 1: notify-me: not found`), cut to 200 characters. 127 and 126 are the shell's own codes.
 */
export function commandFailure(code: number | null, signal: string | null, stderr: string): string {
  const said = stderr
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '')
    .pop();
  const shellMeaning = code === 127 ? ' (command not found)' : code === 126 ? ' (not executable)' : '';
  const what = signal ? `killed by ${signal}` : `exit code ${code}${said === undefined ? shellMeaning : ''}`;
  if (said === undefined) return what;
  // cleaned before it is cut: a URL cut before its `@` no longer reads as one, and its password would stay
  const clean = redactSecret(said, undefined);
  return `${what}: ${clean.length > 200 ? `${clean.slice(0, 199)}…` : clean}`;
}

/**
 * `sh -c command` with the body on stdin; its output is not shown (it would break the progress
 * display and --json), but the end of its stderr is kept for the failure's message. It runs in a process group of its own, so a command cut off (its timeout, or
 * the run's deadline for hooks) is killed with everything it started, not only the shell.
 */
function runCommand(command: string, body: string, timeoutMs: number, stop: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('sh', ['-c', command], { stdio: ['pipe', 'ignore', 'pipe'], detached: true, env: hookEnv() });
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      stderr = (stderr + chunk).slice(-STDERR_TAIL_BYTES);
    });
    watchExit();
    if (child.pid !== undefined) running.add(child.pid);
    const killAll = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // gone already
      }
    };
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      killAll();
    }, timeoutMs);
    stop.addEventListener('abort', killAll, { once: true });
    child.stdin.on('error', () => undefined); // a command that does not read its stdin is fine
    child.stdin.end(`${body}\n`); // one line: `cat >> jobs.log` keeps JSON Lines
    child.on('error', (e) => {
      clearTimeout(timer);
      stop.removeEventListener('abort', killAll);
      reject(e);
    });
    // 'exit', not 'close': a command that leaves a process behind (notify-send ... &) holds its stderr open
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      stop.removeEventListener('abort', killAll);
      running.delete(child.pid!);
      if (code === 0) {
        child.stderr.destroy();
        resolve();
        return;
      }
      // 'exit' may come before the last of stderr is read (its last line says why it failed), so
      // stderr's end is awaited, for a moment only: a process left behind may hold it open
      let settled = false;
      const settle = () => {
        if (settled) return;
        settled = true;
        clearTimeout(grace);
        child.stderr.destroy();
        if (timedOut) reject(new Error(`still running after ${timeoutMs / 1000} s, the most a hook command may take: stopped`));
        else reject(new Error(commandFailure(code, signal, stderr)));
      };
      const grace = setTimeout(settle, STDERR_END_WAIT_MS);
      if (child.stderr.readableEnded) settle();
      else child.stderr.once('end', settle).once('error', settle);
    });
  });
}
