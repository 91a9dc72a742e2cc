/**
 * The real `llmq serve` as a child process, and a headless Chromium (Debian's `chromium`, driven
 * by puppeteer-core) to look at it.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import puppeteer, { type Browser } from 'puppeteer-core';
import { spawnCli } from './cli.js';

export const CHROMIUM = '/usr/bin/chromium';

export function haveChromium(): boolean {
  return existsSync(CHROMIUM);
}

export function launchBrowser(): Promise<Browser> {
  // --no-sandbox: the tests run as root, where Chromium's sandbox refuses to start.
  return puppeteer.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}

export interface ServeChild {
  readonly url: string;
  /** The action token, or null with --read-only. */
  readonly token: string | null;
  readonly child: ChildProcess;
  stderr(): string;
  stop(): Promise<void>;
}

/** Start `llmq serve --port 0` and wait for the address and token it prints. */
export async function startServe(args: readonly string[], env: Record<string, string | undefined> = {}): Promise<ServeChild> {
  const child = spawnCli(['serve', '--port', '0', ...args], { env });
  let err = '';
  child.stderr!.setEncoding('utf8');
  const ready = new Promise<{ url: string; token: string | null }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`llmq serve did not start: ${err}`)), 15_000);
    child.stderr!.on('data', (d: string) => {
      err += d;
      const url = /at (http:\/\/\S+)/.exec(err)?.[1];
      if (url && /Ctrl-C/.test(err)) {
        clearTimeout(timer);
        resolve({ url, token: /token[^:]*: ([0-9a-f]{64})/.exec(err)?.[1] ?? null });
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`llmq serve exited with ${code}: ${err}`));
    });
  });
  const { url, token } = await ready;
  child.removeAllListeners('exit');
  return {
    url,
    token,
    child,
    stderr: () => err,
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        // SIGTERM is the clean stop; SIGKILL after 5 s so a stuck child cannot hang the suite.
        const force = setTimeout(() => child.kill('SIGKILL'), 5000);
        child.once('exit', () => {
          clearTimeout(force);
          resolve();
        });
        child.kill('SIGTERM');
      }),
  };
}

/** The first message of the dashboard's event stream: the whole report. */
export async function firstSnapshot(url: string): Promise<any> {
  const res = await fetch(`${url}events`);
  const reader = res.body!.getReader();
  let text = '';
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended before a snapshot: ${text}`);
      text += new TextDecoder().decode(value);
      const data = /^data: (.*)$/m.exec(text)?.[1];
      if (data && text.includes('\n\n')) return JSON.parse(data);
    }
  } finally {
    await reader.cancel();
  }
}
