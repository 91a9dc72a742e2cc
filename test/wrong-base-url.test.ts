import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { enqueueJsonl, readDb } from './helpers/e2e.js';
import { reply } from './helpers/fake-openai.js';
import { startFake } from './helpers/start-fake.js';
import { tempDir } from './helpers/tmp.js';

describe('a wrong --base-url (every request answered 404)', () => {
  it('stops the run with exit 1 and uses up no attempt of any job, as it says', async () => {
    const fake = await startFake({ latencyMs: 5 });
    fake.respond(() => reply.error(404, 'Unknown request URL: POST /wrong/chat/completions.'));
    const { db } = await enqueueJsonl(
      tempDir(),
      Array.from({ length: 10 }, (_, i) => ({ id: `d${i}`, text: `document ${i}` })),
    );
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--concurrency', '4', '--progress', 'plain']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain('The first answers were all 404');
    expect(r.stderr).toContain('No job was used up: they are all still pending.');
    // not the endpoint that was wrong: a place for the right one
    expect(r.stderr).toContain(`Run llmq run --base-url URL --db ${db} again once this is fixed.`);
    expect(r.stderr).not.toContain(`llmq run --base-url ${fake.url}`);
    expect(fake.received).toBeGreaterThanOrEqual(3);
    const { jobs, attempts } = readDb(db);
    expect(jobs.map((j) => [j.state, j.attempts])).toEqual(Array(10).fill(['pending', 0]));
    expect(attempts.every((a) => a.outcome === 'not_counted')).toBe(true);
  });
});
