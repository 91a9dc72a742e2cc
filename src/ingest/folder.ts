import type { Dirent } from 'node:fs';
import { readdir, realpath, stat } from 'node:fs/promises';
import { realpathSync } from 'node:fs';
import { isAbsolute, join, posix, relative, resolve, sep } from 'node:path';
import { COMPANION_SUFFIXES, isSqliteFile, SQLITE_HEADER } from '../store/sqlite/files.js';
import { fileText } from './decode.js';
import { namedSourceReason, readAtMost, REASON_NOT_REGULAR } from './file-kind.js';
import type { PathMatcher } from './glob.js';
import { byteCount, fsReason, overMaxDocBytes, type Entry, type ReadOptions } from './types.js';
import { shellWord } from '../shell-word.js';
import { isCsvExport } from '../report/csv-columns.js';
import { ANSWERS_MARKER } from '../answers-folder.js';

/** A file read a record per line when named: JSON Lines by its extension. */
export const JSONL_NAME = /\.(jsonl|ndjson)$/i;

export interface FolderOptions extends ReadOptions {
  /** Which files (by path relative to the folder) are documents. */
  readonly include: PathMatcher;
  /** Include files and folders whose name starts with `.`. */
  readonly hidden: boolean;
  /** Real paths of the queue's own database and its companions (-wal, -shm, -journal). */
  readonly ownDatabase?: ReadonlySet<string>;
  /** Filled with the files read as documents (resolved paths): a file, or a folder's file, named beside the folder is not read twice. */
  readonly readFiles?: Set<string>;
}

/** A file in a folder that is left out, not rejected: a database is no document, and reading the queue's own into itself would loop. */
export interface Skipped {
  readonly path: string;
  readonly skipped: string;
}

export function isSkipped(e: Entry | Skipped): e is Skipped {
  return (e as Skipped).skipped !== undefined;
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
 * A source named on the command line as its documents' paths (item sources, `{{path}}`) spell it:
 * as named, but a path inside the current folder is relative to it however it was named. Enqueueing
 * `notes/` and then `$PWD/notes/` is the same input: with `{{path}}` in the prompt, the absolute
 * spelling made every request new, and the queue sent the whole folder again. The current folder
 * is the shell's `$PWD` too when that is the same folder by another way (a link): `process.cwd()`
 * has the links resolved, `$PWD/notes` not.
 */
export function sourcePath(p: string, cwd = process.cwd(), shellCwd = process.env.PWD): string {
  const full = resolve(cwd, p);
  for (const base of shellCwd && shellCwd !== cwd && sameFolder(shellCwd, cwd) ? [cwd, shellCwd] : [cwd]) {
    const rel = relative(base, isAbsolute(p) ? p : full);
    if (rel === '') return '.';
    if (!rel.startsWith('..') && !isAbsolute(rel)) return displayPath(rel);
  }
  return displayPath(p);
}

function sameFolder(a: string, b: string): boolean {
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return false;
  }
}

/**
 * Every matching file under `root` as one document, id = path relative to `root`. Walks depth
 * first in name order, so ids come out in the same order on every machine. Symbolic links are
 * followed, folders reached through them after the rest (a folder reached twice is walked once, by
 * its real path when it has one in the tree), except a link to a folder that holds `root` (skipped).
 * Files left out by `--glob` or for being hidden are the user's choice and are not reported; anything
 * else that is not a document is.
 */
export async function* readFolder(root: string, options: FolderOptions): AsyncGenerator<Entry | Skipped> {
  const rootReal = await realpath(root).catch(() => root);
  const seen = new Set<string>([rootReal]);
  const shown = sourcePath(root);
  // Folders reached through links are walked after the real ones, so a link to a folder of the
  // tree (`latest -> reports`) never takes its documents' ids: walked first, it did, and the real
  // folder was skipped as seen.
  const linked: string[] = [];
  yield* walk(root, shown, '', options, seen, linked);
  for (let rel = linked.shift(); rel !== undefined; rel = linked.shift()) {
    const real = await realpath(join(root, rel)).catch(() => join(root, rel));
    if (seen.has(real)) continue;
    seen.add(real);
    // a link to a folder around the one named (`loop -> ..`) would read everything beside it, files
    // the user never named, and send them
    if (isAround(real, rootReal)) {
      yield {
        path: posix.join(shown, rel),
        skipped: 'a link to a folder around the one named, not followed: only what is inside it is read',
      };
      continue;
    }
    yield* walk(root, shown, rel, options, seen, linked);
  }
}

/**
 * The files of a subfolder `llmq export --out-dir` wrote (its `.llmq-answers`) that this walk would
 * read (hidden ones and those `--glob` leaves out are not): how many it leaves out.
 */
async function answerFileCount(dir: string, rel: string, options: FolderOptions): Promise<number> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  let count = 0;
  for (const e of entries) {
    if (!e.isFile() || e.name === ANSWERS_MARKER) continue;
    const below = relative(dir, join(e.parentPath, e.name)).split(sep).join('/');
    if (!options.hidden && below.split('/').some((part) => part.startsWith('.'))) continue;
    if (options.include(`${rel}/${below}`)) count++;
  }
  return count;
}

/** Whether `folder` holds `root` (both real paths): an ancestor of it. */
function isAround(folder: string, root: string): boolean {
  return root.startsWith(folder.endsWith(sep) ? folder : folder + sep);
}

/** One folder, entries in name order, recursing into subfolders where they fall in that order. */
async function* walk(
  root: string,
  shown: string,
  rel: string,
  options: FolderOptions,
  seen: Set<string>,
  linked: string[],
): AsyncGenerator<Entry | Skipped> {
  const dir = rel === '' ? root : join(root, rel);
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (error) {
    yield { path: rel === '' ? shown : posix.join(shown, rel), reason: fsReason(error) };
    return;
  }
  // A subfolder `llmq export --out-dir` wrote: its answers, read as documents, would be sent and paid
  // for again. Left out whole, said once; the folder named itself is read (`llmq enqueue answers/`).
  if (rel !== '' && entries.some((e) => e.name === ANSWERS_MARKER && e.isFile())) {
    const count = await answerFileCount(dir, rel, options);
    const path = posix.join(shown, rel);
    if (count > 0)
      yield {
        path,
        skipped: `${count === 1 ? 'an answer file' : `${count.toLocaleString('en-US')} answer files`} that llmq export --out-dir wrote, left out: answers are not documents. To enqueue them anyway, name the folder: llmq enqueue ${shellWord(path)}`,
      };
    return;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  const realDir = options.ownDatabase?.size ? await realpath(dir).catch(() => dir) : dir;
  for (const entry of entries) {
    if ((!options.hidden && entry.name.startsWith('.')) || entry.name === ANSWERS_MARKER) continue;
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
      if (entry.isSymbolicLink()) {
        linked.push(childRel);
        continue;
      }
      // Links can make a loop; walk each real folder once.
      const real = await realpath(full).catch(() => full);
      if (seen.has(real)) continue;
      seen.add(real);
      yield* walk(root, shown, childRel, options, seen, linked);
      continue;
    }
    if (!options.include(childRel)) continue;
    if (!isFile) {
      yield { path, reason: REASON_NOT_REGULAR };
      continue;
    }
    const database = await databaseFile(entry, full, realDir, entries, options);
    if (database) {
      yield { path, skipped: database };
      continue;
    }
    if (JSONL_NAME.test(entry.name)) {
      // Read as one document, its records would be sent as one prompt (and billed so); a folder of
      // part-*.jsonl files is records the user meant. Named, the file is read a record per line.
      yield {
        path,
        skipped: `JSON Lines inside a folder, left out (a folder's files are one document each). To read its records, name it: llmq enqueue ${shellWord(path)}`,
      };
      continue;
    }
    // read already in this enqueue, by the walk of a folder around this one named beside it: once
    const resolved = resolve(full);
    if (options.readFiles?.has(resolved)) continue;
    const read = await readDocument(full, path, childRel, options, true);
    // read, or rejected and said: named as well, it is not read again (one the walk skipped, an llmq export, is)
    if (!isSkipped(read)) options.readFiles?.add(resolved);
    yield read;
  }
}

/**
/**
 * Why a file is a database file to leave out, or null: the queue's own database or one of its
 * companions, or a companion of another SQLite database beside it. (SQLite files themselves are
 * recognised by their header when read.)
 */
async function databaseFile(
  entry: Dirent,
  full: string,
  realDir: string,
  entries: readonly Dirent[],
  o: FolderOptions,
): Promise<string | null> {
  if (o.ownDatabase?.size) {
    const real = entry.isSymbolicLink() ? await realpath(full).catch(() => full) : join(realDir, entry.name);
    if (o.ownDatabase.has(real)) return "part of the queue's own database (--db)";
  }
  const suffix = COMPANION_SUFFIXES.find((s) => entry.name.endsWith(s));
  if (!suffix) return null;
  const base = entry.name.slice(0, -suffix.length);
  if (entries.some((e) => e.name === base) && (await isSqliteFile(join(full, '..', base)))) return `part of the SQLite database ${base}`;
  return null;
}

/** One text file as one document with the given id. */
export async function readTextFile(file: string, path: string, id: string, options: ReadOptions): Promise<Entry> {
  // Without database skipping a file is always a document or a rejection.
  return (await readDocument(file, path, id, options, false)) as Entry;
}

/**
 * One file as one document, or a rejection; with `skipDatabases` (a folder's files), an SQLite file
 * is skipped, however big, and so is a CSV export of llmq. Never holds more than `maxDocBytes + 1` bytes of it: a regular file is refused by its size, a
 * pipe (named as a source) is read until it ends or passes the limit, and a device (`/dev/zero`) is
 * refused unread.
 */
async function readDocument(
  file: string,
  path: string,
  id: string,
  options: ReadOptions,
  skipDatabases: boolean,
): Promise<Entry | Skipped> {
  const max = options.maxDocBytes;
  let bytes: Buffer;
  try {
    const s = await stat(file);
    const why = namedSourceReason(s);
    if (why !== null) return { path, id, reason: why };
    if (skipDatabases && s.isFile() && s.size >= SQLITE_HEADER.length && (await isSqliteFile(file))) {
      return { path, skipped: 'an SQLite database' };
    }
    // Checked before reading, so a 10 GB file is never loaded to be refused.
    if (s.size > max) return { path, id, reason: tooBig(s.size, max), bytes: s.size };
    bytes = await readAtMost(file, max, s.size);
  } catch (error) {
    return { path, id, reason: fsReason(error) };
  }
  if (bytes.length > max)
    return { path, id, reason: `document is ${overMaxDocBytes(max)} (stopped reading after ${byteCount(max)} bytes)` };
  const r = fileText(bytes);
  if ('reason' in r) return { path, id, reason: r.reason };
  // the queue's own answers, exported into the folder it reads: enqueued again, they would be sent as documents
  if (skipDatabases && isCsvExport(r.text)) {
    return {
      path,
      skipped: `an llmq export (CSV), left out: its answers are not a document. To enqueue it anyway, name it: llmq enqueue ${shellWord(path)}`,
    };
  }
  return { id, path, text: r.text, meta: null };
}

export function tooBig(size: number, max: number): string {
  return `document is ${byteCount(size)} bytes, ${overMaxDocBytes(max)}`;
}
