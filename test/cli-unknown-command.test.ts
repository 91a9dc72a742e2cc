import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';

describe('an unknown command', () => {
  it('with --help is an error (exit 1) that names it and suggests the nearest command, not the top-level help', async () => {
    for (const [args, suggestion] of [
      [['forecast', '--help'], null],
      [['estimat', '--help'], 'estimate'],
      [['statsu', '--help'], 'status'],
      [['exprot', '-h'], 'export'],
    ] as const) {
      const r = await runCli(args);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toContain(`error: unknown command '${args[0]}'`);
      if (suggestion) expect(r.stderr).toContain(`(Did you mean ${suggestion}?)`);
      expect(r.stderr).not.toContain('Usage: llmq');
    }
  });

  it('llmq run given documents says they go in by enqueue', async () => {
    const r = await runCli(['run', 'notes/']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("error: too many arguments for 'run'");
    expect(r.stderr).toContain(
      'llmq run sends what is queued and takes no documents: enqueue them first (llmq enqueue docs/), then llmq run.',
    );
    // other commands' extra arguments are left to commander's own words
    expect((await runCli(['status', 'notes/'])).stderr).not.toContain('enqueue them first');
  });

  it('leaves real help alone: llmq --help and llmq status --help exit 0', async () => {
    const top = await runCli(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/^Usage: llmq \[options\] \[command\]/);
    const status = await runCli(['status', '--help']);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/^Usage: llmq status \[options\]/);
  });
});
