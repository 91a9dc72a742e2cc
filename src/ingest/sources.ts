import { stat } from 'node:fs/promises';
import { basename } from 'node:path';
import { UsageError } from '../errors.js';
import { JSONL_NAME, sourcePath } from './folder.js';
import { readAtMost } from './file-kind.js';

/** A source path the user named, and how it is read. */
export type Source =
  | { readonly kind: 'stdin'; readonly path: '-' }
  | { readonly kind: 'folder' | 'jsonl'; readonly file: string; readonly path: string }
  | { readonly kind: 'file'; readonly file: string; readonly path: string; readonly id: string };

/**
 * A named `.json` file that holds a JSON array: read as one text document, as any file that is not
 * JSON Lines, where its name suggests records were meant. Looks at the first bytes of a regular file
 * only: a named pipe's bytes, once read here, would be gone from the document.
 */
export async function isJsonArrayFile(source: Source): Promise<boolean> {
  if (source.kind !== 'file' || !/\.json$/i.test(source.file)) return false;
  try {
    if (!(await stat(source.file)).isFile()) return false;
    return /^\uFEFF?\s*\[/.test((await readAtMost(source.file, 255)).toString('utf8'));
  } catch {
    return false; // unreadable: the enqueue names it
  }
}

/**
 * Check every source before anything is read, so a typo fails fast and enqueues nothing.
 * A folder is walked; a `.jsonl`/`.ndjson` file is one document per line; any other file is one
 * document whose id is its file name; `-` is JSONL on standard input. A pipe whose name has no
 * extension is JSONL too: it is what `<(zcat docs.jsonl.gz)` gives (`/dev/fd/63`), whose name says
 * nothing and would be the id of a text document, the same for the next such pipe. (Inside a folder
 * every file is one document, whatever its extension, but JSON Lines files, which are left out: folder.ts.)
 */
export async function resolveSources(paths: readonly string[], haveStdin: boolean): Promise<Source[]> {
  if (paths.length === 0) throw new UsageError('Nothing to enqueue: name a folder, a file, or - for JSONL on stdin.');
  const out: Source[] = [];
  let stdin = false;
  for (const p of paths) {
    if (p === '-') {
      if (stdin) throw new UsageError('- (stdin) is named twice; stdin can be read only once.');
      if (!haveStdin) throw new UsageError('- (stdin) was named but no input stream was given.');
      stdin = true;
      out.push({ kind: 'stdin', path: '-' });
      continue;
    }
    let s;
    try {
      s = await stat(p);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      const why = code === 'ENOENT' || code === 'ENOTDIR' ? 'no such file or folder' : `${code ?? (error as Error).message}`;
      throw new UsageError(`Source not found: ${p} (${why}). Name a folder, a text file, a .jsonl file, or - for stdin.`);
    }
    const path = sourcePath(p);
    // the same folder or file named twice (`notes ./notes/`) is read once: read again, each of its
    // documents was rejected as a duplicate of itself
    if (out.some((o) => o.kind !== 'stdin' && o.path === path)) continue;
    if (s.isDirectory()) out.push({ kind: 'folder', file: p, path });
    else if (JSONL_NAME.test(p) || (s.isFIFO() && !/\.[^.]+$/.test(basename(p)))) out.push({ kind: 'jsonl', file: p, path });
    else out.push({ kind: 'file', file: p, path, id: basename(path) });
  }
  return out;
}
