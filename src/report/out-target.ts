import type { Stats } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import { resolve } from 'node:path';
import { UsageError } from '../errors.js';
import { knownError } from '../errors-known.js';
import { databaseFiles, followLinks, hasSqliteHeader, readHead } from '../store/sqlite/files.js';
import { CSV_COLUMNS } from './csv-columns.js';

/** How `--out` is written. */
export type OutTarget =
  /** A regular file, or none yet: written to a temp file beside it, renamed over it when complete. */
  | { readonly kind: 'replace'; readonly path: string }
  /** A FIFO, a terminal or other device, `/dev/stdout`, `/dev/fd/N`: opened and written as it is. */
  | { readonly kind: 'through'; readonly path: string };

// Paths that name an open file descriptor (/dev/stdout, /dev/fd/63 from `>(cmd)`, /proc/self/fd/1):
// replacing the file they lead to would pull it out from under whoever opened it (`>> log`).
const DESCRIPTOR_PATH = /^(\/dev\/(stdout|stderr|fd\/\d+)|\/proc\/[^/]+\/fd\/\d+)$/;

/**
 * Decide how to write `--out` so that nothing is replaced that should be written into, and no
 * database is written over: a symlink is followed to its file (the link stays), a FIFO or device
 * is written through, a folder is refused, and so is the queue's own database (with its `-wal`,
 * `-shm`, `-journal`) or any other SQLite file. `database` is the queue's SQLite path, if it has one.
 */
export async function resolveOutTarget(out: string, database: string | null): Promise<OutTarget> {
  let s: Stats | null;
  try {
    s = await stat(out);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT') throw knownError(error, { what: '--out', path: out }) ?? error;
    s = null;
  }
  if (s?.isDirectory()) throw new UsageError(`--out ${out} is a directory; give a file path, or use --out-dir to write one file per item.`);
  if (s?.isSocket()) {
    throw new UsageError(
      `--out ${out} is a socket, which cannot be opened by name; give a file path, or leave out --out to write to standard output.`,
    );
  }
  if (s?.isBlockDevice()) throw new UsageError(`--out ${out} is a block device; give a file path.`);
  const real = await followLinks(out);
  if (s === null || s.isFile()) await refuseDatabase(out, real, database);
  if (s?.isFile() && s.size > 0) await refuseOtherFile(out, real);
  if (s && (!s.isFile() || DESCRIPTOR_PATH.test(resolve(out)))) return { kind: 'through', path: out };
  return { kind: 'replace', path: real };
}

/** The first line of a file, up to this many bytes: enough for an export's first row to show what it is. */
const FIRST_LINE_BYTES = 64 * 1024;
const EXPORT_ROW = /^\{"id":.*,"key":"[0-9a-f]{64}","state":"(pending|running|done|failed)"/;
const BATCH_OUTPUT_ROW = /^\{"id":"[^"]*","custom_id":/;

/**
 * A file that is there already is written over only when it is an export (JSON Lines, CSV or OpenAI
 * Batch output, as llmq writes them): `--out` naming the JSONL file the queue was enqueued from
 * replaced the user's input with the answers, and nothing said so.
 */
async function refuseOtherFile(out: string, real: string): Promise<void> {
  const handle = await open(real, 'r').catch(() => null);
  if (!handle) return;
  let first: string;
  try {
    const head = Buffer.alloc(FIRST_LINE_BYTES);
    const { bytesRead } = await handle.read(head, 0, head.length, 0);
    // without a BOM: an export saved again by a spreadsheet (Excel's "CSV UTF-8") begins with one
    first = head
      .subarray(0, bytesRead)
      .toString('utf8')
      .replace(/^\uFEFF/, '')
      .split('\n', 1)[0]!
      .replace(/\r$/, '');
  } finally {
    await handle.close();
  }
  if (EXPORT_ROW.test(first) || BATCH_OUTPUT_ROW.test(first) || first === CSV_COLUMNS.join(',')) return;
  throw new UsageError(
    `--out ${out} is there already and is not an llmq export (it begins ${JSON.stringify(first.slice(0, 40))}): it may be an input, and export ` +
      'writes over its own exports only. Give another file name, or remove that file first.',
  );
}

async function refuseDatabase(out: string, real: string, database: string | null): Promise<void> {
  if (database !== null && database !== ':memory:') {
    const own = await databaseFiles(database);
    if (own.has(real) || own.has(resolve(out))) {
      throw new UsageError(
        `--out ${out} is the queue's own database file (${database}); export never writes over it. Give another file name, e.g. results.jsonl.`,
      );
    }
  }
  const head = await readHead(real).catch(() => null);
  if (head && hasSqliteHeader(head)) {
    throw new UsageError(`--out ${out} is an SQLite database; export never writes over one. Give another file name, e.g. results.jsonl.`);
  }
}
