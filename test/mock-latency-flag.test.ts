import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { seededQueue } from './helpers/seed.js';

describe('--mock-latency', () => {
  it('takes a unit as the other duration flags do (2s is two seconds, not two ms)', async () => {
    const db = await seededQueue(1);
    const started = Date.now();
    const r = await runCli(['run', '--db', db, '--provider', 'mock', '--mock-latency', '2s', '--progress', 'none']);
    expect(r.code, r.stderr).toBe(0);
    // the mock's latency is within ±50% of its mean: one request of 2 s takes a second at least
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
  }, 20_000);

  it('reads a bare number as milliseconds, and refuses what is not a latency', async () => {
    const db = await seededQueue(1);
    const ok = await runCli(['run', '--db', db, '--provider', 'mock', '--mock-latency', '1.5', '--progress', 'none']);
    expect(ok.code, ok.stderr).toBe(0);
    for (const bad of ['soon', '-5', '2 weeks']) {
      const r = await runCli(['run', '--db', db, '--provider', 'mock', '--mock-latency', bad]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`argument '${bad}' is invalid. Expected milliseconds (200) or a duration with its unit (200ms, 1.5s).`);
    }
  }, 20_000);
});
