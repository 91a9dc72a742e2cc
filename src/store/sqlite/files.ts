import { open, readlink, realpath } from 'node:fs/promises';
import { basename, dirname, join, resolve } from 'node:path';

/** The first 16 bytes of every SQLite database file. */
export const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/** The files SQLite keeps next to a database: its write-ahead log, shared memory and rollback journal. */
export const COMPANION_SUFFIXES = Object.freeze(['-wal', '-shm', '-journal'] as const);

export function hasSqliteHeader(bytes: Uint8Array): boolean {
  return bytes.length >= SQLITE_HEADER.length && SQLITE_HEADER.equals(bytes.subarray(0, SQLITE_HEADER.length));
}

/** The first bytes of a file, as many as the SQLite header has (fewer when the file is shorter). */
export async function readHead(path: string): Promise<Buffer> {
  const handle = await open(path, 'r');
  try {
    const head = Buffer.alloc(SQLITE_HEADER.length);
    const { bytesRead } = await handle.read(head, 0, head.length, 0);
    return head.subarray(0, bytesRead);
  } finally {
    await handle.close();
  }
}

/** Whether the file at `path` starts with the SQLite header; false when it cannot be read. */
export async function isSqliteFile(path: string): Promise<boolean> {
  return readHead(path).then(hasSqliteHeader, () => false);
}

/**
 * The path a name leads to after following every symbolic link, even when the last one points at a
 * file that does not exist yet (realpath would fail there), with its folder spelled as a real path.
 */
export async function followLinks(path: string): Promise<string> {
  let p = resolve(path);
  for (let hops = 0; hops < 40; hops++) {
    p = join(await realpath(dirname(p)).catch(() => dirname(p)), basename(p));
    let target: string;
    try {
      target = await readlink(p);
    } catch {
      return p; // not a link (EINVAL), or nothing there (ENOENT)
    }
    p = resolve(dirname(p), target);
  }
  return p;
}

/**
 * Real paths of a database file and its companions, both next to the name given and next to the
 * file it links to (SQLite puts the companions beside the real file). Whatever is written over any
 * of these loses the queue.
 */
export async function databaseFiles(path: string): Promise<Set<string>> {
  const bases = new Set([
    join(await realpath(dirname(resolve(path))).catch(() => dirname(resolve(path))), basename(path)),
    await followLinks(path),
  ]);
  const files = new Set<string>();
  for (const base of bases) for (const suffix of ['', ...COMPANION_SUFFIXES]) files.add(base + suffix);
  return files;
}
