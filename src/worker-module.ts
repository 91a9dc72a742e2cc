import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker, type ResourceLimits } from 'node:worker_threads';

/**
 * A worker thread running the module beside `from` named `name` (without extension): the built
 * `.js` in dist, or, under the test runner, where these modules are TypeScript, the `.ts` loaded
 * through tsx (whose ESM entry sits beside the CommonJS one that require.resolve finds).
 */
export function startModuleWorker(from: string, name: string, o: { workerData: unknown; resourceLimits?: ResourceLimits }): Worker {
  const fromSource = from.endsWith('.ts');
  const url = new URL(`./${name}${fromSource ? '.ts' : '.js'}`, from);
  if (!fromSource) return new Worker(url, o);
  const tsx = pathToFileURL(
    createRequire(from)
      .resolve('tsx/esm/api')
      .replace(/\.cjs$/, '.mjs'),
  ).href;
  const load = `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(url.href)}); })`;
  return new Worker(load, { ...o, eval: true });
}
