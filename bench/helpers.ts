import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface, type Interface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** Linux's USER_HZ: /proc reports CPU times in these. */
const CLOCK_TICKS = 100;

/** What the fake saw since it started or was last cleared. */
export interface FakeStats {
  readonly received: number;
  /** 429s sent. */
  readonly rateLimited: number;
  readonly maxInFlight: number;
  /** Bodies received more than once. */
  readonly duplicates: number;
  /** ms epoch of the first and last request received (0 before any). */
  readonly firstAt: number;
  readonly lastAt: number;
  /** Requests answered 200, and requests left hanging. */
  readonly ok: number;
  readonly hung: number;
  /** Arrival times of the requests answered 200, in order; empty unless the fake was started with `record: true`. */
  readonly okAt: readonly number[];
  /** Arrival times of the requests answered 429, likewise. */
  readonly limitedAt: readonly number[];
}

/** A FakeOpenAI in a child process (options as FakeOpenAI takes them, plus `latencySpreadMs`: see fake-server.ts). */
export class FakeProcess {
  private constructor(
    readonly url: string,
    private child: ChildProcess,
    private lines: Interface,
  ) {}

  static async start(options: Record<string, unknown> = {}): Promise<FakeProcess> {
    const script = fileURLToPath(new URL('./fake-server.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', script, JSON.stringify(options)], { stdio: ['pipe', 'pipe', 'inherit'] });
    const lines = createInterface({ input: child.stdout! });
    const url = await new Promise<string>((resolve) => lines.once('line', resolve));
    return new FakeProcess(url, child, lines);
  }

  /** The fake's process id (for reading its CPU time from /proc). */
  get pid(): number {
    return this.child.pid!;
  }

  /** CPU time the fake has used since it started, in ms (user + system, from /proc: 10 ms steps). */
  cpuMs(): number {
    const fields = readFileSync(`/proc/${this.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * (1000 / CLOCK_TICKS);
  }

  configure(options: Record<string, unknown>): void {
    this.child.stdin!.write(JSON.stringify({ configure: options }) + '\n');
  }

  clear(): void {
    this.child.stdin!.write(JSON.stringify({ clear: true }) + '\n');
  }

  /** Refill its rate-limit budgets and forget the current window, as for a fresh account. */
  resetLimits(): void {
    this.child.stdin!.write(JSON.stringify({ resetLimits: true }) + '\n');
  }

  async stats(): Promise<FakeStats> {
    const answer = new Promise<string>((resolve) => this.lines.once('line', resolve));
    this.child.stdin!.write(JSON.stringify({ stats: true }) + '\n');
    return JSON.parse(await answer);
  }

  async close(): Promise<void> {
    this.child.stdin!.end();
    await new Promise((r) => this.child.once('exit', r));
  }
}

export function fmt(n: number, digits = 0): string {
  return n.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits });
}

export function verdict(ok: boolean): string {
  return ok ? 'PASS' : 'MISS';
}
