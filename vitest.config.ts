import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // test/timing/ measures pacing against a fake enforcing limits per second; it runs on its own
    // afterwards (vitest.timing.config.ts) so other tests' load doesn't jitter it.
    exclude: ['test/timing/**', 'node_modules/**'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Child-process and timing tests share 2 cores; keep files from starving each other.
    maxWorkers: 2,
    setupFiles: ['test/helpers/own-cache.ts'],
  },
});
