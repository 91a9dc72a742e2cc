import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';

/**
 * A fresh temp folder for one test. Removed when the test passes; kept (and its path printed)
 * when it fails, so the database can be opened and inspected.
 */
export function tempDir(prefix = 'llmq-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  onTestFinished((ctx) => {
    if (ctx.task.result?.state === 'fail') {
      process.stderr.write(`kept test folder for inspection: ${dir}\n`);
    } else {
      rmSync(dir, { recursive: true, force: true });
    }
  });
  return dir;
}
