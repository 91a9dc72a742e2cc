import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { tempDir } from './helpers/tmp.js';

// The README's library example, run as it is written (its `llmq` import pointed at the build): the
// front door's code must work, not only read well.
describe("the README's library example", () => {
  it('runs: enqueues two tickets from code, answers them offline, reads an answer back', () => {
    const readme = readFileSync(resolve('README.md'), 'utf8');
    const section = readme.slice(readme.indexOf('## As a library'), readme.indexOf('## Development'));
    const code = /```js\n([\s\S]*?)```/.exec(section)?.[1];
    expect(code, 'a ```js block in "As a library"').toBeTruthy();
    const dir = tempDir();
    const entry = pathToFileURL(resolve('dist/index.js')).href;
    writeFileSync(join(dir, 'example.mjs'), code!.replace("from 'llmq'", `from '${entry}'`));
    const out = execFileSync(process.execPath, ['example.mjs'], { cwd: dir, encoding: 'utf8', timeout: 30_000 });
    expect(out).toMatch(/^2 new jobs, 0 rejected\n/);
    expect(out.match(/^done [0-9a-f]{12}$/gm)).toHaveLength(2);
    expect(out).toMatch(/^drained 2 \S/m);
  });
});
