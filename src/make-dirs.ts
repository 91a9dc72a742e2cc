import { mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * `mkdir -p`, one level at a time. Node 20's `mkdir(path, { recursive: true })` loops forever where
 * making a folder fails with ENOENT although its parent exists (anywhere under /proc: `--db
 * /proc/x/q.db` hung llmq at 100% CPU); here that ENOENT is the error, for the caller to word.
 * Folders someone else makes meanwhile are fine. Synchronous: a few system calls, no reason to wait
 * for a thread.
 */
export function makeDirs(dir: string): void {
  const missing: string[] = [];
  let d = resolve(dir);
  for (;;) {
    try {
      mkdirSync(d);
      break;
    } catch (error) {
      if (code(error) === 'EEXIST') {
        const there = statSync(d, { throwIfNoEntry: false });
        if (there?.isDirectory()) break;
        // a dangling symlink exists but stats as missing: the mkdir error is the one to word
        if (!there) throw error;
        // as `mkdir -p` says it: a file where a folder should be
        throw Object.assign(new Error(`ENOTDIR: not a directory, mkdir '${d}'`), { code: 'ENOTDIR', syscall: 'mkdir', path: d });
      }
      if (code(error) !== 'ENOENT' || dirname(d) === d) throw error;
      missing.push(d);
      d = dirname(d);
    }
  }
  for (const m of missing.reverse()) {
    try {
      mkdirSync(m);
    } catch (error) {
      if (code(error) !== 'EEXIST') throw error;
    }
  }
}

const code = (error: unknown): string | undefined => (error as NodeJS.ErrnoException | null)?.code;
