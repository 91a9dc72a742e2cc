import type { CrashStep } from '../batch/context.js';

/**
 * For crash tests only: `LLMQ_TEST_CRASH_AT=<step>` makes the process SIGKILL itself when the batch
 * lane reaches that step, the way a power cut or OOM kill would stop it. Read here and nowhere else.
 */
export function crashAtFromEnv(env: NodeJS.ProcessEnv): ((step: CrashStep) => void) | undefined {
  const at = env.LLMQ_TEST_CRASH_AT;
  if (!at) return undefined;
  return (step) => {
    if (step === at) process.kill(process.pid, 'SIGKILL');
  };
}
