import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { refusedAsSent } from '../src/report/refused.js';
import { runCli } from './helpers/cli.js';
import { reply } from './helpers/fake-openai.js';
import { startFake } from './helpers/start-fake.js';
import { tempDir } from './helpers/tmp.js';

// A job the provider refused as sent (a 400) fails the same way each time it is sent: status must not
// offer retry-failed for it as for a try that ran out, and must say how to retry only the others.
describe('status after failures the provider gave for the request itself', () => {
  it('says which fail again as sent, and retries only the others', async () => {
    const fake = await startFake();
    fake.respond((r) =>
      r.body.includes('REFUSED')
        ? reply.error(400, "Invalid value for 'temperature'.")
        : r.body.includes('FLAKY') && r.attempt === 1
          ? reply.serverError(500)
          : undefined,
    );
    const dir = tempDir();
    const docs = join(dir, 'docs.jsonl');
    writeFileSync(docs, ['{"id":"a","text":"REFUSED"}', '{"id":"b","text":"FLAKY"}', '{"id":"c","text":"fine"}', ''].join('\n'));
    const db = join(dir, 'q.db');
    expect((await runCli(['enqueue', docs, '--db', db])).code).toBe(0);
    const run = ['run', '--db', db, '--base-url', fake.url, '--max-attempts', '1', '--progress', 'none'];
    expect((await runCli(run)).code).toBe(2);

    const status = (await runCli(['status', '--db', db])).stdout;
    expect(status).toContain(
      '  it refused 1 as sent (HTTP 4xx): sent again, they fail\n  the same way; fix the documents or options, then enqueue again\n',
    );
    expect(status).toContain(`  to try the others again: llmq retry-failed --error "gave up after" --db ${db}`);
    expect(status).not.toContain('to try them again');

    const retry = await runCli(['retry-failed', '--error', 'gave up after', '--db', db, '--json']);
    expect(JSON.parse(retry.stdout)).toMatchObject({ requeued: 1 });
    expect(retry.stderr).not.toContain('refused');
    const second = await runCli([...run.filter((a) => a !== 'none' && a !== '--progress'), '--progress', 'plain']);
    expect(second.code).toBe(2); // the refused one is still failed; FLAKY is answered now
    // its summary does not propose a retry that would pay for the same refusal
    expect(second.stderr).toContain(`  1 failed job in the queue. See why:\n    llmq status --db ${db}\n`);
    expect(second.stderr).toContain('  the provider refused it as sent (HTTP 4xx): sent again, it fails the same way\n');
    expect(second.stderr).not.toContain('retry-failed');
    const after = (await runCli(['status', '--db', db])).stdout;
    expect(after).toContain('  the provider refused them as sent (HTTP 4xx): sent again, they fail\n');
    expect(after).not.toContain('retry-failed');
    // put back all the same when asked (a model enabled since), but said, as status says it
    const anyway = await runCli(['retry-failed', '--db', db]);
    expect(anyway.code, anyway.stderr).toBe(0);
    expect(anyway.stderr).toContain(
      '1 of them the provider refused as it was sent (HTTP 4xx): sent again unchanged, it most likely fails the same way, and may be billed.\n',
    );
  });
});

describe('which failures the same request gets again', () => {
  it('the request as sent (4xx), not a key revoked since (401), credit run out (402), 408/409, nor tries that ran out', () => {
    expect(refusedAsSent("HTTP 400: Invalid value for 'temperature'.")).toBe(true);
    expect(refusedAsSent('HTTP 422: Unprocessable')).toBe(true);
    expect(refusedAsSent('HTTP 403: This model is not available to your organization.')).toBe(true);
    for (const e of ['HTTP 401: Incorrect API key provided.', 'HTTP 402: Payment required', 'HTTP 408: timeout', 'HTTP 409: conflict']) {
      expect(refusedAsSent(e)).toBe(false);
    }
    expect(refusedAsSent('gave up after 5 attempts: HTTP 500: server')).toBe(false);
  });
});
