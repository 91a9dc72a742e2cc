import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import pg from 'pg';
import { PostgresStore } from '../src/store/postgres/store.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { runCli } from './helpers/cli.js';
import { firstSnapshot, startServe, type ServeChild } from './helpers/dashboard.js';
import { seedJobs } from './helpers/seed.js';
import { freshPgUrl, PG_URL, rows, STORE_KINDS, skipUnavailable } from './helpers/stores.js';
import { tempDir } from './helpers/tmp.js';

// The dashboard's JSON, read over HTTP as the page reads it (the page itself: serve-browser.test.ts).

const served: ServeChild[] = [];
afterEach(async () => {
  await Promise.all(served.splice(0).map((s) => s.stop()));
});

describe('llmq serve: the JSON behind the page', () => {
  it('the snapshot has the batches `status --json` has, and an item is found by its id or its job key, as `llmq show` finds it', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    const keys = await seedJobs(store, 4, { model: 'mock-1' });
    await store.close();
    const run = await runCli(['run', '--db', db, '--provider', 'mock', '--via', 'batch', '--mock-latency', '0', '--poll', '0.05']);
    expect(run.code, run.stderr).toBe(0);
    const status = JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout);
    expect(status.batches.rows).toHaveLength(1);

    const serve = await startServe(['--db', db, '--poll', '0.25']);
    served.push(serve);
    const snapshot = await firstSnapshot(serve.url);
    expect(snapshot.type).toBe('snapshot');
    const { ageSeconds: _a, ...batch } = snapshot.report.batches.rows[0];
    const { ageSeconds: _b, ...expected } = status.batches.rows[0];
    expect(batch).toEqual(expected);
    expect(snapshot.report.batches.live).toBe(0);
    // the same report once, for a script: what `status --json` gives
    const once = (await (await fetch(`${serve.url}api/status`)).json()) as typeof status;
    expect([once.counts, once.total, once.cost.usd, once.batches.rows.length]).toEqual([status.counts, status.total, status.cost.usd, 1]);
    // read when asked, with no page listening (the feed polls only for one)
    const more = new SqliteStore(db);
    await more.enqueue(rows(3, { prefix: 'more' }), Date.now());
    await more.close();
    const later = (await (await fetch(`${serve.url}api/status`)).json()) as typeof status;
    expect(later.total).toBe(status.total + 3);

    const byKey = await fetch(`${serve.url}api/item?id=${keys[2]!.slice(0, 10)}`);
    expect(byKey.status).toBe(200);
    const item = (await byKey.json()) as { job: { key: string } };
    expect(item.job.key).toBe(keys[2]);
    // what `llmq show --json` gives, sharedWith and the answer's finishReason with it
    const shown = JSON.parse((await runCli(['show', keys[2]!.slice(0, 10), '--db', db, '--json'])).stdout);
    expect(item).toEqual(shown);
    expect(item).toHaveProperty('sharedWith');
    const unknown = await fetch(`${serve.url}api/item?id=ffffffff00`);
    expect(unknown.status).toBe(404);
    expect(((await unknown.json()) as { error: string }).error).toBe('no item with id ffffffff00, nor a job whose key starts with it');
    // an item needs its id: without one, a 400 saying so, not "no item with id "
    for (const bare of ['api/item', 'api/item?id=']) {
      const noId = await fetch(`${serve.url}${bare}`);
      expect(noId.status).toBe(400);
      expect(((await noId.json()) as { error: string }).error).toContain('/api/item?id=ID');
    }
    // the items of a failure reason need the reason
    const noReason = await fetch(`${serve.url}api/failed-items`);
    expect(noReason.status).toBe(400);
    expect(((await noReason.json()) as { error: string }).error).toContain('?error=REASON');
    expect((await fetch(`${serve.url}api/failed-items?error=${encodeURIComponent('HTTP 400')}`)).status).toBe(200);
  });

  it('POST /api/retry-failed {} leaves failed the jobs cut off at max_tokens, as a plain `llmq retry-failed` does, and says how many', async () => {
    // sent as they were they are most likely cut off, and paid for, again: the CLI left them, the page's button did not
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 4);
    const { jobs } = await store.claim({ owner: 'r', limit: 4, now: Date.now(), leaseUntil: Date.now() + 60_000, maxAttempts: 5 });
    for (const [i, j] of jobs.entries()) {
      const error = i < 2 ? 'the answer was cut off at max_tokens (finish_reason "length"): not the JSON asked for' : 'HTTP 400: bad thing';
      await store.fail(j.key, 'r', error, null, Date.now());
    }
    await store.close();
    const serve = await startServe(['--db', db, '--poll', '0.25']);
    served.push(serve);
    const res = await fetch(`${serve.url}api/retry-failed`, {
      method: 'POST',
      headers: { 'x-llmq-token': serve.token!, 'content-type': 'application/json' },
      body: '{}',
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ requeued: 2, leftCutOff: 2 });
    const status = JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout);
    expect(status.counts).toMatchObject({ pending: 2, failed: 2 });
  });

  it('GET /api/status is a 503 once the queue cannot be read, not the last report read before', async (ctx) => {
    skipUnavailable(STORE_KINDS.find((k) => k.name === 'postgres')!, ctx);
    const url = freshPgUrl();
    const store = await PostgresStore.open(url);
    await store.enqueue(rows(2), Date.now());
    await store.close();
    const serve = await startServe(['--db', url, '--poll', '30']);
    served.push(serve);
    const ok = await fetch(`${serve.url}api/status`);
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { total: number }).total).toBe(2);
    // the queue gone from under it: each query now fails
    const client = new pg.Client({ connectionString: PG_URL });
    await client.connect();
    await client.query(`DROP SCHEMA "${new URL(url).searchParams.get('schema')}" CASCADE`);
    await client.end();
    const gone = await fetch(`${serve.url}api/status`);
    expect(gone.status).toBe(503);
    // with the reason the last poll met
    expect(((await gone.json()) as { error: string }).error).toMatch(/^the queue cannot be read now: .*does not exist/);
  });
});
