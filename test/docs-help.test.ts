/**
 * The command reference (docs/commands.md) matches the CLI: every long flag `llmq <command> --help`
 * lists is named in that command's section there (from its "### `llmq <command>" heading to the next
 * heading). Runs the built CLI, so `npm run build` first (`npm test` does).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';

const REFERENCE = readFileSync(new URL('../docs/commands.md', import.meta.url), 'utf8');

/** Commander's own flags, documented once for all commands by `--help` itself. */
const BUILT_IN = new Set(['--help', '--version']);

/** The commands `llmq --help` lists (the lines under "Commands:"), without commander's `help`. */
function commandsIn(help: string): string[] {
  const block = help.split('\nCommands:\n')[1]?.split('\n\n')[0] ?? '';
  return block
    .split('\n')
    .map((l) => /^ {2}([a-z][a-z-]*)\b/.exec(l)?.[1])
    .filter((c): c is string => !!c && c !== 'help');
}

/** The long flags one command's help declares: option lines start two spaces in (descriptions wrap deeper). */
function flagsIn(help: string): string[] {
  const block = help.split('\nOptions:\n')[1]?.split('\n\n')[0] ?? '';
  return block
    .split('\n')
    .map((l) => /^ {2}(?:-[a-zA-Z], )?(--[a-z][a-z0-9-]*)/.exec(l)?.[1])
    .filter((f): f is string => !!f && !BUILT_IN.has(f));
}

/** The reference's section of a command, or null when it has none. */
function sectionOf(command: string): string | null {
  const lines = REFERENCE.split('\n');
  const start = lines.findIndex((l) => l.startsWith(`### \`llmq ${command} `) || l.startsWith(`### \`llmq ${command}\``));
  if (start < 0) return null;
  const next = lines.findIndex((l, i) => i > start && /^#{1,3} /.test(l));
  return lines.slice(start, next < 0 ? undefined : next).join('\n');
}

/** `--out` is named only by `--out` itself, not by `--out-dir`. */
const names = (text: string, flag: string) => new RegExp(`${flag}(?![a-z0-9-])`).test(text);

describe('the command reference matches --help', async () => {
  const top = await runCli(['--help']);
  const commands = commandsIn(top.stdout);

  it('llmq --help lists the commands', () => {
    expect(top.code).toBe(0);
    expect(commands).toEqual(expect.arrayContaining(['enqueue', 'run', 'status', 'retry-failed', 'show', 'export', 'copy']));
  });

  // A command made of subcommands (`llmq batches cancel`) is checked subcommand by subcommand.
  const withSubcommands: string[] = [];
  for (const command of commands) {
    const help = await runCli([command, '--help']);
    const subs = commandsIn(help.stdout);
    withSubcommands.push(...(subs.length ? subs.map((sub) => `${command} ${sub}`) : [command]));
  }

  it.each(withSubcommands)('every flag of llmq %s --help is in its section of docs/commands.md', async (command) => {
    const help = await runCli([...command.split(' '), '--help']);
    expect(help.code).toBe(0);
    const flags = flagsIn(help.stdout);
    expect(flags.length, help.stdout).toBeGreaterThan(0);
    const section = sectionOf(command);
    expect(section, `docs/commands.md has no "### \`llmq ${command}" section`).not.toBeNull();
    expect(
      flags.filter((f) => !names(section!, f)),
      `flags of llmq ${command} missing from its section of docs/commands.md`,
    ).toEqual([]);
  });
});
