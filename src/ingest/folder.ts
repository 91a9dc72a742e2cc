import { readdir, realpath, stat } from 'node:fs/promises';
import { join, posix, sep } from 'node:path';
import { fileText } from './decode.js';
import { namedSourceReason, readAtMost, REASON_NOT_REGULAR } from './file-kind.js';
import type { PathMatcher } from './glob.js';
import { fsReason, type Entry, type ReadOptions } from './types.js';

export interface FolderOptions extends ReadOptions {
  /** Which files (by path relative to the folder) are documents. */
  readonly include: PathMatcher;
  /** Include files and folders whose name starts with `.`. */
  readonly hidden: boolean;
}

/**
 * A path as the user sees it, spelled one way (`./data.jsonl` and `data.jsonl` are the same
 * source, so `file:line` ids stay the same): posix separators, normalized, no trailing slash.
 */
export function displayPath(p: string): string {
  const s = posix.normalize(sep === '/' ? p : p.split(sep).join('/'));
  return s.length > 1 ? s.replace(/\/+$/, '') : s;
}

/**
 * Every matching file under `root` as one document, id = path relative to `root`. Walks depth
 * first in name order, so ids come out in the same order on every machine. Symbolic links are
 * followed (a folder reached twice through links is walked once). Files left out by `--glob` or for
 * being hidden are the user's choice and are not reported; anything else that is not a document is.
 */
export async function* readFolder(root: string, options: FolderOptions): AsyncGenerator<Entry> {
  const seen = new Set<string>([await realpath(root).catch(() => root)]);
  yield* walk(root, displayPath(root), '', options, seen);
}

/** One folder, entries in name order, recursing into subfolders where they fall in that order. */
async function* walk(root: string, shown: string, rel: string, options: FolderOptions, seen: Set<string>): AsyncGenerator<Entry> {
  const dir = rel === '' ? root : join(root, rel);
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (error) {
    yield { path: rel === '' ? shown : posix.join(shown, rel), reason: fsReason(error) };
    return;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    if (!options.hidden && entry.name.startsWith('.')) continue;
    const childRel = rel === '' ? entry.name : `${rel}/${entry.name}`;
    const full = join(dir, entry.name);
    const path = posix.join(shown, childRel);
    let isDir = entry.isDirectory();
    let isFile = entry.isFile();
    if (entry.isSymbolicLink()) {
      try {
        const s = await stat(full);
        isDir = s.isDirectory();
        isFile = s.isFile();
      } catch (error) {
        if (options.include(childRel)) yield { path, reason: fsReason(error) };
        continue;
      }
    }
    if (isDir) {
      // Links can make a loop; walk each real folder once.
      const real = await realpath(full).catch(() => full);
      if (seen.has(real)) continue;
      seen.add(real);
      yield* walk(root, shown, childRel, options, seen);
      continue;
    }
    if (!options.include(childRel)) continue;
    if (!isFile) {
      yield { path, reason: REASON_NOT_REGULAR };
      continue;
    }
    yield await readTextFile(full, path, childRel, options);
  }
}

/**
 * One text file as one document with the given id. Never holds more than `maxDocBytes + 1` bytes
 * of it: a regular file is refused by its size, a pipe (named as a source) is read until it ends
 * or passes the limit, and a device (`/dev/zero`) is refused unread.
 */
export async function readTextFile(file: string, path: string, id: string, options: ReadOptions): Promise<Entry> {
  const max = options.maxDocBytes;
  let bytes: Buffer;
  try {
    const s = await stat(file);
    const why = namedSourceReason(s);
    if (why !== null) return { path, reason: why };
    if (s.size > max) return { path, reason: tooBig(s.size, max) };
    bytes = await readAtMost(file, max, s.size);
  } catch (error) {
    return { path, reason: fsReason(error) };
  }
  if (bytes.length > max) return { path, reason: `document is over --max-doc-bytes ${max} (stopped reading after ${max} bytes)` };
  const r = fileText(bytes);
  if ('reason' in r) return { path, reason: r.reason };
  return { id, path, text: r.text, meta: null };
}

export function tooBig(size: number, max: number): string {
  return `document is ${size} bytes, over --max-doc-bytes ${max}`;
}
