import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const TOKENS = fileURLToPath(new URL('../dist/provider/tokens.js', import.meta.url));

describe('the tokenizer, loaded when a lane first paces tokens', () => {
  it('is not loaded until asked, and loadTokenizerSoon loads it after the writes an answer queued in the same turn are committed', () => {
    // a fresh process (this one may have the tables loaded): the answer's turn is an I/O callback,
    // its group commit a setImmediate queued there, as the store's is
    const script = `
      import { readFile } from 'node:fs';
      import { loadTokenizerSoon, tokenizerLoaded } from ${JSON.stringify(TOKENS)};
      const order = ['before:' + tokenizerLoaded()];
      readFile(${JSON.stringify(TOKENS)}, () => {
        setImmediate(() => order.push('commit:' + tokenizerLoaded()));
        loadTokenizerSoon().then(() => {
          order.push('loaded:' + tokenizerLoaded());
          console.log(JSON.stringify(order));
        });
      });`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(JSON.parse(out)).toEqual(['before:false', 'commit:false', 'loaded:true']);
  });
});
