import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { shellWord } from '../src/shell-word.js';

// The words of the commands llmq proposes (forget's ids, enqueue's paths) are pasted into a shell:
// bash must read each back as the same string, and none may carry a control character to the terminal.
describe('shellWord', () => {
  const names = [
    'plain.txt',
    'with space.txt',
    "it's.txt",
    '-rf.txt',
    'new\nline.txt',
    'tab\there.txt',
    'esc\u001b[31mRED\u001b[0m.txt',
    'title\u001b]0;PWNED\u0007x.txt',
    "both'\n\\.txt",
    'c1\u0085next.txt',
    'del\u007f.txt',
    'line\u2028sep.txt',
    'é 中文 😀.txt',
  ];

  it.each(names)('%j is read back by bash as itself, in a UTF-8 locale and in C', (name) => {
    const word = shellWord(name);
    for (const LC_ALL of ['C.UTF-8', 'C'])
      expect(execFileSync('bash', ['-c', `printf %s ${word}`], { encoding: 'utf8', env: { ...process.env, LC_ALL } }), LC_ALL).toBe(name);
  });

  it('shows no control character', () => {
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it looks for
    for (const name of names) expect(shellWord(name), JSON.stringify(name)).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/);
    expect(shellWord('new\nline.txt')).toBe("$'new\\nline.txt'");
    expect(shellWord('with space.txt')).toBe("'with space.txt'");
  });
});
