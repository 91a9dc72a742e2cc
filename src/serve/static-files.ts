import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface StaticFile {
  readonly body: Buffer;
  readonly type: string;
}

/** The page's own files: next to this module (src/serve/static, copied to dist/serve/static by the build). */
const OWN_DIR = fileURLToPath(new URL('./static/', import.meta.url));

/** URL path → file. uPlot comes from the package's own node_modules: no CDN, works offline. */
function fileTable(): Map<string, { path: string; type: string }> {
  const require = createRequire(import.meta.url);
  const uplotDir = dirname(require.resolve('uplot/dist/uPlot.iife.min.js'));
  return new Map([
    ['/', { path: join(OWN_DIR, 'index.html'), type: 'text/html; charset=utf-8' }],
    ['/static/app.js', { path: join(OWN_DIR, 'app.js'), type: 'text/javascript; charset=utf-8' }],
    ['/static/style.css', { path: join(OWN_DIR, 'style.css'), type: 'text/css; charset=utf-8' }],
    ['/vendor/uPlot.iife.min.js', { path: join(uplotDir, 'uPlot.iife.min.js'), type: 'text/javascript; charset=utf-8' }],
    ['/vendor/uPlot.min.css', { path: join(uplotDir, 'uPlot.min.css'), type: 'text/css; charset=utf-8' }],
  ]);
}

/** Reads each file once, on first request: a dashboard session asks for each a handful of times. */
export class StaticFiles {
  readonly #table = fileTable();
  readonly #cache = new Map<string, Promise<StaticFile>>();

  has(urlPath: string): boolean {
    return this.#table.has(urlPath);
  }

  get(urlPath: string): Promise<StaticFile> {
    const entry = this.#table.get(urlPath);
    if (!entry) throw new Error(`no static file ${urlPath}`);
    let file = this.#cache.get(urlPath);
    if (!file) {
      file = readFile(entry.path).then((body) => ({ body, type: entry.type }));
      file.catch(() => this.#cache.delete(urlPath));
      this.#cache.set(urlPath, file);
    }
    return file;
  }
}
