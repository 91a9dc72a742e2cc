import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { enqueueJsonl, readDb } from './helpers/e2e.js';
import { reply } from './helpers/fake-openai.js';
import { startFake } from './helpers/start-fake.js';
import { tempDir } from './helpers/tmp.js';
import { closedPort } from './helpers/ports.js';
import { spawnCli, collect } from './helpers/cli.js';
import { waitForLine } from './helpers/wait.js';

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
    expect(r.stderr).toContain('No job failed: 10 jobs are still pending.');
    // not the endpoint that was wrong: a place for the right one; the run's own concurrency kept
    expect(r.stderr).toContain(`Run llmq run --base-url URL --concurrency 4 --db ${db} again once this is fixed.`);
    expect(r.stderr).not.toContain(`llmq run --base-url ${fake.url}`);
    expect(fake.received).toBeGreaterThanOrEqual(3);
    // status, after it, proposes the same: the run's stats keep that the endpoint was wrong
    const status = await runCli(['status', '--db', db]);
    expect(status.stdout).toContain(`llmq run --base-url URL --concurrency 4 --db ${db}`);
    expect(status.stdout).toContain("  the last run's address takes no chat completions: give the right one\n");
    expect(status.stdout).not.toContain(`--base-url ${fake.url}`);
    const { jobs, attempts } = readDb(db);
    expect(jobs.map((j) => [j.state, j.attempts])).toEqual(Array(10).fill(['pending', 0]));
    expect(attempts.every((a) => a.outcome === 'not_counted')).toBe(true);
  });
});

describe('a --base-url whose server takes no POST there (405 from a static web server, 501 from one that does no POST)', () => {
  it.each([
    [405, 'Method Not Allowed'],
    [501, 'Error code: 501 Message: Unsupported method'],
  ])('%i: stops the run as a wrong endpoint, failing no job and waiting out no outage', async (status, page) => {
    const fake = await startFake({ latencyMs: 5 });
    fake.respond(() => reply.raw(status, `<html><body>${page}</body></html>`, { 'content-type': 'text/html' }));
    const { db } = await enqueueJsonl(
      tempDir(),
      Array.from({ length: 10 }, (_, i) => ({ id: `d${i}`, text: `document ${i}` })),
    );
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--concurrency', '4', '--progress', 'plain'], { timeoutMs: 30_000 });
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain(
      `The first answers refused the endpoint (the last HTTP ${status}): the server at --base-url takes no chat completions there`,
    );
    expect(r.stderr).toContain('(check --base-url: it usually ends in /v1)');
    expect(r.stderr).toContain('No job failed: 10 jobs are still pending.');
    expect(r.stderr).toContain(`Run llmq run --base-url URL --concurrency 4 --db ${db} again once this is fixed.`);
    expect(r.stderr).not.toContain('paused: provider down');
    expect(readDb(db).jobs.map((j) => [j.state, j.attempts])).toEqual(Array(10).fill(['pending', 0]));
  });
});

describe('a model the provider does not serve (404 model_not_found)', () => {
  it('says the model is set at enqueue and how to change it, and proposes the same endpoint again', async () => {
    const fake = await startFake({ latencyMs: 5 });
    fake.respond((req) =>
      reply.error(404, `The model \`${String(req.json?.model)}\` does not exist or you do not have access to it.`, {
        type: 'invalid_request_error',
        code: 'model_not_found',
      }),
    );
    const { db } = await enqueueJsonl(
      tempDir(),
      Array.from({ length: 6 }, (_, i) => ({ id: `d${i}`, text: `document ${i}` })),
    );
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--rpm', '6000', '--progress', 'none']);
    expect(r.code, r.stderr).toBe(1);
    expect(r.stderr).toContain('does not exist or you do not have access to it');
    expect(r.stderr).toContain(
      `A job's model is set when it is enqueued: enqueue the same documents again with the right one (llmq enqueue SOURCE... --model NAME --db ${db})`,
    );
    expect(r.stderr).toContain('No job failed: 6 jobs are still pending.');
    // the endpoint answered: it is the one to send to again, at the run's --rpm
    expect(r.stderr).toContain(`Then run llmq run --base-url ${fake.url} --rpm 6000 --db ${db}.`);
    expect(r.stderr).not.toContain('--base-url URL');
    const status = await runCli(['status', '--db', db]);
    expect(status.stdout).toContain(`llmq run --base-url ${fake.url} --rpm 6000 --db ${db}`);
    expect(status.stdout).not.toContain('--base-url URL');
    expect(readDb(db).jobs.every((j) => j.state === 'pending' && j.attempts === 0)).toBe(true);
  });
});

describe('a --base-url where nothing listens (connections refused, nothing ever answered)', () => {
  it('the command proposed after the run leaves a place for the endpoint, stopped by Ctrl-C or by --max-outage', async () => {
    const url = `http://127.0.0.1:${await closedPort()}/v1`;
    const { db } = await enqueueJsonl(tempDir(), [{ id: 'a', text: 'one' }]);
    const child = spawnCli(['run', '--db', db, '--base-url', url, '--progress', 'plain']);
    const done = collect(child, 30_000);
    await waitForLine(child, 'stderr', /nothing answers at .* give its address with --base-url/, 15_000);
    child.kill('SIGINT');
    const stopped = await done;
    expect(stopped.code, stopped.stderr).toBe(130);
    expect(stopped.stderr).toContain(`llmq run --base-url URL --db ${db}`);
    expect(stopped.stderr).not.toContain(`llmq run --base-url ${url}`);
    // status after it, as the run's end: a place for the address, for run and estimate alike
    const afterStop = await runCli(['status', '--db', db]);
    expect(afterStop.stdout).toContain(`to send the 1 pending: llmq run --base-url URL --db ${db}`);
    expect(afterStop.stdout).toContain(`llmq estimate --base-url URL --db ${db}`);
    expect(afterStop.stdout).not.toContain(`--base-url ${url}`);
    expect(afterStop.stdout).toContain("  nothing listened at the last run's address: start its server, or give another\n");

    const ended = await runCli(['run', '--db', db, '--base-url', url, '--max-outage', '2s', '--progress', 'none']);
    expect(ended.code, ended.stderr).toBe(1);
    expect(ended.stderr).toContain(`Run llmq run --base-url URL --db ${db} again once this is fixed.`);
    expect(ended.stderr).not.toContain(`llmq run --base-url ${url}`);
    const afterEnd = await runCli(['status', '--db', db, '--json']);
    expect(JSON.parse(afterEnd.stdout).lastRun.wrongEndpoint).toBe('nobody-listened');
  }, 40_000);
});
