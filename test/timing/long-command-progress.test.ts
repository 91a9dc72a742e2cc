import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { playTerminal, runInPty, stripAnsi } from '../helpers/e2e.js';
import { tempDir } from '../helpers/tmp.js';

// enough that reading takes well over a redraw (200 ms) and the SQLite bulk load's index build
// a second or two, long after the Ctrl-C typed as it starts has arrived (at 200,000 a loaded CI once
// finished the build first; at 400,000 a machine loaded past the suite's usual did too, so the file
// runs in the timing phase, alone)
const DOCS = 400_000;

describe('commands that work for seconds show where they are on a terminal', () => {
  it('enqueue shows documents read, then the index build, where Ctrl-C quits at once; estimate shows prompts counted, export items written, copy rows copied; pipes get none of it', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const file = join(dir, 'in.jsonl');
    writeFileSync(file, Array.from({ length: DOCS }, (_, i) => `{"id":"d${i}","text":"document ${i}"}\n`).join(''));

    const enqueued = await runInPty(['enqueue', file, '--db', db], {
      cwd: dir,
      typeWhen: { shows: 'indexing', keys: '\x03' },
      timeoutMs: 120_000,
    });
    const raw = stripAnsi(enqueued.stdout);
    expect(raw).toMatch(/reading: [\d,]+ documents \([\d,]+\/s\)/);
    expect(raw).toContain(`indexing 400,000 documents (Ctrl-C quits; the next command finishes it)`);
    // quit at once: the build never ended in this process, so no summary
    expect(raw).not.toMatch(/read 400,000 documents/);
    expect(enqueued.code).toBe(130);

    // the next command finishes the build; every document is in the queue once
    const status = await runCli(['status', '--db', db, '--json'], { timeoutMs: 60_000 });
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ total: DOCS, items: DOCS, counts: { pending: DOCS } });
    expect(status.stderr).toBe('');

    const estimated = await runInPty(['estimate', '--db', db, '--limit', '30000'], { cwd: dir, timeoutMs: 60_000 });
    expect(estimated.code, estimated.stdout).toBe(0);
    expect(stripAnsi(estimated.stdout)).toMatch(/counting prompts: [\d,]+ of 30,000 jobs/);
    // the line is erased before the estimate is printed: the screen shows the estimate alone
    const screen = playTerminal(estimated.stdout).screen.join('\n');
    expect(screen).not.toContain('counting prompts');
    expect(screen).toMatch(/^estimate \S*q\.db: 30,000 jobs to send/m);

    const piped = await runCli(['estimate', '--db', db, '--limit', '30000'], { timeoutMs: 60_000 });
    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.stderr).toBe('');

    // export to a file: the terminal shows how far; the file holds every item, and the line is gone
    const exported = await runInPty(['export', '--db', db, '--out', join(dir, 'out.jsonl')], { cwd: dir, timeoutMs: 60_000 });
    expect(exported.code, exported.stdout).toBe(0);
    expect(stripAnsi(exported.stdout)).toMatch(/exporting: [\d,]+ of 400,000 items/);
    expect(playTerminal(exported.stdout).screen.join('\n')).not.toContain('exporting');
    expect(readFileSync(join(dir, 'out.jsonl'), 'utf8').split('\n').length).toBe(DOCS + 1);

    // copy: rows of each table copied of how many (20,000 jobs: a few seconds)
    const small = join(dir, 'small.db');
    writeFileSync(join(dir, 'small.jsonl'), Array.from({ length: 20_000 }, (_, i) => `{"id":"s${i}","text":"small ${i}"}\n`).join(''));
    expect((await runCli(['enqueue', join(dir, 'small.jsonl'), '--db', small], { timeoutMs: 60_000 })).code).toBe(0);
    const copied = await runInPty(['copy', '--from', small, '--to', join(dir, 'copy.db')], { cwd: dir, timeoutMs: 120_000 });
    expect(copied.code, copied.stdout).toBe(0);
    expect(stripAnsi(copied.stdout)).toMatch(/copying (jobs|items): [\d,]+ of 20,000/);
    // the index builds of the bulk load come last, and hold the thread: said before they start
    expect(stripAnsi(copied.stdout)).toContain('indexing 20,000 jobs and 20,000 items');
    expect(playTerminal(copied.stdout).screen.join('\n')).toMatch(/^copied .*20,000 jobs, 20,000 items/m);
    expect(playTerminal(copied.stdout).screen.join('\n')).not.toMatch(/copying|indexing/);
  }, 240_000);

  it('enqueue - at a terminal says it waits for typed input and how to end it, and takes what is typed', async () => {
    const dir = tempDir();
    const typed = await runInPty(['enqueue', '-', '--db', join(dir, 'q.db')], {
      cwd: dir,
      typeWhen: { shows: 'Ctrl-D ends the input', keys: '{"id":"a","text":"typed by hand"}\n\x04' },
      timeoutMs: 20_000,
    });
    expect(typed.code, typed.stdout).toBe(0);
    const screen = playTerminal(typed.stdout).screen.join('\n');
    expect(screen).toContain('reading JSONL from the terminal: one document a line, Ctrl-D ends the input');
    expect(screen).toMatch(/^read 1 document into \S*q\.db/m);
    // a pipe is what is meant most of the time: it gets no such line
    const piped = await runCli(['enqueue', '-', '--db', join(dir, 'q.db')], { input: '{"id":"b","text":"piped"}\n' });
    expect(piped.code, piped.stderr).toBe(0);
    expect(piped.stderr).not.toContain('from the terminal');
  }, 60_000);
});
