import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

// Values a shell hands over as typed: an empty one (an unset variable, `--db "$QUEUE"`), and `~` after
// `=`, which no shell expands. Taken as they were, the first meant ./llmq.db and the second made a
// folder named `~` beside the user.
describe('--db, --from and --to as a shell passes them', () => {
  it('an empty value is refused (exit 1), naming the flag, and nothing is created', async () => {
    const dir = tempDir();
    for (const args of [
      ['status', '--db', ''],
      ['enqueue', '-', '--db', ' '],
      ['copy', '--from', '', '--to', join(dir, 'c.db')],
      ['copy', '--db', join(dir, 'q.db'), '--to', ''],
    ]) {
      const r = await runCli(args, { cwd: dir, input: '{"text":"a"}\n' });
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toMatch(
        /option '--(db|from|to) <path\|url>' argument '\s*' is invalid\. Expected the path of an SQLite file or a postgres:\/\/ URL, not an empty value\./,
      );
    }
    expect(existsSync(join(dir, 'llmq.db'))).toBe(false);
  });

  it('~/ after = is the home folder, for --db and LLMQ_DB as for --from and --to', async () => {
    const dir = tempDir();
    const home = join(dir, 'home');
    mkdirSync(home);
    const file = join(dir, 'in.jsonl');
    writeFileSync(file, '{"text":"alpha"}\n');
    const env = { HOME: home };
    const enqueued = await runCli(['enqueue', file, '--db=~/q.db'], { cwd: dir, env });
    expect(enqueued.code, enqueued.stderr).toBe(0);
    expect(existsSync(join(home, 'q.db'))).toBe(true);
    expect(existsSync(join(dir, '~'))).toBe(false);
    const copied = await runCli(['copy', '--from=~/q.db', '--to=~/c.db'], { cwd: dir, env });
    expect(copied.code, copied.stderr).toBe(0);
    const status = await runCli(['status', '--json'], { cwd: dir, env: { ...env, LLMQ_DB: '~/c.db' } });
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout).total).toBe(1);
    expect(existsSync(join(dir, '~'))).toBe(false);
  });
});

describe('--id-field and --text-field', () => {
  it('an empty name is refused: no line could hold it', async () => {
    for (const flag of ['--id-field', '--text-field']) {
      const r = await runCli(['enqueue', '-', flag, '', '--db', join(tempDir(), 'q.db')], { input: '{"text":"a"}\n' });
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`option '${flag} <name>' argument '' is invalid. Expected a field's name, not an empty value.`);
    }
  });
});
