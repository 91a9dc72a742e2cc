import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/request.js';
import type { EnqueueResult, EnqueueRow, Store } from '../../src/store/types.js';
import { parseTemplate } from '../../src/ingest/template.js';
import { count, fixture, items, request, run, shownFixture, tempStore } from './helpers.js';
import { all } from '../helpers/store-reads.js';
import { tempDir } from '../helpers/tmp.js';
import type { EnqueueSummary } from '../../src/ingest/enqueue.js';

describe('enqueue JSONL', () => {
  it('makes one item per line: id field (stringified) or file:line, other fields kept as meta, blank lines skipped', async () => {
    const store = tempStore();
    const s = await run(store, [fixture('jsonl/reviews.jsonl')]);
    const file = shownFixture('jsonl/reviews.jsonl');
    expect(s).toMatchObject({ documents: 6, newItems: 6, newJobs: 6, rejected: 0 });
    const rows = items(store);
    expect(rows.map((r) => r.id)).toEqual(['r-001', 'r-002', 'r-003', '1004', `${file}:6`, 'r-006']);
    expect(rows.map((r) => r.source)).toEqual([1, 2, 3, 4, 6, 7].map((n) => `${file}:${n}`));
    expect(JSON.parse(rows[0]!.meta!)).toEqual({ product: 'Pixel phone', rating: 4 });
  });

  it('reports every kind of bad line with its file and line, and enqueues the good ones', async () => {
    const store = tempStore();
    const s = await run(store, [fixture('jsonl/bad-lines.jsonl')], { maxDocBytes: 2048 });
    const file = shownFixture('jsonl/bad-lines.jsonl');
    expect(s.rejections.map((r) => `${r.line}: ${r.reason}`)).toEqual([
      `2: malformed JSON (Expected ',' or '}' after property value in JSON at position 32)`,
      '3: not a JSON object (each line must be one {...} document, got an array)',
      // a line without it where others have it: the line is to mend, not the flag
      '4: no "text" field (it has "id", "body"), where most lines before it have one: mend this line',
      '5: "text" is a number, not a string',
      '6: empty document',
      '7: empty document (nothing but whitespace)',
      '8: invalid UTF-8 (save the file as UTF-8; Latin-1 or Windows-1252 text is converted by iconv -f WINDOWS-1252 -t UTF-8)',
      '9: "id" is an object; an id must be a non-empty string or a number',
      '10: duplicate id "a" (first at ' + file + ':1, which is kept)',
      '13: batch line "body" must have a "model" string and a non-empty "messages" array',
      '14: batch line url is "/v1/embeddings"; llmq sends /v1/chat/completions requests only',
      '15: line is 3,023 bytes, over --max-doc-bytes 2KiB',
    ]);
    expect(s.rejections.every((r) => r.path === file)).toBe(true);
    expect(s).toMatchObject({ documents: 15, rejected: 12, newItems: 3 });
    expect(items(store).map((r) => r.id)).toEqual(['a', 'h', 'j']);
    expect(JSON.parse((await store.item('a'))!.job.request).messages[0].content).toBe('Summarize: A good line.');
  });

  it('keeps a numeric id as the line writes it: 64-bit ids past 2^53 are not rounded into each other', async () => {
    const store = tempStore();
    const input = Readable.from([
      [
        '{"id":1234567890123456789,"text":"a"}',
        '{"id":1234567890123456788,"text":"b"}',
        '{"id": 1e400, "text":"c"}',
        '{"id":42,"text":"d"}',
        // fractions read as before
        '{"id":1.50,"text":"f"}',
        // the key written twice (a nested record): which is the id cannot be told from the text
        '{"id":9007199254740993,"text":"e","parent":{"id":9007199254740995}}',
      ].join('\n'),
    ]);
    const s = await run(store, ['-'], { stdin: input });
    expect(items(store).map((r) => r.id)).toEqual(['1234567890123456789', '1234567890123456788', '1e400', '42', '1.5']);
    expect(s.rejections.map((r) => `${r.line}: ${r.reason}`)).toEqual([
      '6: "id" is a number llmq cannot read exactly from this line (it reads 9007199254740992): write the id as a string',
    ]);
  });

  it('says which lines held an integer past 2^53 in another field, which reads rounded, and nothing of numbers read exactly', async () => {
    const store = tempStore();
    const input = Readable.from([
      [
        '{"id":"a","text":"card 1234567812345678","n":10000000000000000,"safe":9007199254740991,"big":1e300}',
        '{"id":"b","text":"b","tags":[1,{"user":98765432109876543219}]}',
        // rejected (no text): what is not stored is not said
        '{"id":"c","n":9007199254740993}',
        '{"id":"d","text":"d","m":-9007199254740993}',
      ].join('\n'),
    ]);
    const s = await run(store, ['-'], { stdin: input });
    expect(s.roundedNumbers).toEqual({ count: 2, path: '-', line: 2, field: 'tags.1.user', read: 98765432109876540000 });
    const clean = await run(tempStore(), ['-'], {
      stdin: Readable.from([
        [
          '{"id":"a","text":"x","n":10000000000000000}',
          // exponents and fractions are no digits to keep, beside a 16-digit id or not
          '{"id":1234567890123456,"text":"x","n":1e16,"m":2e17,"k":100000000000000000.0}',
          // the id's own rounded digits are read from the text: nothing of meta is rounded
          '{"id":12345678901234567891,"text":"x","n":5}',
        ].join('\n'),
      ]),
    });
    expect(clean.roundedNumbers).toBeNull();
  });

  it('refuses an id or custom_id holding a NUL character, naming the line, and keeps the rest', async () => {
    const store = tempStore();
    const batchBody = JSON.stringify({ model: 'gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] });
    const input = Readable.from([
      `{"id":"a\\u0000b","text":"one"}\n{"id":"c","text":"two \\u0000 inside is fine"}\n{"custom_id":"d\\u0000","method":"POST","url":"/v1/chat/completions","body":${batchBody}}\n`,
    ]);
    const s = await run(store, ['-'], { stdin: input });
    expect(s.rejections.map((r) => `${r.line}: ${r.reason}`)).toEqual([
      '1: "id" holds a NUL character (\\u0000); an id must not',
      '3: "custom_id" holds a NUL character (\\u0000); an id must not',
    ]);
    expect(items(store).map((r) => r.id)).toEqual(['c']);
  });

  it('refuses whole a file that is one JSON document over many lines, read no further, with the conversion', async () => {
    const dir = tempDir();
    const file = join(dir, 'pretty.jsonl');
    // the last record of the array has no comma after it: read line by line, it alone was enqueued
    writeFileSync(file, '[\n  {"id": "a", "text": "one"},\n  {"id": "b", "text": "two"}\n]\n');
    const store = tempStore();
    const s = await run(store, [file]);
    expect(s.rejections.map((r) => [r.line, r.reason])).toEqual([
      [
        undefined,
        'one JSON document written over many lines (its first line is [), not JSON Lines (one {...} object per line), so none of it ' +
          `was read: convert it with jq -c '.[]' ${file} > records.jsonl (an array of records) or jq -c . ${file} > records.jsonl (one object)`,
      ],
    ]);
    expect(s).toMatchObject({ rejected: 1, newItems: 0 });
    expect(items(store)).toEqual([]);
    // records one to a line in an array: its first line says so too
    const inArray = join(dir, 'array.jsonl');
    writeFileSync(inArray, '[{"id": "a", "text": "one"},\n{"id": "b", "text": "two"}]\n');
    const a = await run(tempStore(), [inArray]);
    expect(a.rejections).toHaveLength(1);
    expect(a.rejections[0]!.reason).toMatch(
      /^one JSON document written over many lines \(its first line is \[\{"id": "a", "text": "one"\},\), not JSON Lines/,
    );
    // a file whose first line is a broken record is no such file: each line is what it is
    const broken = join(dir, 'broken.jsonl');
    writeFileSync(broken, '{"id": "a", "text": "one"\n{"id": "b", "text": "two"}\n');
    const b = await run(tempStore(), [broken]);
    expect(b.rejections.map((r) => r.line)).toEqual([1]);
    expect(b.rejections[0]!.reason).not.toContain('jq');
    expect(b.newItems).toBe(1);
  });

  it('says once that a file is UTF-16 or gzip, read no further, rather than rejecting each line as malformed', async () => {
    const dir = tempDir();
    const lines = '{"id":"a","text":"one"}\r\n{"id":"b","text":"two"}\r\n{"id":"c","text":"three"}\r\n';
    // what PowerShell's > writes: UTF-16 little-endian with its byte-order mark, CRLF line ends
    const utf16 = join(dir, 'windows.jsonl');
    writeFileSync(utf16, Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(lines, 'utf16le')]));
    const gz = join(dir, 'records.jsonl.gz');
    writeFileSync(gz, gzipSync(lines));
    const store = tempStore();
    const s = await run(store, [utf16, gz, fixture('jsonl/reviews.jsonl')]);
    expect(s.rejections.map((r) => [r.path, r.line, r.reason])).toEqual([
      [utf16, undefined, 'UTF-16 text (save the file as UTF-8, e.g. with iconv -f UTF-16 -t UTF-8)'],
      [gz, undefined, 'gzip-compressed (decompress it as it is read: zcat FILE | llmq enqueue -, or llmq enqueue <(zcat FILE))'],
    ]);
    // and the files after them are read
    expect(s).toMatchObject({ rejected: 2, newItems: 6 });
    // from stdin too
    const piped = await run(tempStore(), ['-'], { stdin: Readable.from([Buffer.from(`\ufeff${lines}`, 'utf16le')]) });
    expect(piped.rejections.map((r) => r.reason)).toEqual(['UTF-16 text (save the file as UTF-8, e.g. with iconv -f UTF-16 -t UTF-8)']);
  });

  it('an id of true or false is refused, as the message says: ids are strings or numbers', async () => {
    const store = tempStore();
    const s = await run(store, ['-'], { stdin: Readable.from(['{"id":true,"text":"x"}\n', '{"id":7,"text":"y"}\n']) });
    expect(s.rejections.map((r) => `${r.line}: ${r.reason}`)).toEqual([
      '1: "id" is a boolean; an id must be a non-empty string or a number',
    ]);
    expect(items(store).map((r) => r.id)).toEqual(['7']);
  });

  it('rejects a batch line asking for a streamed answer (each try would be paid for, then fail as not JSON)', async () => {
    const store = tempStore();
    const line = (id: string, extra: string) =>
      `{"custom_id":"${id}","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]${extra}}}\n`;
    const input = Readable.from([line('s1', ',"stream":true'), line('s2', ',"stream":false'), line('s3', '')]);
    const s = await run(store, ['-'], { stdin: input });
    expect(s.rejections.map((r) => `${r.line}: ${r.reason}`)).toEqual([
      '1: batch line "body" sets "stream"; llmq reads whole answers: remove "stream" (or set it to false)',
    ]);
    expect(items(store).map((r) => r.id)).toEqual(['s2', 's3']);
  });

  it('uses --id-field and --text-field', async () => {
    const store = tempStore();
    const input = Readable.from(['{"uuid":"u1","body":"First.","id":"kept as meta"}\n{"uuid":"u2","body":"Second."}\n']);
    const s = await run(store, ['-'], { stdin: input, idField: 'uuid', textField: 'body' });
    expect(s).toMatchObject({ newItems: 2, rejected: 0 });
    expect(items(store)).toMatchObject([
      { id: 'u1', source: '-:1', meta: '{"id":"kept as meta"}' },
      { id: 'u2', source: '-:2', meta: null },
    ]);
  });

  it('fills {{meta.FIELD}} from the line and rejects lines that lack the field', async () => {
    const store = tempStore();
    const input = Readable.from(['{"id":1,"text":"Bonjour","lang":"French"}\n{"id":2,"text":"Hello"}\n']);
    const s = await run(store, ['-'], { stdin: input, request: request('Translate this {{meta.lang}} text: {{text}}') });
    expect(s.rejections).toEqual([
      {
        path: '-',
        line: 2,
        id: '2',
        reason: 'the template needs {{meta.lang}} but the document has no "lang" field (it has no other fields)',
      },
    ]);
    const [job] = await all(store.copier.dumpJobs());
    const req = JSON.parse(job!.request);
    expect(req.messages[0].content).toBe('Translate this French text: Bonjour');
  });

  it('takes OpenAI Batch lines as they are: body is the request, custom_id the id; identical bodies share a job', async () => {
    const store = tempStore();
    const file = fixture('jsonl/openai-batch.jsonl');
    const s = await run(store, [file], { request: { ...request('ignored'), model: 'not-this-one' } });
    expect(s).toMatchObject({ documents: 4, newItems: 4, newJobs: 3, rejected: 0 });
    const rows = items(store);
    expect(rows.map((r) => r.id)).toEqual(['q-1', 'q-2', 'q-3', 'q-4']);
    expect(rows[0]!.job_key).toBe(rows[2]!.job_key);
    expect(JSON.parse(rows[0]!.meta!)).toEqual({ method: 'POST', url: '/v1/chat/completions' });
    const { job } = (await store.item('q-2'))!;
    expect(job.key).toBe(rows[1]!.job_key);
    expect(job.model).toBe('gpt-4o-mini');
    expect(job.request).toBe(
      canonicalJson({
        model: 'gpt-4o-mini',
        max_tokens: 60,
        temperature: 0,
        messages: [
          { role: 'system', content: 'You are a precise translator.' },
          { role: 'user', content: 'Translate to French: thank you very much' },
        ],
      }),
    );
  });

  it('reads JSONL from stdin (-) and is idempotent on a second pass', async () => {
    const store = tempStore();
    const lines = Array.from({ length: 50 }, (_, i) => JSON.stringify({ id: `n${i}`, text: `note ${i}` })).join('\n');
    expect(await run(store, ['-'], { stdin: Readable.from([lines]) })).toMatchObject({ newItems: 50, newJobs: 50 });
    expect(await run(store, ['-'], { stdin: Readable.from([lines]) })).toMatchObject({ newItems: 0, newJobs: 0, unchanged: 50 });
    expect(count(store, 'jobs')).toBe(50);
  });

  it('rejects an id first seen in an earlier batch, naming where, and keeps the first', async () => {
    const store = tempStore();
    const lines = ['{"id":"x","text":"first"}', '{"id":"y","text":"b"}', '{"id":"z","text":"c"}', '{"id":"x","text":"second"}'];
    const s = await run(store, ['-'], { stdin: Readable.from([lines.join('\n')]), batchRows: 2 });
    expect(s.batches).toBe(2); // the first x was written, and forgotten by the batch, before the second came
    expect(s.rejections).toEqual([{ path: '-', line: 4, reason: 'duplicate id "x" (first at -:1, which is kept)' }]);
    expect(items(store).map((r) => [r.id, r.source])).toEqual([
      ['x', '-:1'],
      ['y', '-:2'],
      ['z', '-:3'],
    ]);
  });

  it('duplicate ids, checked 64 at a time, are reported and kept exactly as one at a time would: within a check, across checks, and a file named twice', async () => {
    // Ids repeat within one check of 64 rows (lines 1-2, and three times at 20-22), across the 64-row
    // boundary (64/65), twice in a later check (65 and 76, both naming 64), as a repeat of a repeat
    // (130 after 2 and 70), and bad lines sit among them.
    const idOf = (n: number): string | null => {
      if (n === 2 || n === 70 || n === 130) return 'a';
      if (n === 21 || n === 22) return 't';
      if (n === 65 || n === 76) return 'm';
      if (n === 100) return null; // malformed
      if (n === 101) return 'e1'; // empty text
      return { 1: 'a', 20: 't', 64: 'm' }[n] ?? `d${n}`;
    };
    const lines = Array.from({ length: 140 }, (_, i) => {
      const n = i + 1;
      if (idOf(n) === null) return '{"id":"broken",';
      return JSON.stringify({ id: idOf(n), text: n === 101 ? ' ' : `line ${n}` });
    });
    const text = `${lines.join('\n')}\n`;
    const file = join(tempDir(), 'dups.jsonl');
    writeFileSync(file, text);
    // What checking each id as it comes gives: the first keeps it, every later one names the first.
    const expected = (path: string, passes: number) => {
      const rejections: string[] = [];
      const kept: string[][] = [];
      const firstAt = new Map<string, string>();
      for (let pass = 0; pass < passes; pass++) {
        for (let n = 1; n <= lines.length; n++) {
          const id = idOf(n);
          if (id === null) rejections.push(`${n}: malformed JSON`);
          else if (n === 101) rejections.push(`${n}: empty document (nothing but whitespace)`);
          else if (firstAt.has(id)) rejections.push(`${n}: duplicate id "${id}" (first at ${firstAt.get(id)}, which is kept)`);
          else {
            firstAt.set(id, `${path}:${n}`);
            kept.push([id, `${path}:${n}`]);
          }
        }
      }
      return { rejections, kept };
    };
    const seen = (s: EnqueueSummary, store: ReturnType<typeof tempStore>) => ({
      rejections: s.rejections.map((r) => `${r.line}: ${r.reason.replace(/^malformed JSON.*/, 'malformed JSON')}`),
      kept: items(store).map((r) => [r.id, r.source]),
    });

    // The same lines twice (a copy of the file: the same file named twice is read once): every line of
    // the second pass is a duplicate, naming its line in the first file.
    const copy = join(tempDir(), 'dups-again.jsonl');
    writeFileSync(copy, text);
    const twice = tempStore();
    expect(seen(await run(twice, [file, copy]), twice)).toEqual(expected(file, 2));

    // From stdin in uneven pieces, so that checks also come part way through a group of 64, and batches of 50 rows.
    const once = tempStore();
    const pieces = [];
    for (let at = 0, k = 0; at < text.length; k++) {
      const end = at + [7, 300, 1000, 53][k % 4]!;
      pieces.push(text.slice(at, end));
      at = end;
    }
    expect(seen(await run(once, ['-'], { stdin: Readable.from(pieces), batchRows: 50 }), once)).toEqual(expected('-', 1));
  });

  it('a document rejected for its content leaves its id free for a later one', async () => {
    const store = tempStore();
    const input = Readable.from(['{"id":"a","text":"no lang"}\n{"id":"a","text":"Hallo","lang":"German"}\n']);
    const s = await run(store, ['-'], { stdin: input, request: request('{{meta.lang}}: {{text}}') });
    expect(s.rejections).toEqual([
      {
        path: '-',
        line: 1,
        id: 'a',
        reason: 'the template needs {{meta.lang}} but the document has no "lang" field (it has no other fields)',
      },
    ]);
    expect(items(store)).toMatchObject([{ id: 'a', source: '-:2' }]);
  });

  it('streams: a big input is written in bounded batches while it is still being read, never held whole', async () => {
    const store = tempStore();
    const total = 20_000;
    let produced = 0;
    const producedAtWrite: number[] = [];
    const sizes: number[] = [];
    // The real store, wrapped to see each batch as it is written.
    const watched = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === 'enqueue') {
          return (rows: readonly EnqueueRow[], now: number): Promise<EnqueueResult> => {
            sizes.push(rows.length);
            producedAtWrite.push(produced);
            return target.enqueue(rows, now);
          };
        }
        // the store's own methods on the store itself: its private fields are not the proxy's
        const value = Reflect.get(target, prop, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as Store;
    const text = 'lorem ipsum '.repeat(20);
    const input = Readable.from(
      (function* () {
        // Chunks of 700 lines do not line up with batches of 1000: remainders must carry over.
        for (let i = 0; i < total; i += 700) {
          let chunk = '';
          const end = Math.min(i + 700, total);
          for (let j = i; j < end; j++) chunk += `{"id":"d${j}","text":"${text}${j}"}\n`;
          produced = end;
          yield chunk;
        }
      })(),
    );
    const { enqueue } = await import('../../src/ingest/enqueue.js');
    const s = await enqueue(watched, { sources: ['-'], stdin: input, request: request(), batchRows: 1000 });
    expect(s).toMatchObject({ newItems: total, rejected: 0 });
    expect(count(store, 'items')).toBe(total);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(total);
    // Full batches of exactly batchRows, not one write per chunk.
    expect(sizes).toEqual(Array.from({ length: total / 1000 }, () => 1000));
    // The first batch was written when at most a few chunks had been read.
    expect(producedAtWrite[0]).toBeLessThanOrEqual(2100);
    expect(producedAtWrite.at(-1)).toBe(total);
    expect(s.batches).toBe(sizes.length);
  });

  it('keeps batches small in bytes too when documents are large', async () => {
    const store = tempStore();
    const sizes: number[] = [];
    const watched = Object.assign(Object.create(store), {
      enqueue: (rows: readonly EnqueueRow[], now: number) => {
        sizes.push(rows.length);
        return store.enqueue(rows, now);
      },
      keepRejections: store.keepRejections.bind(store),
    }) as Store;
    const big = 'x'.repeat(100_000);
    const input = Readable.from(Array.from({ length: 40 }, (_, i) => `{"id":${i},"text":"${big}"}\n`));
    const { enqueue } = await import('../../src/ingest/enqueue.js');
    await enqueue(watched, {
      sources: ['-'],
      stdin: input,
      request: { ...request(), prompt: parseTemplate('{{text}}') },
      batchBytes: 1_000_000,
    });
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(40);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(11);
  });
});
