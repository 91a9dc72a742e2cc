/**
 * Helpers for end-to-end tests of the built CLI: a JSONL input enqueued by the real `llmq enqueue`,
 * `llmq run` under a real pseudo-terminal (util-linux `script`), a tiny terminal model to measure
 * what was drawn, and a read-only look into the SQLite file.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { expect } from 'vitest';
import { BIN, cliEnv, collect, runCli, type CliResult } from './cli.js';
import { completionBody, type FakeOpenAI, type FakeRequest } from './fake-openai.js';
import { JOB_COLUMNS } from '../../src/store/sqlite/requests.js';

/** Write `lines` (objects) as a JSONL file in `dir` and enqueue it with the real CLI. */
export async function enqueueJsonl(
  dir: string,
  lines: readonly object[],
  name = 'in.jsonl',
  extra: readonly string[] = [],
): Promise<{ db: string; file: string }> {
  const db = join(dir, 'q.db');
  const file = join(dir, name);
  writeFileSync(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  const r = await runCli(['enqueue', file, '--db', db, '--max-tokens', '32', ...extra]);
  expect(r.stderr, r.stderr).not.toMatch(/error|rejected: [1-9]/i);
  expect(r.code).toBe(0);
  return { db, file };
}

/** Single-quote for sh. */
export function sh(arg: string): string {
  return `'${arg.replace(/'/g, `'\\''`)}'`;
}

/**
 * Run the real CLI inside a pseudo-terminal of 80x24 (`script -qec`): stdout and stderr are both
 * the terminal, and what it received comes back as `stdout` (CRLF line ends, as a terminal gets them).
 * `typeWhen`: once the output shows `shows`, `keys` are typed on the terminal (`\x03` is Ctrl-C:
 * the terminal signals the CLI's process group, as a user's would).
 */
export function runInPty(
  args: readonly string[],
  options: {
    cwd?: string;
    env?: Record<string, string | undefined>;
    timeoutMs?: number;
    typeWhen?: { readonly shows: string | RegExp; readonly keys: string };
  } = {},
): Promise<CliResult> {
  const command = `stty cols 80 rows 24 2>/dev/null; exec ${sh(process.execPath)} ${sh(BIN)} ${args.map(sh).join(' ')}`;
  const child = spawn('script', ['-qec', command, '/dev/null'], {
    cwd: options.cwd,
    env: cliEnv({ COLUMNS: '80', LINES: '24', TERM: 'xterm-256color', ...options.env }),
    stdio: [options.typeWhen ? 'pipe' : 'ignore', 'pipe', 'pipe'],
  });
  const typing = options.typeWhen;
  if (typing) {
    let seen = '';
    const watch = (d: Buffer | string) => {
      seen += String(d);
      if (typeof typing.shows === 'string' ? !seen.includes(typing.shows) : !typing.shows.test(seen)) return;
      child.stdout!.off('data', watch);
      child.stdin!.write(typing.keys);
    };
    child.stdout!.on('data', watch);
  }
  return collect(child, options.timeoutMs ?? 30_000);
}

/** Any ANSI control sequence (CSI) or OSC. */
export const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07/g;
/** Color / style codes (SGR) only. */
export const SGR = /\x1b\[[0-9;]*m/;

export function stripAnsi(text: string): string {
  return text.replace(ANSI, '');
}

/**
 * Play `raw` terminal output on a model screen: printable characters, CR, LF, cursor up/down/column
 * and erase-in-line; styles are ignored. Returns the final screen (trailing spaces trimmed) and the
 * widest column any character was ever written to (no clamping: a line too long shows as > width),
 * and that row as it finally reads (for failure messages).
 */
export function playTerminal(raw: string): { screen: string[]; maxColumn: number; widest: string } {
  const rows: string[][] = [[]];
  let row = 0,
    col = 0,
    maxColumn = 0,
    widestAt = 0;
  const line = () => (rows[row] ??= []);
  const token = /\x1b\[([0-9;?]*)([ -/]*[@-~])|\x1b\][^\x07]*\x07|\r|\n|[^\x1b\r\n]/gsu;
  for (const m of raw.matchAll(token)) {
    const t = m[0];
    if (t === '\r') col = 0;
    else if (t === '\n') {
      row++;
      line();
    } else if (m[2] !== undefined) {
      const n = Number(m[1] || '1');
      switch (m[2]) {
        case 'G':
          col = Math.max(0, n - 1);
          break;
        case 'A':
          row = Math.max(0, row - n);
          break;
        case 'B':
          row += n;
          line();
          break;
        case 'C':
          col += n;
          break;
        case 'D':
          col = Math.max(0, col - n);
          break;
        case 'K': {
          const mode = Number(m[1] || '0');
          const l = line();
          if (mode === 0) l.length = Math.min(l.length, col);
          else if (mode === 2) l.length = 0;
          break;
        }
        default:
          break; // m (style), h/l (modes), J: nothing to model here
      }
    } else if (t.startsWith('\x1b')) {
      // OSC: ignored
    } else {
      const l = line();
      while (l.length < col) l.push(' ');
      l[col] = t;
      col++;
      if (col > maxColumn) {
        maxColumn = col;
        widestAt = row;
      }
    }
  }
  const screen = rows.map((r) => (r ?? []).join('').trimEnd());
  return { screen, maxColumn, widest: screen[widestAt] ?? '' };
}

export interface JobRow {
  key: string;
  request: string;
  model: string;
  state: string;
  attempts: number;
  output: string | null;
  response: string | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  cost_usd: number | null;
  error: string | null;
}
export interface ItemRow {
  seq: number;
  id: string;
  source: string;
  job_key: string;
  meta: string | null;
}
export interface AttemptRow {
  job_key: string;
  run_id: string;
  attempt: number;
  latency_ms: number;
  status: number | null;
  outcome: string;
  error: string | null;
  prompt_tokens: number | null;
  completion_tokens: number | null;
  cost_usd: number | null;
}
export interface RunRowRaw {
  id: string;
  host: string;
  pid: number;
  started_at: number;
  ended_at: number | null;
  exit_reason: string | null;
  stats: string | null;
}

/** Everything in the SQLite file, read-only. */
/** The newest heartbeat of a run still open on the queue (ms epoch), read beside the run. */
export function lastBeat(db: string): number {
  const conn = new Database(db, { readonly: true });
  try {
    return (conn.prepare('SELECT max(heartbeat_at) FROM runs WHERE ended_at IS NULL').pluck().get() as number | null) ?? 0;
  } finally {
    conn.close();
  }
}

export function readDb(db: string): { jobs: JobRow[]; items: ItemRow[]; attempts: AttemptRow[]; runs: RunRowRaw[] } {
  const d = new Database(db, { readonly: true });
  try {
    return {
      jobs: d.prepare(`SELECT ${JOB_COLUMNS} FROM jobs ORDER BY seq`).all() as JobRow[],
      items: d.prepare('SELECT * FROM items ORDER BY seq').all() as ItemRow[],
      attempts: d.prepare('SELECT * FROM attempts ORDER BY id').all() as AttemptRow[],
      runs: d.prepare('SELECT * FROM runs ORDER BY started_at').all() as RunRowRaw[],
    };
  } finally {
    d.close();
  }
}

/** The usage the fake put in its 200 answer to `req` (it computes it from the request; recomputed the same way). */
export function fakeUsage(req: FakeRequest): { prompt_tokens: number; completion_tokens: number } {
  const body = completionBody(req, {}) as { usage: { prompt_tokens: number; completion_tokens: number } };
  return { prompt_tokens: body.usage.prompt_tokens, completion_tokens: body.usage.completion_tokens };
}

/** The fake's requests for one job key, in order, and the one it answered with 200 (if any). */
export function sentFor(fake: FakeOpenAI, key: string): { all: FakeRequest[]; ok: FakeRequest | undefined } {
  const all = fake.requests.filter((r) => r.key === key);
  return { all, ok: all.find((r) => r.answered === 200) };
}

/** Every non-empty line of `text`, parsed as JSON (fails the test on the first line that is not). */
export function jsonLines(text: string): any[] {
  return text
    .split('\n')
    .filter((l) => l !== '')
    .map((l, i) => {
      try {
        return JSON.parse(l);
      } catch {
        throw new Error(`line ${i + 1} is not JSON: ${JSON.stringify(l)}`);
      }
    });
}
