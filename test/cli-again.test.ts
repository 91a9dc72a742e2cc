import { describe, expect, it } from 'vitest';
import { dbArgument } from '../src/cli/again.js';

// The commands llmq suggests ("Try again: llmq retry-failed && llmq run") must reach the queue the
// user named with --db, pasted into a shell as printed, and never show a password.
describe('the --db a suggested command carries', () => {
  it('is nothing without --db (LLMQ_DB is still set in the shell, or the default applies)', () => {
    expect(dbArgument(undefined)).toBe('');
  });

  it('is the path as given, quoted for a POSIX shell only when it needs to be', () => {
    expect(dbArgument('q.db')).toBe(' --db q.db');
    expect(dbArgument('/data/runs/q-2026.db')).toBe(' --db /data/runs/q-2026.db');
    expect(dbArgument('my queue.db')).toBe(" --db 'my queue.db'");
    expect(dbArgument("bob's queue.db")).toBe(` --db 'bob'\\''s queue.db'`);
    expect(dbArgument('$HOME/q.db')).toBe(" --db '$HOME/q.db'");
  });

  it("masks a URL's password", () => {
    expect(dbArgument('postgres://llmq@db.internal/jobs')).toBe(' --db postgres://llmq@db.internal/jobs');
    expect(dbArgument('postgres://llmq:s3cret@db.internal/jobs')).toBe(" --db 'postgres://llmq:***@db.internal/jobs'");
  });
});
