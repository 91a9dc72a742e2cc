import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, it } from 'vitest';
import { enqueue } from '../src/ingest/enqueue.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { tempDir } from './helpers/tmp.js';
import { request as withPrompt } from './ingest/helpers.js';

// A stop (Ctrl-C) that comes once the last document is read stops nothing: the enqueue ends as if
// none came. It was said as "stopped before the end of the input" (exit 130), and the input's
// rejected lines were not kept, as for an input read in part.
it('a stop asked while the last chunk of a file is stored is no stop: every document read, the input read whole', async () => {
  const dir = tempDir();
  const file = join(dir, 'docs.jsonl');
  const lines = Array.from({ length: 500 }, (_, i) => JSON.stringify({ id: `d${i}`, text: `document ${i}` }));
  writeFileSync(file, [...lines, '{not json'].join('\n') + '\n');
  const store = new SqliteStore(join(dir, 'q.db'));
  const stop = new AbortController();
  try {
    const s = await enqueue(store, {
      sources: [file],
      request: withPrompt('{{text}}'),
      signal: stop.signal,
      // the signal comes as the chunk holding the last line is handed over
      onProgress: (p) => {
        if (p.stage === 'reading' && p.documents === 501) stop.abort();
      },
    });
    expect(s).toMatchObject({ stopped: false, newJobs: 500 });
    const status = await store.status();
    expect(status.counts.pending).toBe(500);
    // read whole: its rejected line is kept for status
    expect(status.rejected.map((r) => [r.rejected, r.first.map((f) => f.line)])).toEqual([[1, [501]]]);
  } finally {
    await store.close();
  }
});

it('a stop asked during a folder walk stops it at the next file it skips, not only at the next document', async () => {
  // thousands of *.jsonl files inside a folder (left out of a folder's documents) were all walked after a Ctrl-C
  const dir = tempDir();
  const folder = join(dir, 'notes');
  mkdirSync(folder);
  for (let i = 0; i < 300; i++) writeFileSync(join(folder, `part-${String(i).padStart(3, '0')}.jsonl`), '{}\n');
  const store = new SqliteStore(join(dir, 'q.db'));
  const stop = new AbortController();
  try {
    const s = await enqueue(store, { sources: [folder], request: withPrompt('{{text}}'), signal: stop.signal, onSkip: () => stop.abort() });
    expect(s.stopped).toBe(true);
    expect(s.skipped).toBeLessThan(300);
  } finally {
    await store.close();
  }
});
