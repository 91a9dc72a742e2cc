import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { exportChunks } from '../src/report/export-blocks.js';
import { emptyCounts, writeExport, writeText } from '../src/report/export.js';
import type { SqliteStore } from '../src/store/sqlite/store.js';
import { runCli, runCliInShell } from './helpers/cli.js';
import { rows, STORE_KINDS, T0 } from './helpers/stores.js';
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

  it('`llmq export | head -1` on a queue big enough for worker threads stops at once, exit 0, nothing on stderr', async () => {
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
    expect(r.stderr).toBe('exit 0\n');
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
