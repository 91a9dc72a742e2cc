// Module hooks for loaded-modules.mjs: every ES module (and CommonJS file imported from one) as it loads.
import { appendFileSync } from 'node:fs';

export async function load(url, context, next) {
  if (url.startsWith('file:')) appendFileSync(process.env.LLMQ_TEST_LOADED, `${url}\n`);
  return next(url, context);
}
