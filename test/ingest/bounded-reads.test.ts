import { spawn } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it, onTestFinished } from 'vitest';
import { MAX_KEPT_REJECTIONS } from '../../src/ingest/enqueue.js';
import { BIN, cliEnv, collect } from '../helpers/cli.js';
import { tempDir } from '../helpers/tmp.js';
import { items, run, tempStore } from './helpers.js';

const DEVICE = 'not a regular file (a character device; to read a stream, pipe it to llmq enqueue -)';

/** A FIFO in `dir` fed by a shell command; the writer is killed when the test ends. */
function fifoFedBy(dir: string, command: string, name = 'pipe.txt'): string {
  const fifo = join(dir, name);
  execFileSync('mkfifo', [fifo]);
  const writer = spawn('sh', ['-c', `${command} > "$0"`, fifo], { stdio: 'ignore' });
  writer.on('error', () => {});
  onTestFinished(() => void writer.kill('SIGKILL'));
  return fifo;
}

describe('reading is bounded by --max-doc-bytes, whatever the input', () => {
  it('refuses a device named as a source (as a text file or as .jsonl) instead of reading it forever', { timeout: 5_000 }, async () => {
    const dir = tempDir();
    symlinkSync('/dev/zero', join(dir, 'zero.jsonl'));
    writeFileSync(join(dir, 'good.txt'), 'a document');
    const store = tempStore(dir);
    const s = await run(store, ['/dev/zero', join(dir, 'zero.jsonl'), join(dir, 'good.txt')], { maxDocBytes: 1_000_000 });
    expect(s.rejections).toEqual([
      { path: '/dev/zero', id: 'zero', reason: DEVICE },
      { path: join(dir, 'zero.jsonl'), reason: DEVICE },
    ]);
    expect(items(store).map((i) => i.id)).toEqual(['good.txt']);
  });

  it('reads a named pipe as one document, and stops once it passes --max-doc-bytes even if the writer never stops', {
    timeout: 5_000,
  }, async () => {
    const store = tempStore();
    const endless = fifoFedBy(tempDir(), 'cat /dev/zero');
    const s = await run(store, [endless], { maxDocBytes: 100_000 });
    expect(s.rejections).toEqual([
      { path: endless, id: 'pipe.txt', reason: 'document is over --max-doc-bytes 100000 (stopped reading after 100,000 bytes)' },
    ]);
    const short = fifoFedBy(tempDir(), 'printf "from a pipe"');
    expect(await run(store, [short], { maxDocBytes: 100_000 })).toMatchObject({ newItems: 1, rejected: 0 });
  });

  it('reads a pipe with no extension in its name, as <(zcat docs.jsonl.gz) gives, as JSONL', async () => {
    const store = tempStore();
    const lines = '{"id":"a","text":"first"}\n{"id":"b","text":"second"}\n';
    const fd = fifoFedBy(tempDir(), `printf '${lines}'`, '63');
    expect(await run(store, [fd], { maxDocBytes: 100_000 })).toMatchObject({ newItems: 2, rejected: 0 });
    expect(items(store).map((i) => i.id)).toEqual(['a', 'b']);
  });

  it(`keeps the first ${MAX_KEPT_REJECTIONS} rejections for the summary and counts (and reports) the rest`, async () => {
    const store = tempStore();
    const seen: number[] = [];
    const s = await run(store, ['-'], { stdin: Readable.from(['not json\n'.repeat(3000)]), onReject: (r) => seen.push(r.line!) });
    expect(s.rejected).toBe(3000);
    expect(s.rejections).toHaveLength(MAX_KEPT_REJECTIONS);
    expect(seen).toHaveLength(3000);
    expect(seen.at(-1)).toBe(3000);
  });

  // Linux shows how far a process has read its stdin in /proc/PID/fdinfo/0.
  it.skipIf(!existsSync('/proc/self/fdinfo'))(
    'stops reading input while nobody reads its stderr, instead of queueing rejections in memory',
    { timeout: 30_000 },
    async () => {
      const dir = tempDir();
      const input = join(dir, 'bad.txt');
      // lines of distinct reasons ("x123 ..." is not valid JSON): each is printed as it comes, none
      // gathered for the end. 3 MB in 100,000 lines: half of it is past what a full pipe lets be read,
      // and each line costs (500,000 short ones took 12 s, over 30 s on a loaded machine)
      const lines = Array.from({ length: 100_000 }, (_, i) => `x${i} ${'padding '.repeat(3)}`);
      const size = lines.join('\n').length + 1;
      writeFileSync(input, lines.join('\n') + '\n');
      const fd = openSync(input, 'r');
      const child = spawn(process.execPath, [BIN, 'enqueue', '-', '--db', join(dir, 'q.db')], {
        env: cliEnv(),
        stdio: [fd, 'pipe', 'pipe'],
      });
      closeSync(fd);
      child.stderr!.pause();
      const readSoFar = () => Number(/^pos:\s+(\d+)/m.exec(readFileSync(`/proc/${child.pid}/fdinfo/0`, 'utf8'))?.[1]);
      // Wait until the child stops advancing (stderr full) or reads far past what a full pipe allows.
      let last = -1;
      let still = 0;
      for (let i = 0; i < 100 && still < 5 && last < size / 2; i++) {
        await sleep(100);
        const pos = readSoFar();
        still = pos === last ? still + 1 : 0;
        last = pos;
      }
      expect(last).toBeLessThan(1_000_000);
      child.stderr!.resume(); // reading stderr again lets it finish
      const r = await collect(child);
      expect(r.code).toBe(2);
      expect(r.stderr.split('\n').filter((l) => l.startsWith('rejected -:'))).toHaveLength(lines.length);
    },
  );
});
