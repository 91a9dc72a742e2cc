import { describe, expect, it } from 'vitest';
import { collect, spawnCli } from './helpers/cli.js';
import { seededQueue } from './helpers/seed.js';
import { waitFor } from './helpers/wait.js';

describe('a --tpm smaller than one request', () => {
  it('is said once, with how far apart such requests go, where the run looked stalled', async () => {
    const db = await seededQueue(3, { maxTokens: 500 });
    const child = spawnCli(['run', '--db', db, '--provider', 'mock', '--mock-latency', '0', '--tpm', '100', '--progress', 'plain']);
    const done = collect(child, 20_000);
    let said = '';
    child.stderr!.on('data', (d) => (said += String(d)));
    await waitFor(() => said.includes('warning: a request of'), { what: 'the warning', timeoutMs: 15_000 });
    child.kill('SIGINT');
    const r = await done;
    const warning = r.stderr.split('\n').filter((l) => l.startsWith('warning: a request of'));
    expect(warning).toHaveLength(1);
    expect(warning[0]).toMatch(
      /^warning: a request of \d+ tokens \(prompt \+ max_tokens\) to \S+ is more than its limit of 100 tokens a minute: such requests go one at a time, each about 5m \d\ds after the last/,
    );
  }, 30_000);
});
