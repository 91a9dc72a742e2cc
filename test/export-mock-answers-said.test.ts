import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { enqueueJsonl } from './helpers/e2e.js';
import { startFake } from './helpers/start-fake.js';
import { tempDir } from './helpers/tmp.js';
import { SqliteStore } from '../src/store/sqlite/store.js';

// The offline mock's answers to a --schema request are well-formed JSON: in an exported file they
// read as a model's classifications. Export says so while they stand, and not once a real run has
// taken them back and answered.

describe('export of a queue the offline mock answered', () => {
  it('warns that the answers are stand-ins while they stand, and not after a real run answered the jobs', async () => {
    const dir = tempDir();
    const { db } = await enqueueJsonl(dir, [
      { id: 'a', text: 'my card was charged twice' },
      { id: 'b', text: 'the app crashes on start' },
      { id: 'c', text: 'please close my account' },
    ]);
    const mock = await runCli(['run', '--db', db, '--provider', 'mock', '--mock-latency', '5', '--progress', 'none']);
    expect(mock.code, mock.stderr).toBe(0);
    // one of them failed since, as if a later try had: an export of the failed has a row and no stand-in
    const store = new SqliteStore(db);
    store.db.prepare(`UPDATE jobs SET state = 'failed', output = NULL, error = 'x' WHERE seq = (SELECT min(seq) FROM jobs)`).run();
    await store.close();

    const out = join(dir, 'results.jsonl');
    const first = await runCli(['export', '--db', db, '--out', out]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stderr).toContain('warning: answers of the offline mock are among these (llmq run --provider mock): stand-ins');
    // none of them is in an export of the failed
    const failed = await runCli(['export', '--db', db, '--state', 'failed']);
    expect(failed.stdout.trim().split('\n')).toHaveLength(1);
    expect(failed.stderr).not.toContain('warning');

    const fake = await startFake({ latencyMs: 5 });
    const real = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none']);
    // exit 2: the failed one waits for retry-failed; the mock's two were sent for real
    expect(real.code, real.stderr).toBe(2);
    expect(fake.received).toBe(2);
    const after = await runCli(['export', '--db', db, '--out', join(dir, 'after.jsonl')]);
    expect(after.code, after.stderr).toBe(0);
    expect(after.stderr).not.toContain('warning');
  });
});
