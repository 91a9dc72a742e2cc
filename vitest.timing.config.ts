import { defineConfig } from 'vitest/config';

/** Tests whose pass depends on steady timing (rate pacing across processes, a keystroke landing inside a step of a second or two): one file at a time. */
export default defineConfig({
  test: {
    include: ['test/timing/**/*.test.ts'],
    testTimeout: 120_000,
    hookTimeout: 60_000,
    fileParallelism: false,
    maxWorkers: 1,
    setupFiles: ['test/helpers/own-cache.ts'],
  },
});
