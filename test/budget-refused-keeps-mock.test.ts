import { describe, expect, it } from 'vitest';
import { MOCK_NOW, runCli } from './helpers/cli.js';
import { seededQueue } from './helpers/seed.js';
import { startFake } from './helpers/start-fake.js';

describe('a run under --budget refused for a model without a price', () => {
  it("changes nothing: the mock's answers stay until a run that goes", async () => {
    const db = await seededQueue(4, { model: 'my-local-model' });
    expect((await runCli(['run', '--db', db, ...MOCK_NOW])).code).toBe(0);
    const fake = await startFake();
    const refused = await runCli(['run', '--db', db, '--base-url', fake.url, '--budget', '1', '--progress', 'none']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      '--budget needs a price for every model it may send to, and none is known for my-local-model (jobs the offline mock answered among them)',
    );
    expect(refused.stderr).not.toContain('go back to pending');
    expect(JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout).counts).toMatchObject({ done: 4, pending: 0 });
    expect(fake.requests).toHaveLength(0);
    // with a price it goes: the mock's answers are taken back and sent
    const priced = await runCli(['run', '--db', db, '--base-url', fake.url, '--budget', '1', '--price', '1,1', '--progress', 'none']);
    expect(priced.code, priced.stderr).toBe(0);
    expect(priced.stderr).toContain('4 jobs answered by the offline mock provider go back to pending');
    expect(fake.requests).toHaveLength(4);
  }, 30_000);
});
