import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../bin/llmq.js', import.meta.url));

/** `llmq run` flags for the offline mock at once: no latency, no progress display. */
export const MOCK_NOW = ['--provider', 'mock', '--mock-latency', '0', '--progress', 'none'] as const;

export interface CliResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Environment for a child llmq: no inherited keys, colors off unless a test asks, the test process's cache folder (helpers/own-cache.ts). */
export function cliEnv(extra: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    XDG_CACHE_HOME: process.env.XDG_CACHE_HOME,
    NO_COLOR: '1',
    ...extra,
  };
  for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
  return env;
}

export interface CliOptions {
  cwd?: string;
  env?: Record<string, string | undefined>;
  input?: string;
  /** Run as this user and group (needs root): what permissions do to a user that root ignores. */
  user?: { uid: number; gid: number };
  /** Options for node itself, before the script (`--import`, `--cpu-prof`). */
  nodeArgs?: readonly string[];
}

/** Start the real CLI as a child process (the built dist/, so `npm test` builds first). */
export function spawnCli(args: readonly string[], options: CliOptions = {}): ChildProcess {
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), BIN, ...args], {
    cwd: options.cwd,
    env: cliEnv(options.env),
    stdio: ['pipe', 'pipe', 'pipe'],
    ...options.user,
  });
  if (options.input !== undefined) child.stdin!.end(options.input);
  else child.stdin!.end();
  return child;
}

/** Run the real CLI to the end and collect its output. */
export function runCli(args: readonly string[], options: CliOptions & { timeoutMs?: number } = {}): Promise<CliResult> {
  const child = spawnCli(args, options);
  return collect(child, options.timeoutMs ?? 60_000);
}

export function collect(child: ChildProcess, timeoutMs = 60_000): Promise<CliResult> {
  let stdout = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`llmq did not finish within ${timeoutMs} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/**
 * Run a bash script in which `llmq` is the real CLI, for what only a shell sets up: redirections
 * (`> /dev/full`) and process substitution (`--out >(cmd)`).
 */
export function runCliInShell(script: string, options: { cwd?: string; timeoutMs?: number } = {}): Promise<CliResult> {
  const child = spawn('bash', ['-c', `llmq() { "$LLMQ_NODE" "$LLMQ_BIN" "$@"; }\n${script}`], {
    cwd: options.cwd,
    env: cliEnv({ LLMQ_NODE: process.execPath, LLMQ_BIN: BIN }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return collect(child, options.timeoutMs ?? 60_000);
}
