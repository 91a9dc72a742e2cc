import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // test/timing/ measures pacing against a fake enforcing limits per second; it runs on its own
    // afterwards (vitest.timing.config.ts) so other tests' load doesn't jitter it.
    exclude: ['test/timing/**', 'node_modules/**'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // Three files at a time on 2 cores: most tests wait on child processes, timers and fakes, and with
    // two files the cores stood a third idle (the suite took 11.6 minutes, 9.5 with three). Timing
    // tests run apart (above), so the extra load jitters none of them.
    maxWorkers: 3,
    setupFiles: ['test/helpers/own-cache.ts'],
  },
});
