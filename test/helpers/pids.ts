import { spawnSync } from 'node:child_process';

/** A pid that was this machine's a moment ago and is gone now: a run "killed" without killing anything. */
export function gonePid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(child.stdout);
}
