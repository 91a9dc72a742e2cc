import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempDir } from './helpers/tmp.js';

describe('bin/llmq.js', () => {
  it('in a checkout never built says to build it, not a stack trace of a missing module', () => {
    const checkout = tempDir();
    mkdirSync(join(checkout, 'bin'));
    copyFileSync(fileURLToPath(new URL('../bin/llmq.js', import.meta.url)), join(checkout, 'bin', 'llmq.js'));
    const r = spawnSync(process.execPath, [join(checkout, 'bin', 'llmq.js'), 'status'], { encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe(
      'error: llmq is not built here (no dist/cli/main.js). Run npm run build in the llmq checkout (npm install does it too).\n',
    );
  });
});
