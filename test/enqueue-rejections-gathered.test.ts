import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { REJECTIONS_NAMED_ONE_BY_ONE, RejectionLog } from '../src/cli/rejection-log.js';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

const NO_BODY = 'no "body" field (it has "text": check the name given to --text-field)';

describe('enqueue: many lines of one file rejected for one reason', () => {
  it('names the first ten as they come and the rest as line ranges at the end, not one line of stderr each', async () => {
    const dir = tempDir();
    const file = join(dir, 'big.jsonl');
    // 5,000 lines read with the wrong --text-field, one good line among them (line 2,500), a malformed one last
    const lines = Array.from({ length: 5000 }, (_, i) => (i === 2499 ? '{"body": "the one"}' : JSON.stringify({ text: `doc ${i}` })));
    writeFileSync(file, `${lines.join('\n')}\n{oops\n`);
    const r = await runCli(['enqueue', 'big.jsonl', '--db', join(dir, 'q.db'), '--text-field', 'body'], { cwd: dir });
    expect(r.code, r.stderr).toBe(2);
    const rejected = r.stderr.split('\n').filter((l) => l.startsWith('rejected '));
    expect(rejected).toEqual([
      ...Array.from({ length: 10 }, (_, i) => `rejected big.jsonl:${i + 1}: ${NO_BODY}`),
      expect.stringMatching(/^rejected big\.jsonl:5001: malformed JSON/),
      `rejected big.jsonl:11-2499,2501-5000 (4,989 more lines): ${NO_BODY}`,
    ]);
    expect(r.stderr).toMatch(/read 5,001 documents .*: 1 new job, 1 new item, .* 5,000 rejected/);
  }, 20_000);

  it('a line without the text field where most lines before it have one is the line to mend: every such line one reason, gathered', async () => {
    const dir = tempDir();
    const file = join(dir, 'tickets.jsonl');
    // 2,000 tickets, every 50th (from the 100th) with no text
    const lines = Array.from({ length: 2000 }, (_, i) =>
      i >= 99 && (i + 1) % 50 === 0
        ? JSON.stringify({ id: `t${i}`, subject: 'no text' })
        : JSON.stringify({ id: `t${i}`, text: `ticket ${i}` }),
    );
    writeFileSync(file, `${lines.join('\n')}\n`);
    const r = await runCli(['enqueue', 'tickets.jsonl', '--db', join(dir, 'q.db')], { cwd: dir });
    expect(r.code, r.stderr).toBe(2);
    const rejected = r.stderr.split('\n').filter((l) => l.startsWith('rejected '));
    const reason = 'no "text" field (it has "id", "subject"), where most lines before it have one: mend this line';
    expect(rejected).toEqual([
      ...Array.from({ length: 10 }, (_, i) => `rejected tickets.jsonl:${100 + 50 * i}: ${reason}`),
      expect.stringMatching(
        new RegExp(`^rejected tickets\\.jsonl:600,650,.*,2000 \\(29 more lines\\): ${reason.replace(/[()]/g, '\\$&')}$`),
      ),
    ]);
  });

  it('keeps files, reasons and line runs apart', () => {
    const log = new RejectionLog();
    const printed: string[] = [];
    const add = (path: string, line: number | undefined, reason: string) => {
      const now = log.add({ path, line, reason });
      if (now) printed.push(`${now.where}: ${now.reason}`);
    };
    for (let line = 1; line <= 30; line++) add('a.jsonl', line, line % 2 ? 'odd' : 'even');
    for (let line = 1; line <= 12; line++) add('b.jsonl', line, 'odd');
    // files rejected whole: the first ten of a reason named, the rest counted (a template asking a
    // folder's files for a field they cannot have printed one line per file, thousands of them)
    for (let n = 1; n <= 14; n++) add(`docs/${n}.txt`, undefined, 'not UTF-8');
    add('docs/own.txt', undefined, 'binary file (contains NUL bytes)');
    expect(printed.filter((p) => p.startsWith('a.jsonl'))).toHaveLength(2 * REJECTIONS_NAMED_ONE_BY_ONE);
    expect(printed.filter((p) => p.startsWith('b.jsonl'))).toHaveLength(REJECTIONS_NAMED_ONE_BY_ONE);
    expect(printed.filter((p) => p.startsWith('docs/'))).toEqual([
      ...Array.from({ length: REJECTIONS_NAMED_ONE_BY_ONE }, (_, i) => `docs/${i + 1}.txt: not UTF-8`),
      'docs/own.txt: binary file (contains NUL bytes)',
    ]);
    expect(log.gathered()).toEqual([
      { where: 'a.jsonl:21,23,25,27,29 (5 more lines)', reason: 'odd' },
      { where: 'a.jsonl:22,24,26,28,30 (5 more lines)', reason: 'even' },
      { where: 'b.jsonl:11-12 (2 more lines)', reason: 'odd' },
      { where: '4 more files (the last: docs/14.txt)', reason: 'not UTF-8' },
    ]);
  });

  it('counts scattered lines past fifty runs without keeping each', () => {
    const log = new RejectionLog();
    for (let line = 1; line <= 2 * (REJECTIONS_NAMED_ONE_BY_ONE + 60); line += 2) log.add({ path: 'x.jsonl', line, reason: 'r' });
    const [gathered] = log.gathered();
    expect(gathered!.where).toMatch(/^x\.jsonl:21,23,.*,119 \(60 more lines; 10 of them after these\)$/);
    expect(gathered!.where.split(',')).toHaveLength(50);
  });

  it('counts at most ten thousand files and reasons: lines of reasons past those are printed, not kept', () => {
    const log = new RejectionLog();
    for (let line = 1; line <= 10_000; line++) log.add({ path: 'x.jsonl', line, reason: `reason ${line}` });
    // a new reason now: printed each time, never gathered
    for (let line = 10_001; line <= 10_020; line++) expect(log.add({ path: 'x.jsonl', line, reason: 'late' })).not.toBeNull();
    // one counted already is gathered as before
    for (let n = 0; n < 10; n++) log.add({ path: 'x.jsonl', line: 20_000 + n, reason: 'reason 1' });
    expect(log.gathered()).toEqual([{ where: 'x.jsonl:20009 (1 more line)', reason: 'reason 1' }]);
  });
});
