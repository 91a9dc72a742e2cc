import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { MOCK_NOW, runCli } from './helpers/cli.js';
import { A_COST, ANSWERS, populate } from './helpers/populate.js';
import { tempDir } from './helpers/tmp.js';
import { parseCsv } from './helpers/csv.js';
import { CSV_COLUMNS } from '../src/report/csv-columns.js';

const ORDER = ['a.txt', 'sub/b.txt', 'c.txt', 'd.txt', 'f.txt', 'sub/deeper/g.txt', '../escape.txt', '/abs/x.txt', 'h.txt', 'e.txt'];

describe('llmq export', () => {
  it('jsonl: one line per item in input order, every field', async () => {
    const dir = tempDir();
    const { db, keys } = await populate(dir);
    const r = await runCli(['export', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    const lines = r.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.id)).toEqual(ORDER);
    const a = lines[0];
    expect(Object.keys(a)).toEqual([
      'id',
      'key',
      'state',
      'output',
      'error',
      'attempts',
      'model',
      'usage',
      'cost_usd',
      'latency_ms',
      'finish_reason',
      'source',
      'meta',
    ]);
    expect(a).toEqual({
      id: 'a.txt',
      key: keys['a.txt'],
      state: 'done',
      output: ANSWERS['a.txt'],
      error: null,
      attempts: 1,
      model: 'gpt-4o-mini',
      usage: { prompt_tokens: 100, completion_tokens: 20 },
      cost_usd: A_COST,
      latency_ms: 1234,
      finish_reason: 'stop',
      source: 'docs/a.txt',
      meta: { lang: 'en' },
    });
    // answered without a stored cost: unknown, not 0
    expect(lines[1]).toMatchObject({ id: 'sub/b.txt', state: 'done', cost_usd: null });
    expect(lines[2]).toMatchObject({ id: 'c.txt', key: keys['a.txt'], state: 'done', output: ANSWERS['a.txt'] });
    expect(lines[3]).toMatchObject({ id: 'd.txt', state: 'failed', output: null, attempts: 2, usage: null, latency_ms: 210 });
    expect(lines[3].error).toMatch(/^400 context_length_exceeded/);
    expect(lines[4]).toMatchObject({ id: 'f.txt', state: 'running', attempts: 1, latency_ms: null });
    expect(lines[9]).toMatchObject({ id: 'e.txt', state: 'pending', attempts: 0, output: null, error: null });
  });

  it('--state filters (repeatable and comma lists) and bad states are refused', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const failed = await runCli(['export', '--db', db, '--state', 'failed']);
    expect(
      failed.stdout
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l).id),
    ).toEqual(['d.txt', 'h.txt']);
    const two = await runCli(['export', '--db', db, '--state', 'pending,running']);
    expect(
      two.stdout
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l).id),
    ).toEqual(['f.txt', 'e.txt']);
    const rep = await runCli(['export', '--db', db, '--state', 'pending', '--state', 'failed']);
    expect(
      rep.stdout
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l).id),
    ).toEqual(['d.txt', 'h.txt', 'e.txt']);
    const bad = await runCli(['export', '--db', db, '--state', 'finished']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/--state.*'finished'.*pending, running, done, failed/);
  });

  it('csv: header, RFC 4180 quoting of commas, quotes and newlines, CRLF rows', async () => {
    const dir = tempDir();
    const { db, keys } = await populate(dir);
    const r = await runCli(['export', '--db', db, '--format', 'csv']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('"B says ""hello"", then, a comma\nand a second line."');
    const rows = parseCsv(r.stdout);
    expect(rows[0]).toEqual([
      'id',
      'key',
      'state',
      'model',
      'attempts',
      'prompt_tokens',
      'completion_tokens',
      'latency_ms',
      'source',
      'output',
      'error',
      'meta',
      'cost_usd',
      'finish_reason',
    ]);
    expect(rows).toHaveLength(1 + ORDER.length);
    expect(rows.slice(1).map((x) => x[0])).toEqual(ORDER);
    expect(rows[1]).toEqual([
      'a.txt',
      keys['a.txt'],
      'done',
      'gpt-4o-mini',
      '1',
      '100',
      '20',
      '1234',
      'docs/a.txt',
      ANSWERS['a.txt'],
      '',
      '{"lang":"en"}',
      String(A_COST),
      'stop',
    ]);
    expect(rows[2]![9]).toBe(ANSWERS['sub/b.txt']);
    expect(rows[2]![12]).toBe('');
    expect(rows[4]).toEqual([
      'd.txt',
      keys['d.txt'],
      'failed',
      'gpt-4o-mini',
      '2',
      '',
      '',
      '210',
      'docs/d.txt',
      '',
      expect.stringMatching(/^400 context_length_exceeded: This model's/),
      '',
      '',
      '',
    ]);
  });

  it('openai-batch: the Batch API output format, done and failed only, skipped ones counted', async () => {
    const dir = tempDir();
    const { db, keys } = await populate(dir);
    const r = await runCli(['export', '--db', db, '--format', 'openai-batch']);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/skipped 2 items \(1 pending, 1 running\); --state pending,running includes them/);
    const lines = r.stdout
      .trimEnd()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.custom_id)).toEqual(ORDER.filter((id) => id !== 'f.txt' && id !== 'e.txt'));
    const a = lines[0];
    // the Batch API's fields, then llmq's cost
    expect(Object.keys(a)).toEqual(['id', 'custom_id', 'response', 'error', 'cost_usd']);
    expect(a.cost_usd).toBe(A_COST);
    expect(a.id).toMatch(/^batch_req_[0-9a-f]{24}$/);
    expect(a.error).toBeNull();
    expect(a.response.status_code).toBe(200);
    expect(a.response.request_id).toBe(keys['a.txt']);
    // the stored provider body, parsed: what batch-API code reads
    expect(a.response.body.object).toBe('chat.completion');
    expect(a.response.body.model).toBe('gpt-4o-mini-2024-07-18');
    expect(a.response.body.choices[0].message).toEqual({ role: 'assistant', content: ANSWERS['a.txt'] });
    expect(a.response.body.usage).toEqual({ prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 });
    expect(new Set(lines.map((l) => l.id)).size).toBe(lines.length);
    const d = lines.find((l) => l.custom_id === 'd.txt');
    expect(d.response).toBeNull();
    expect(d.error).toEqual({ code: 'context_length_exceeded', message: expect.stringMatching(/^400 context_length_exceeded/) });
  });

  it('--out writes the file whole (through a temp file) and says so on stderr', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const out = join(dir, 'res', 'results.jsonl');
    const r = await runCli(['export', '--db', db, '--out', out]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/wrote 10 items to .*results\.jsonl/);
    expect(r.stderr).not.toMatch(/, as /); // the name says what it holds
    expect(readFileSync(out, 'utf8').trimEnd().split('\n')).toHaveLength(10);
    expect(readdirSync(join(dir, 'res'))).toEqual(['results.jsonl']);
  });

  it('--out - is stdout, as - is stdin to enqueue; an empty --out is refused', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const r = await runCli(['export', '--db', db, '--out', '-'], { cwd: dir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.trimEnd().split('\n')).toHaveLength(10);
    expect(existsSync(join(dir, '-'))).toBe(false);
    const empty = await runCli(['export', '--db', db, '--out', ''], { cwd: dir });
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain("option '--out <file>' argument '' is invalid. Expected a file, not an empty value");
    expect(empty.stdout).toBe('');
  });

  it('--out ending in .csv writes CSV unless --format says otherwise', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const csv = join(dir, 'results.CSV');
    expect((await runCli(['export', '--db', db, '--out', csv])).code).toBe(0);
    expect(readFileSync(csv, 'utf8').split('\r\n')[0]).toBe(CSV_COLUMNS.join(','));
    const asked = join(dir, 'lines.csv');
    const r = await runCli(['export', '--db', db, '--out', asked, '--format', 'jsonl']);
    expect(r.code).toBe(0);
    expect(JSON.parse(readFileSync(asked, 'utf8').split('\n')[0]!).id).toBe('a.txt');
    // a name that does not say what the file holds: said after it is written
    expect(r.stderr).toMatch(/wrote 10 items to .*lines\.csv, as JSON Lines \(--format csv writes CSV\)/);
    const tsv = await runCli(['export', '--db', db, '--out', join(dir, 'results.tsv')]);
    expect(tsv.stderr).toMatch(/results\.tsv, as JSON Lines/);
  });

  it('--out-dir again: a file an earlier export wrote for a state its item left is removed, and said', async () => {
    const dir = tempDir();
    const docs = join(dir, 'docs');
    mkdirSync(docs);
    writeFileSync(join(docs, 'a.txt'), 'first version');
    writeFileSync(join(docs, 'b.txt'), 'stays');
    const db = join(dir, 'q.db');
    const outDir = join(dir, 'answers');
    expect((await runCli(['enqueue', docs, '--db', db])).code).toBe(0);
    expect((await runCli(['run', '--db', db, ...MOCK_NOW])).code).toBe(0);
    expect((await runCli(['export', '--db', db, '--out-dir', outDir])).code).toBe(0);
    expect(readdirSync(outDir).sort()).toEqual(['.llmq-answers', 'a.txt.out', 'b.txt.out']);
    // a.txt edited: its item waits for a new answer, and the old one is not its answer any more
    writeFileSync(join(docs, 'a.txt'), 'second version');
    expect((await runCli(['enqueue', docs, '--db', db])).code).toBe(0);
    const again = await runCli(['export', '--db', db, '--out-dir', outDir]);
    expect(again.code).toBe(0);
    expect(again.stderr).toContain(
      `removed 1 file an earlier export left for a state its item is no longer in (the first, ${join(outDir, 'a.txt.out')}: its item is pending now)`,
    );
    expect(readdirSync(outDir).sort()).toEqual(['.llmq-answers', 'b.txt.out']);
    const pending = await runCli(['export', '--db', db, '--out-dir', outDir, '--state', 'done,pending']);
    expect(pending.stderr).not.toContain('removed');
    expect(readdirSync(outDir).sort()).toEqual(['.llmq-answers', 'a.txt.pending', 'b.txt.out']);
  });

  it('--ext without --out-dir is refused rather than dropped without a word', async () => {
    const { db } = await populate(tempDir());
    const r = await runCli(['export', '--db', db, '--ext', '.md']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('error: --ext names the answer files of --out-dir: add --out-dir DIR, or leave --ext out.');
  });

  it('--out-dir mirrors ids as paths and nothing escapes the folder', async () => {
    const dir = tempDir();
    const { db } = await populate(dir);
    const outDir = join(dir, 'answers');
    const r = await runCli(['export', '--db', db, '--out-dir', outDir]);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/wrote 6 answer files/);
    expect(r.stderr).toMatch(/skipped 4 items \(1 pending, 1 running, 2 failed\)/);
    expect(readFileSync(join(outDir, 'a.txt.out'), 'utf8')).toBe(ANSWERS['a.txt']);
    expect(readFileSync(join(outDir, 'c.txt.out'), 'utf8')).toBe(ANSWERS['a.txt']);
    expect(readFileSync(join(outDir, 'sub', 'b.txt.out'), 'utf8')).toBe(ANSWERS['sub/b.txt']);
    expect(readFileSync(join(outDir, 'sub', 'deeper', 'g.txt.out'), 'utf8')).toBe(ANSWERS['sub/deeper/g.txt']);
    expect(existsSync(join(dir, 'escape.txt.out'))).toBe(false);
    const top = readdirSync(outDir).sort();
    // .llmq-answers: the folder is one an enqueue around it leaves out
    expect(top).toEqual(['.llmq-answers', '__', 'a.txt.out', 'abs', 'c.txt.out', 'sub']);
    expect(readdirSync(join(outDir, '__'))[0]).toMatch(/^escape\.txt~[0-9a-f]{8}\.out$/);
    expect(readdirSync(join(outDir, 'abs'))[0]).toMatch(/^x\.txt~[0-9a-f]{8}\.out$/);
    // failed ones on request, with their reason; a chosen extension
    const f = await runCli(['export', '--db', db, '--out-dir', outDir, '--state', 'failed', '--ext', 'md']);
    expect(f.code).toBe(0);
    // error files are not answers, and are not called so
    expect(f.stderr).toMatch(/^wrote 2 files under /m);
    expect(readFileSync(join(outDir, 'd.txt.error'), 'utf8')).toMatch(/^400 context_length_exceeded/);
    // done items left out of that export keep their answers
    expect(readFileSync(join(outDir, 'a.txt.out'), 'utf8')).toBe(ANSWERS['a.txt']);
    const both = await runCli(['export', '--db', db, '--out-dir', outDir, '--out', join(dir, 'x.jsonl')]);
    expect(both.code).toBe(1);
    expect(both.stderr).toMatch(/one of --out and --out-dir/);
  });
});
