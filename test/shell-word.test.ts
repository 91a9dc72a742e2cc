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
    'é 中文 😀.txt',
  ];

  it.each(names)('%j is read back by bash as itself', (name) => {
    const word = shellWord(name);
    expect(execFileSync('bash', ['-c', `printf %s ${word}`], { encoding: 'utf8' })).toBe(name);
  });

  it('shows no control character', () => {
    for (const name of names) expect(shellWord(name), JSON.stringify(name)).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
    expect(shellWord('new\nline.txt')).toBe("$'new\\nline.txt'");
    expect(shellWord('with space.txt')).toBe("'with space.txt'");
  });
});
