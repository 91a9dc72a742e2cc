import { createWriteStream, existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { LlmqError } from '../src/errors.js';
import { exportChunks } from '../src/report/export-blocks.js';
import { emptyCounts, writeExport, writeText } from '../src/report/export.js';
import type { SqliteStore } from '../src/store/sqlite/store.js';
import { runCli, runCliInShell } from './helpers/cli.js';
import { claimOpts, OWNER, rows, STORE_KINDS, T0 } from './helpers/stores.js';
import { tempDir } from './helpers/tmp.js';

// What a large export split between worker threads promises beyond the bytes (export-golden.test.ts):
// a failure comes where one thread would have met it, and a reader that leaves stops it at once.

/** Lines written to it, whole ones only, as they come. */
function lineCounter(): { stream: Writable; lines(): number } {
  let lines = 0;
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      for (const byte of chunk) if (byte === 10) lines++;
      cb();
    },
  });
  return { stream, lines: () => lines };
}

/** Bytes written to it, and the size of each write. */
function bytesCollector(): { stream: Writable; text(): string; sizes(): number[] } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(Buffer.from(chunk));
      cb();
    },
  });
  return { stream, text: () => Buffer.concat(chunks).toString('utf8'), sizes: () => chunks.map((c) => c.length) };
}

describe('export split between worker threads', () => {
  it('a row that cannot be read fails the export after every block before it is written, with the error one thread gives', async () => {
    const { store, location } = await STORE_KINDS[0]!.fresh();
    await store.enqueue(rows(600), T0);
    // meta that is not JSON: only a damaged database holds it, and reading that row throws
    const bad = rows(600)[330]!.itemId;
    (store as SqliteStore).db.prepare("UPDATE items SET meta = '{not json' WHERE id = ?").run(bad);

    const serial = writeExport(store.exportPages({}), lineCounter().stream, { format: 'jsonl' });
    const error = await serial.then(
      () => null,
      (e: Error) => e,
    );
    expect(error).toBeInstanceOf(SyntaxError);

    const out = lineCounter();
    const source = { reader: store, location, filter: {} };
    const parallel = writeText(
      exportChunks(source, { format: 'jsonl' }, emptyCounts(), { parallelMinItems: 1, blockSeqs: 50 }),
      out.stream,
    );
    await expect(parallel).rejects.toThrow(error!.message);
    // blocks of 50: the bad item (the 331st) is in the seventh block; the six before it are written whole
    expect(out.lines()).toBe(300);
  });

  it('answers of any size reach the writer in pieces of a few MB, the same bytes as one thread writes', async () => {
    const { store, location } = await STORE_KINDS[0]!.fresh();
    await store.enqueue(rows(90), T0);
    const { jobs } = await store.claim(claimOpts({ limit: 90 }));
    for (const [n, job] of jobs.entries()) {
      // 200 KB answers, 30 to a block: 6 MB of lines a block; and one of 6 MB, longer than a piece
      const output = (n === 45 ? 'y' : 'x').repeat(n === 45 ? 6_000_000 : 200_000);
      const usage = { promptTokens: 1, completionTokens: 1 };
      const attempt = {
        key: job.key,
        runId: OWNER,
        attempt: 1,
        startedAt: T0,
        endedAt: T0 + 1,
        status: 200,
        outcome: 'done' as const,
        error: null,
        usage,
      };
      await store.complete(job.key, { owner: OWNER, output, response: '{}', usage, attempt });
    }
    const one = bytesCollector();
    await writeExport(store.exportPages({}), one.stream, { format: 'jsonl' });
    const split = bytesCollector();
    const source = { reader: store, location, filter: {} };
    await writeText(exportChunks(source, { format: 'jsonl' }, emptyCounts(), { parallelMinItems: 1, blockSeqs: 30 }), split.stream);
    expect(split.text()).toBe(one.text());
    // a 4 MiB piece plus at most one chunk of lines; the 6 MB line alone in a piece of its own
    const sizes = split.sizes();
    expect(sizes.filter((n) => n > 4.5 * 2 ** 20)).toEqual([expect.any(Number)]);
    expect(Math.max(...sizes)).toBeLessThan(6.5e6);
  });

  it('items enqueued while the export runs are written once, in order, as one thread writes them', async () => {
    const { store, location } = await STORE_KINDS[0]!.fresh();
    await store.enqueue(rows(600), T0);
    const later = rows(900).slice(600);
    const out = bytesCollector();
    const source = { reader: store, location, filter: {} };
    let enqueued = false;
    async function* thenEnqueue() {
      for await (const chunk of exportChunks(source, { format: 'jsonl' }, emptyCounts(), { parallelMinItems: 1, blockSeqs: 50 })) {
        yield chunk;
        if (!enqueued) {
          enqueued = true;
          await store.enqueue(later, T0);
        }
      }
    }
    await writeText(thenEnqueue(), out.stream);
    const ids = out
      .text()
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l).id);
    expect(ids).toEqual(rows(900).map((r) => r.itemId));
  });

  it('a worker that cannot open the queue fails the export with the reason, and stops the other', async () => {
    const { store } = await STORE_KINDS[0]!.fresh();
    await store.enqueue(rows(100), T0);
    const source = { reader: store, location: join(tempDir(), 'gone.db'), filter: {} };
    const failed = writeText(
      exportChunks(source, { format: 'jsonl' }, emptyCounts(), { parallelMinItems: 1, blockSeqs: 50 }),
      lineCounter().stream,
    );
    await expect(failed).rejects.toThrow(/gone\.db/);
    await expect(failed).rejects.toBeInstanceOf(LlmqError);
  });

  it("a write that fails (a full disk) fails the export with the disk's error, and stops the workers", async () => {
    const { store, location } = await STORE_KINDS[0]!.fresh();
    await store.enqueue(rows(600), T0);
    const source = { reader: store, location, filter: {} };
    const full = createWriteStream('/dev/full');
    await expect(
      writeText(exportChunks(source, { format: 'jsonl' }, emptyCounts(), { parallelMinItems: 1, blockSeqs: 50 }), full),
    ).rejects.toThrow(/ENOSPC/);
    full.destroy();
    // the workers' connections are closed: the write-ahead log goes with the last one
    await store.close();
    expect(existsSync(`${location}-wal`)).toBe(false);
  });

  it('a reader that stops early stops the worker threads: their connections to the queue are closed', async () => {
    const { store, location } = await STORE_KINDS[0]!.fresh();
    await store.enqueue(rows(600), T0);
    const source = { reader: store, location, filter: {} };
    let chunks = 0;
    for await (const _ of exportChunks(source, { format: 'jsonl' }, emptyCounts(), { parallelMinItems: 1, blockSeqs: 50 })) {
      if (++chunks === 2) break;
    }
    expect(chunks).toBe(2);
    // SQLite removes the write-ahead log when the last connection to the file closes
    expect(existsSync(`${location}-wal`)).toBe(true);
    await store.close();
    expect(existsSync(`${location}-wal`)).toBe(false);
  });

  it('`llmq export | head -1` on a queue big enough for worker threads stops at once, exit 130 (cut off), nothing on stderr', async () => {
    const dir = tempDir();
    const input = join(dir, 'in.jsonl');
    // 60,000 items: past the size at which the export splits in blocks between worker threads
    writeFileSync(
      input,
      Array.from({ length: 60_000 }, (_, n) => JSON.stringify({ id: `d${n}`, text: `document ${n}` })).join('\n') + '\n',
    );
    const db = join(dir, 'q.db');
    const enqueued = await runCli(['enqueue', input, '--db', db, '--model', 'mock-1']);
    expect(enqueued.code, enqueued.stderr).toBe(0);
    const r = await runCliInShell(`llmq export --db '${db}' | head -1; echo "exit \${PIPESTATUS[0]}" >&2`, { timeoutMs: 30_000 });
    expect(r.stdout).toMatch(/^\{"id":"d0",/);
    expect(r.stdout.trimEnd().split('\n')).toHaveLength(1);
    expect(r.stderr).toBe('exit 130\n');
    // and the whole export, all 60,000 in order
    const all = await runCli(['export', '--db', db, '--format', 'csv']);
    const ids = all.stdout
      .trimEnd()
      .split('\r\n')
      .slice(1)
      .map((l) => l.split(',')[0]);
    expect(ids).toEqual(Array.from({ length: 60_000 }, (_, n) => `d${n}`));
  });
});
