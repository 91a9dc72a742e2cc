import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { describe, expect, it } from 'vitest';
import { columnsFor, emptyCounts, writeExport, writeText, type ExportFormat } from '../src/report/export.js';
import { exportChunks } from '../src/report/export-blocks.js';
import { exportToFile } from '../src/report/export-files.js';
import type { ExportRow } from '../src/store/types.js';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';
import { EXPORT_QUEUE_ITEMS, fillExportQueue } from './helpers/export-queue.js';
import { STORE_KINDS, skipUnavailable } from './helpers/stores.js';

// test/golden holds what llmq wrote before export was made fast: the first records of each format
// whole, and the SHA-256 and length of the full output (fillExportQueue makes the same queue every time).
// Written again when JSON Lines and CSV gained finish_reason: with that field taken out, the new
// output was the old bytes exactly (SHA-256 and length).
const GOLDEN = new URL('./golden/', import.meta.url);
const FILES: Record<ExportFormat, string> = { jsonl: 'export.jsonl', csv: 'export.csv', 'openai-batch': 'export.openai-batch.jsonl' };
const WHOLE = new Map(
  readFileSync(new URL('export.sha256', GOLDEN), 'utf8')
    .trim()
    .split('\n')
    .map((l) => {
      const [sha, bytes, file] = l.split(' ');
      return [file!, { sha, bytes: Number(bytes) }];
    }),
);

/** A stream that keeps what it is given, and how many writes it took; `text` ends it and waits for the last write. */
function collector(highWaterMark?: number): { stream: Writable; text(): Promise<string>; writes(): number } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    highWaterMark,
    write(chunk: Buffer, _enc, cb) {
      chunks.push(chunk);
      setImmediate(cb);
    },
  });
  const text = async () => {
    stream.end();
    await finished(stream);
    return Buffer.concat(chunks).toString('utf8');
  };
  return { stream, text, writes: () => chunks.length };
}

function expectGolden(format: ExportFormat, text: string): void {
  const head = readFileSync(new URL(FILES[format], GOLDEN), 'utf8');
  expect(text.slice(0, head.length)).toBe(head);
  expect({ sha: createHash('sha256').update(text).digest('hex'), bytes: Buffer.byteLength(text) }).toEqual(WHOLE.get(FILES[format]));
}

describe.each(STORE_KINDS)('export bytes on $name', (kind) => {
  it('each format writes exactly the bytes it wrote before, across read pages and write chunks', async (ctx) => {
    skipUnavailable(kind, ctx);
    const { store } = await kind.fresh();
    await fillExportQueue(store);
    for (const format of Object.keys(FILES) as ExportFormat[]) {
      const out = collector();
      const counts = await writeExport(store.exportPages({ ...columnsFor(format) }), out.stream, { format });
      expect(counts.written + counts.skipped.pending + counts.skipped.running).toBe(EXPORT_QUEUE_ITEMS);
      expectGolden(format, await out.text());
    }
  });

  it('split in blocks between worker threads, each format writes the same bytes and counts', async (ctx) => {
    skipUnavailable(kind, ctx);
    const { store, location } = await kind.fresh();
    await fillExportQueue(store);
    for (const format of Object.keys(FILES) as ExportFormat[]) {
      const out = collector();
      const counts = emptyCounts();
      const source = { reader: store, location, filter: columnsFor(format) };
      // blocks of 50 seqs: 25 blocks, so each worker has many, asked for ahead of the writer
      await writeText(exportChunks(source, { format }, counts, { parallelMinItems: 1, blockSeqs: 50 }), out.stream);
      expectGolden(format, await out.text());
      expect(counts).toEqual(await writeExport(store.exportPages(columnsFor(format)), collector().stream, { format }));
      // a file is done with each block when its write returns: the workers fill the same buffers again
      const file = join(tempDir(), 'out');
      await exportToFile(exportChunks(source, { format }, emptyCounts(), { parallelMinItems: 1, blockSeqs: 50 }), file);
      expectGolden(format, readFileSync(file, 'utf8'));
    }
  });

  it('reads the response and the latency only when asked', async (ctx) => {
    skipUnavailable(kind, ctx);
    const { store } = await kind.fresh();
    await fillExportQueue(store);
    const first = async (f: { response?: boolean; latency?: boolean }): Promise<ExportRow> => {
      for await (const page of store.exportPages(f)) if (page[0]) return page[0];
      throw new Error('no rows');
    };
    expect(await first({})).toMatchObject({ id: 'a.txt', latencyMs: 1234, response: expect.stringContaining('chatcmpl-golden') });
    expect(await first({ response: false, latency: false })).toMatchObject({
      id: 'a.txt',
      latencyMs: null,
      response: null,
      output: expect.any(String),
    });
  });
});

describe('export writes', () => {
  it('hands the stream chunks of many lines, not one write per row', async () => {
    const { store } = await STORE_KINDS[0]!.fresh();
    await fillExportQueue(store);
    const out = collector(64 * 1024);
    await writeExport(store.exportPages({}), out.stream, { format: 'jsonl' });
    expectGolden('jsonl', await out.text());
    // ~400 KB of lines in 64 KiB chunks
    expect(out.writes()).toBeLessThan(20);
  });

  it('the CLI writes the same bytes to stdout', async () => {
    const { location, store } = await STORE_KINDS[0]!.fresh();
    await fillExportQueue(store);
    await store.close();
    const r = await runCli(['export', '--db', location, '--format', 'csv']);
    expect(r.code).toBe(0);
    expectGolden('csv', r.stdout);
  });
});
