import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Child-process and timing tests share 2 cores; keep files from starving each other.
    maxWorkers: 2,
  },
});
