#!/usr/bin/env node
// The CLI is compiled to dist/ by `npm run build` (npm install runs it). In a checkout where it was
// never built, or was cleaned, say so instead of Node's stack trace of a missing module.
import { existsSync } from 'node:fs';

const main = new URL('../dist/cli/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write(
    'error: llmq is not built here (no dist/cli/main.js). Run npm run build in the llmq checkout (npm install does it too).\n',
  );
  process.exit(1);
}
await import(main.href);
