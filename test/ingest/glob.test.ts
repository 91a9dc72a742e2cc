import { describe, expect, it } from 'vitest';
import { globMatcher } from '../../src/ingest/glob.js';

describe('glob matcher', () => {
  it.each([
    // pattern, path, matches
    ['*.md', 'a.md', true],
    ['*.md', 'deep/er/a.md', true], // no slash: matches the file name at any depth
    ['*.md', 'a.mdx', false],
    ['*.md', 'a.txt', false],
    ['notes/*.txt', 'notes/a.txt', true],
    ['notes/*.txt', 'notes/sub/a.txt', false], // * never crosses a folder
    ['notes/**/*.txt', 'notes/a.txt', true], // ** is zero or more folders
    ['notes/**/*.txt', 'notes/x/y/a.txt', true],
    ['notes/**/*.txt', 'other/notes/a.txt', false],
    ['**/*.txt', 'a.txt', true],
    ['**/*.txt', 'x/y/a.txt', true],
    ['notes/**', 'notes/x/y', true],
    ['notes/**', 'notesx/y', false],
    ['file?.txt', 'file1.txt', true],
    ['file?.txt', 'file10.txt', false],
    ['*.{md,txt}', 'a.txt', true],
    ['*.{md,txt}', 'a.md', true],
    ['*.{md,txt}', 'a.csv', false],
    ['{meetings,support/**}/*.md', 'support/x/a.md', true],
    ['{meetings,support/**}/*.md', 'meetings/a.md', true],
    ['{meetings,support/**}/*.md', 'research/a.md', false],
    ['ticket-[0-9]*.txt', 'ticket-1042.txt', true],
    ['ticket-[!0-9]*.txt', 'ticket-1042.txt', false],
    ['a.b', 'axb', false], // dots are literal
    ['(x)+.txt', '(x)+.txt', true], // regex characters are literal
    ['./*.md', 'a.md', true],
    ['\\*.md', '*.md', true],
    ['\\*.md', 'a.md', false],
  ])('%s on %s -> %s', (pattern, path, expected) => {
    expect(globMatcher([pattern])(path)).toBe(expected);
  });

  it('includes a file when any pattern matches, and everything when there is none', () => {
    const m = globMatcher(['*.md', 'support/**/*.txt']);
    expect(['a.md', 'support/t/a.txt', 'reviews/a.txt'].map(m)).toEqual([true, true, false]);
    expect(globMatcher([])('anything/at/all')).toBe(true);
  });
});
