import Database from 'better-sqlite3';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, cliEnv, collect, runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

// ~8 KB each: a batch closes at 16 MiB, about 2,000 of them, so a few batches cost little to run
const DOCS = 3000;
/**
 * Words, not a run of one letter: the mock provider counts each prompt's tokens, and 8 KB of 'x'
 * took 11 ms to count against 0.2 for prose (the run of 3,000 took 27 s).
 */
const FILLER = 'a few words of filler ';
const lines = Array.from(
  { length: DOCS },
  (_, i) => `${JSON.stringify({ id: `doc-${i}`, text: `document number ${i} `.padEnd(8000, FILLER) })}\n`,
);

/** The load's record and how many items it has committed, read as `status` would (a reader beside the loader). */
function loadState(db: string): { loading: boolean; items: number } {
  if (!existsSync(db)) return { loading: false, items: 0 };
  const d = new Database(db, { readonly: true });
  try {
    const hasTable = d.prepare("SELECT 1 FROM sqlite_master WHERE name = 'bulk_load'").get();
    if (!hasTable) return { loading: false, items: 0 };
    return {
      loading: d.prepare('SELECT count(*) FROM bulk_load').pluck().get() === 1,
      items: d.prepare('SELECT items FROM item_counts').pluck().get() as number,
    };
  } finally {
    d.close();
  }
}

/** Resolves once `test` holds, reading the database each time the loader may have committed (it gives no other sign). */
function until(db: string, test: (s: { loading: boolean; items: number }) => boolean, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const poll = setInterval(() => {
      let s: { loading: boolean; items: number };
      try {
        s = loadState(db);
      } catch {
        return; // the file is being created
      }
      if (test(s)) {
        clearInterval(poll);
        resolve();
      } else if (Date.now() > deadline) {
        clearInterval(poll);
        reject(new Error(`timed out waiting on the load: ${JSON.stringify(s)}`));
      }
    }, 25);
  });
}

describe('an enqueue killed half way through a bulk load', () => {
  it('leaves a queue that the next enqueue finishes; a run meanwhile is refused; every job then runs exactly once', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const prompt = ['--prompt', 'Summarize: {{text}}'];

    // stdin held open after 2,500 lines: one batch is committed, the load waits for more
    const loader = spawn(process.execPath, [BIN, 'enqueue', '-', '--db', db, ...prompt], { env: cliEnv(), stdio: 'pipe' });
    // killed with some of this still in the pipe: the write's EPIPE is expected, not an error of the test's
    loader.stdin!.on('error', () => undefined);
    loader.stdin!.write(lines.slice(0, 2500).join(''));
    const loaderDone = collect(loader, 60_000);
    await until(db, (s) => s.loading && s.items > 0);
    const committed = loadState(db).items;
    expect(committed).toBeGreaterThanOrEqual(1000);

    // while the loader lives: status reads, run refuses and says why
    const status = await runCli(['status', '--db', db, '--json']);
    expect(status.code, status.stderr).toBe(0);
    expect(JSON.parse(status.stdout)).toMatchObject({ items: committed });
    const refused = await runCli(['run', '--db', db, '--provider', 'mock', '--progress', 'none']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/is being loaded by llmq enqueue or llmq copy \(pid \d+ on .+\).*Wait for that command to finish/);

    loader.kill('SIGKILL');
    expect((await loaderDone).signal).toBe('SIGKILL');
    expect(loadState(db)).toEqual({ loading: true, items: committed });

    // the same input again: the dead load is finished first, then the rest goes in as usual
    const again = await runCli(['enqueue', '-', '--db', db, ...prompt, '--json'], { input: lines.join(''), timeoutMs: 60_000 });
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({
      documents: DOCS,
      newItems: DOCS - committed,
      unchanged: committed,
      newJobs: DOCS - committed,
    });
    expect(loadState(db).loading).toBe(false);

    const ran = await runCli(['run', '--db', db, '--provider', 'mock', '--mock-latency', '0', '-c', '64', '--progress', 'none'], {
      timeoutMs: 120_000,
    });
    expect(ran.code, ran.stderr).toBe(0);
    const d = new Database(db, { readonly: true });
    try {
      expect(d.prepare('SELECT state, count(*) AS n FROM jobs GROUP BY state').all()).toEqual([{ state: 'done', n: DOCS }]);
      // exactly once: one attempt per job, and every item's job there
      expect(d.prepare('SELECT count(*) AS tries, count(DISTINCT job_key) AS jobs FROM attempts').get()).toEqual({
        tries: DOCS,
        jobs: DOCS,
      });
      expect(d.prepare('SELECT count(*) FROM items JOIN jobs ON jobs.key = items.job_key').pluck().get()).toBe(DOCS);
      expect(d.pragma('foreign_key_check')).toEqual([]);
      expect(d.prepare("SELECT name FROM sqlite_master WHERE name IN ('jobs_key', 'items_job') ORDER BY name").pluck().all()).toEqual([
        'items_job',
        'jobs_key',
      ]);
    } finally {
      d.close();
    }
  }, 240_000);
});

describe('a queue whose bulk load was killed, read before anything writes to it', () => {
  it('is finished on open: export gives each item once, status counts each job once', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    // every tenth document the same: the load, with no key index, stores their job once per line
    const repeating = Array.from(
      { length: DOCS },
      (_, i) =>
        `${JSON.stringify({ id: `doc-${i}`, text: (i % 10 === 0 ? 'the same document ' : `document number ${i} `).padEnd(8000, FILLER) })}\n`,
    );
    const loader = spawn(process.execPath, [BIN, 'enqueue', '-', '--db', db], { env: cliEnv(), stdio: 'pipe' });
    // killed with some of this still in the pipe: the write's EPIPE is expected, not an error of the test's
    loader.stdin!.on('error', () => undefined);
    loader.stdin!.write(repeating.slice(0, 2500).join(''));
    const loaderDone = collect(loader, 60_000);
    await until(db, (s) => s.loading && s.items > 0);
    loader.kill('SIGKILL');
    await loaderDone;
    const committed = loadState(db).items;

    const out = await runCli(['export', '--db', db]);
    expect(out.code, out.stderr).toBe(0);
    const ids = out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).id as string);
    expect(ids.length).toBe(committed);
    expect(new Set(ids).size).toBe(committed);
    const status = JSON.parse((await runCli(['status', '--db', db, '--json'])).stdout);
    const distinct = committed - Math.floor((committed - 1) / 10); // the repeats of doc-0 share its job
    expect(status).toMatchObject({ items: committed, total: distinct });
    expect(loadState(db).loading).toBe(false);
  }, 120_000);
});

describe('an enqueue stopped by Ctrl-C', () => {
  it('stores what it read, finishes its bulk load, says so and exits 130; the same input again adds the rest', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const file = join(dir, 'docs.jsonl');
    const many = 200_000;
    writeFileSync(
      file,
      Array.from({ length: many }, (_, i) => `${JSON.stringify({ id: `d${i}`, text: `document ${i} `.padEnd(200, 'y') })}\n`).join(''),
    );
    const loader = spawn(process.execPath, [BIN, 'enqueue', file, '--db', db, '--json'], { env: cliEnv(), stdio: 'pipe' });
    const done = collect(loader, 60_000);
    await until(db, (s) => s.loading && s.items > 0);
    loader.kill('SIGINT');
    const r = await done;
    expect(r.code, r.stderr).toBe(130);
    expect(r.stderr).toContain('stopping: storing what was read; Ctrl-C again to quit at once');
    expect(r.stderr).toContain(
      'stopped before the end of the input: what was read is stored. Enqueue the same input again to add the rest',
    );
    const summary = JSON.parse(r.stdout);
    expect(summary).toMatchObject({ stopped: true, rejected: 0 });
    expect(summary.newItems).toBeGreaterThan(0);
    expect(summary.newItems).toBeLessThan(many);
    // the load was finished on the way out: no record of it, its indexes built
    expect(loadState(db)).toEqual({ loading: false, items: summary.newItems });

    const again = await runCli(['enqueue', file, '--db', db, '--json'], { timeoutMs: 60_000 });
    expect(again.code, again.stderr).toBe(0);
    expect(JSON.parse(again.stdout)).toMatchObject({ stopped: false, newItems: many - summary.newItems, unchanged: summary.newItems });
  }, 120_000);
});

describe('an enqueue from an idle stdin', () => {
  it('stops at the first Ctrl-C, though no more input comes, and stores what it read', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const loader = spawn(process.execPath, [BIN, 'enqueue', '-', '--db', db, '--json'], { env: cliEnv(), stdio: 'pipe' });
    let stderr = '';
    const rejected = new Promise<void>((resolve) =>
      loader.stderr!.on('data', (d: Buffer) => {
        stderr += d.toString();
        if (stderr.includes('rejected')) resolve();
      }),
    );
    const done = collect(loader, 20_000);
    // a good line, then a bad one whose rejection shows that both were read; stdin stays open
    loader.stdin!.write('{"id":"a","text":"one"}\nnot json\n');
    await rejected;
    loader.kill('SIGINT');
    const r = await done;
    expect(r.code, r.stderr).toBe(130);
    expect(JSON.parse(r.stdout)).toMatchObject({ stopped: true, newItems: 1, rejected: 1 });
    loader.stdin!.destroy();
  }, 60_000);
});

describe('an enqueue whose stderr reader goes away', () => {
  it('stops as on Ctrl-C (130, what was read stored), rather than exiting 0 and losing the batch', async () => {
    const dir = tempDir();
    const db = join(dir, 'q.db');
    const loader = spawn(process.execPath, [BIN, 'enqueue', '-', '--db', db, '--json'], { env: cliEnv(), stdio: 'pipe' });
    let stdout = '';
    loader.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
    const exited = new Promise<number | null>((resolve) => loader.on('close', (code) => resolve(code)));
    loader.stderr!.destroy(); // the reader of stderr is gone: the first rejection's write fails
    loader.stdin!.write('{"id":"a","text":"one"}\nnot json\n'); // stdin stays open
    expect(await exited).toBe(130);
    expect(JSON.parse(stdout)).toMatchObject({ stopped: true, newItems: 1, rejected: 1 });
    loader.stdin!.destroy();
  }, 60_000);

  it('a second Ctrl-C quits at once, even while the input is a FIFO no one writes to (a read that never returns)', async () => {
    const dir = tempDir();
    const fifo = join(dir, 'input');
    execFileSync('mkfifo', [fifo]);
    const loader = spawn(process.execPath, [BIN, 'enqueue', fifo, '--db', join(dir, 'q.db')], { env: cliEnv(), stdio: 'pipe' });
    const done = collect(loader, 20_000);
    await new Promise((r) => setTimeout(r, 1000)); // started, and waiting in open() for a writer
    loader.kill('SIGINT');
    await new Promise((r) => setTimeout(r, 500));
    const t = Date.now();
    loader.kill('SIGINT');
    const r = await done;
    // it dies of the signal (a shell shows 130); before, its exit waited for the open() for ever
    expect(r.signal, r.stderr).toBe('SIGINT');
    expect(Date.now() - t).toBeLessThan(3000);
    expect(r.stderr).toContain('stopping: storing what was read; Ctrl-C again to quit at once');
  }, 30_000);
});
