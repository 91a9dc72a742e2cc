import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { isProcessAlive } from '../src/process-alive.js';

describe('isProcessAlive', () => {
  it.skipIf(process.platform !== 'linux')(
    'a running process is alive; one that ended is not, even while its parent has not reaped it (a zombie)',
    async () => {
      expect(isProcessAlive(process.pid)).toBe(true);
      // bash starts a short sleep and becomes a long one (exec): the child ends, and its parent never
      // waits for it. Not `sleep 0`: on a busy machine it ended before the exec, and bash reaped it.
      const parent = spawn('bash', ['-c', 'sleep 0.5 & echo $!; exec sleep 10'], { stdio: ['ignore', 'pipe', 'ignore'] });
      const zombie = await new Promise<number>((resolve) => parent.stdout!.once('data', (d: Buffer) => resolve(Number(String(d).trim()))));
      const state = () => {
        const stat = readFileSync(`/proc/${zombie}/stat`, 'latin1');
        return stat.charAt(stat.lastIndexOf(')') + 2);
      };
      for (let i = 0; i < 500 && state() !== 'Z'; i++) await new Promise((r) => setTimeout(r, 10));
      expect(state()).toBe('Z');
      expect(() => process.kill(zombie, 0)).not.toThrow(); // what the check alone used to see
      expect(isProcessAlive(zombie)).toBe(false);
      expect(isProcessAlive(parent.pid!)).toBe(true);
      parent.kill('SIGKILL');
      await new Promise((r) => parent.once('close', r));
      expect(isProcessAlive(parent.pid!)).toBe(false);
    },
  );
});
