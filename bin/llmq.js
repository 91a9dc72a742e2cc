#!/usr/bin/env node
// The CLI is compiled to dist/ by `npm run build` (npm install runs it). In a checkout where it was
// never built, or was cleaned, say so instead of Node's stack trace of a missing module.
import { existsSync } from 'node:fs';

// Until a command listens for them itself (loading it takes most of a second), a stop signal ends
// llmq at once with 130, as every command a signal stops does: SIGTERM's own death, 143, reads to a
// supervisor as a crash. A command that listens is left to stop its own way.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(signal, () => {
    if (process.listenerCount(signal) > 1) return;
    process.stderr.write(`stopped (${signal})\n`);
    process.exit(130);
  });
}

const main = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write(
    'error: llmq is not built here (no dist/cli/main.js). Run npm run build in the llmq checkout (npm install does it too).\n',
  );
  process.exit(1);
}
await import(main.href);
