import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve, sep } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { emptyCounts, formatPages, writeExport } from '../src/report/export.js';
import { exportToFile } from '../src/report/export-files.js';
import { itemPath } from '../src/report/answer-paths.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import type { ExportRow } from '../src/store/types.js';
import { runCli } from './helpers/cli.js';
import { openAiResponse } from './helpers/populate.js';
import { tempDir } from './helpers/tmp.js';

function row(i: number): ExportRow {
  return {
    id: `doc-${i}`,
    source: 'in.jsonl',
    meta: null,
    key: String(i).padStart(64, '0'),
    state: 'done',
    model: 'm',
    output: 'x'.repeat(100),
    response: null,
    error: null,
    attempts: 1,
    usage: { promptTokens: 1, completionTokens: 1 },
    latencyMs: 5,
    costUsd: null,
  };
}

/** Pages of one row each, so how far the reader gets ahead of the writer is counted in rows. */
async function* rows(n: number, onRead: () => void): AsyncIterable<readonly ExportRow[]> {
  for (let i = 0; i < n; i++) {
    onRead();
    yield [row(i)];
  }
}

describe('export core', () => {
  it('waits for drain: a slow reader never has more than a buffer of rows ahead of it', async () => {
    let read = 0,
      written = 0,
      maxAhead = 0;
    const slow = new Writable({
      highWaterMark: 1024,
      write(chunk: Buffer, _enc, cb) {
        written += chunk.toString().split('\n').length - 1;
        setImmediate(cb);
      },
    });
    const counts = await writeExport(
      rows(2000, () => {
        read++;
        maxAhead = Math.max(maxAhead, read - written);
      }),
      slow,
      { format: 'jsonl' },
    );
    expect(counts.written).toBe(2000);
    // 1 KiB of ~300-byte lines: a handful in the buffer, never hundreds
    expect(maxAhead).toBeLessThan(10);
  });

  it('--out leaves no file at all when the export fails midway', async () => {
    const dir = tempDir();
    const target = join(dir, 'out.jsonl');
    async function* broken(): AsyncIterable<readonly ExportRow[]> {
      yield [row(1)];
      throw new Error('database went away');
    }
    await expect(exportToFile(formatPages(broken(), { format: 'jsonl' }, emptyCounts()), target)).rejects.toThrow('database went away');
    expect(readdirSync(dir)).toEqual([]);
    writeFileSync(target, 'previous results\n');
    await expect(exportToFile(formatPages(broken(), { format: 'jsonl' }, emptyCounts()), target)).rejects.toThrow();
    expect(readFileSync(target, 'utf8')).toBe('previous results\n');
  });

  it('maps ids to paths inside the folder, whatever the id', () => {
    const root = resolve('/tmp/answers');
    expect(itemPath(root, 'sub/a.txt', '.out')).toBe(join(root, 'sub', 'a.txt.out'));
    expect(itemPath(root, 'data.jsonl:12', '.out')).toBe(join(root, 'data.jsonl:12.out'));
    for (const id of ['../x', '../../etc/passwd', '/etc/passwd', 'a/../../b', '..', '.', '', 'C:\\win\\x', 'a\\..\\..\\b', 'ok/\u0000/x']) {
      const p = itemPath(root, id, '.out');
      expect(p.startsWith(root + sep), `${id} -> ${p}`).toBe(true);
      expect(p.split(sep)).not.toContain('..');
    }
    // rewritten ids get a hash, so they never land on a clean id's file
    expect(itemPath(root, '../x', '.out')).not.toBe(itemPath(root, '__/x', '.out'));
    expect(itemPath(root, 'a//b', '.out')).not.toBe(itemPath(root, 'a/b', '.out'));
    // never the folder's mark: written over or removed as stale, its folder would be read as documents
    expect(itemPath(root, '.llmq-answers', '')).toMatch(/\/\.llmq-answers~[0-9a-f]{8}$/);
    expect(itemPath(root, '.llmq', '-answers')).toMatch(/\/\.llmq~[0-9a-f]{8}-answers$/);
    expect(itemPath(root, '.llmq-answers', '.out')).toBe(join(root, '.llmq-answers.out'));
  });

  it('openai-batch output round-trips with an openai-batch input: every custom_id back, bodies intact', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const input = join(dir, 'batch_input.jsonl');
    const ids = ['request-1', 'request-2', 'request-3'];
    writeFileSync(
      input,
      ids
        .map((id, i) =>
          JSON.stringify({
            custom_id: id,
            method: 'POST',
            url: '/v1/chat/completions',
            body: { model: 'gpt-4o-mini', messages: [{ role: 'user', content: `question ${i}` }], max_tokens: 50 },
          }),
        )
        .join('\n') + '\n',
    );
    const enq = await runCli(['enqueue', input, '--db', db]);
    expect(enq.code, enq.stderr).toBe(0);
    const store = new SqliteStore(db);
    await store.startRun({ id: 'r', host: 'h', pid: 1, startedAt: 1, options: {} });
    const { jobs } = await store.claim({ owner: 'r', limit: 10, now: Date.now(), leaseUntil: Date.now() + 60_000, maxAttempts: 3 });
    expect(jobs).toHaveLength(3);
    for (const [i, job] of jobs.entries()) {
      const q = JSON.parse(job.request).messages[0].content as string;
      if (i === 2) {
        await store.fail(job.key, 'r', '400 invalid_request_error: bad', null, Date.now());
        continue;
      }
      const usage = { promptTokens: 7, completionTokens: 3 };
      await store.complete(job.key, {
        owner: 'r',
        output: `answer to ${q}`,
        response: openAiResponse('gpt-4o-mini', `answer to ${q}`, 7, 3),
        usage,
        attempt: { key: job.key, runId: 'r', attempt: 1, startedAt: 1, endedAt: 2, status: 200, outcome: 'done', error: null, usage },
      });
    }
    await store.close();
    const out = await runCli(['export', '--format', 'openai-batch', '--db', db]);
    expect(out.code).toBe(0);
    const lines = out.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.custom_id)).toEqual(ids);
    for (const [i, l] of lines.entries()) {
      if (l.error) {
        expect(l.response).toBeNull();
        expect(l.error.code).toBe('invalid_request_error');
        continue;
      }
      expect(l.response.status_code).toBe(200);
      expect(l.response.body.choices[0].message.content).toBe(`answer to question ${i}`);
    }
    expect(lines.filter((l) => l.error)).toHaveLength(1);
  });
});
