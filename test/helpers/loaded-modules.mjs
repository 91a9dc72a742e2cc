// `node --import ./loaded-modules.mjs`: appends the URL of every file module the process loads to
// the file LLMQ_TEST_LOADED names, ES modules as they load (loaded-modules-hooks.mjs) and CommonJS
// modules (require's cache, which the hooks do not see) at exit.
import { appendFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';
import { pathToFileURL } from 'node:url';

register('./loaded-modules-hooks.mjs', import.meta.url);
const cache = createRequire(import.meta.url).cache;
process.on('exit', () => {
  const urls = Object.keys(cache).map((path) => pathToFileURL(path).href);
  appendFileSync(process.env.LLMQ_TEST_LOADED, urls.map((u) => `${u}\n`).join(''));
});
