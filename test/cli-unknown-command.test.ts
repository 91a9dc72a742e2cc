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

  it("a request's flag given to run or estimate says it belongs to enqueue, and how to change the jobs with it", async () => {
    const model = await runCli(['run', '--model', 'gpt-4o']);
    expect(model.code).toBe(1);
    expect(model.stderr).toContain("error: unknown option '--model'");
    expect(model.stderr).toContain(
      "--model belongs to llmq enqueue: each job's request is made when its documents are enqueued. Enqueue them again with it (llmq enqueue docs/ --model ...)",
    );
    const tokens = await runCli(['estimate', '--max-tokens', '100']);
    expect(tokens.stderr).toContain('--max-tokens belongs to llmq enqueue');
    const priority = await runCli(['run', '--priority', '1']);
    expect(priority.stderr).toContain('--priority belongs to llmq enqueue: enqueue the same documents again with it');
    // a misspelt flag keeps commander's own words only
    expect((await runCli(['run', '--modle', 'x'])).stderr).not.toContain('belongs to');
  });

  it("a run's flag given to enqueue says it belongs to run, and another tool's name for --prompt or --system says which to use", async () => {
    const provider = await runCli(['enqueue', 'notes/', '--provider', 'mock']);
    expect(provider.code).toBe(1);
    expect(provider.stderr).toContain("error: unknown option '--provider'");
    expect(provider.stderr).toContain(
      '--provider belongs to llmq run: enqueue only queues the documents, and a run sends them (llmq enqueue docs/, then llmq run --provider mock)',
    );
    expect((await runCli(['enqueue', 'notes/', '--concurrency=4'])).stderr).toContain('then llmq run --concurrency 4)');
    expect((await runCli(['enqueue', 'notes/', '--rpm'])).stderr).toContain('then llmq run --rpm ...)');
    expect((await runCli(['enqueue', 'notes/', '--prompt-file', 'p.txt'])).stderr).toContain('--prompt @prompt.txt');
    // run takes them: nothing is added to its own errors
    expect((await runCli(['run', '--provider', 'nope'])).stderr).not.toContain('belongs to');
    const template = await runCli(['enqueue', 'notes/', '--template', 'x']);
    expect(template.stderr).toContain("llmq enqueue's --prompt is the template: --prompt @prompt.txt");
    expect((await runCli(['enqueue', 'notes/', '--system-prompt', 'x'])).stderr).toContain('llmq enqueue takes it as --system');
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
