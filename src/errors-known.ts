import { statSync } from 'node:fs';
import { basename, dirname } from 'node:path';
import { LlmqError } from './errors.js';
import { shellWord } from './shell-word.js';
import { isBackendGone, isPgClosed } from './store/transient.js';

/** The file an error is about, as a message names it. */
export interface ErrorPlace {
  /** What the path is: "the database", "--out", "standard output". */
  readonly what: string;
  /** The path, or a URL with its password redacted. */
  readonly path: string;
  /** Who holds the database's lock, when that is known (`stoppedRunsText`): said instead of "another program". */
  readonly lockHolder?: () => string | null;
}

/**
 * Turn a failure with a known, ordinary cause (permissions, a read-only or full disk, a path
 * through a file, a damaged database) into an LlmqError that says what happened, where, and what
 * to do. Anything else (including errors that are already LlmqErrors) gives null: the caller
 * rethrows it as it is. Without a place, the error's own `path` (fs errors carry one) is named.
 */
export function knownError(error: unknown, place?: ErrorPlace): LlmqError | null {
  if (error instanceof LlmqError || typeof error !== 'object' || error === null) return null;
  const e = error as { code?: unknown; message?: unknown; path?: unknown; syscall?: unknown };
  // PostgreSQL ended the connection (57P01 a restart or an administrator, 57P02 a crash), or it
  // closed under a statement: pg's own message, with no code
  if (isBackendGone(error) || isPgClosed(e.message)) {
    return new LlmqError(
      `Lost the connection to PostgreSQL (${String(e.message)}): the server restarted or the connection was ended. ` +
        'What was stored is kept. The jobs a run held go back to pending: at once if it could still reach PostgreSQL to hand them back, ' +
        'else when the next run finds it gone (seconds, on this machine) or their leases run out (a minute). ' +
        'Run the command again once PostgreSQL is reachable.',
      { cause: error },
    );
  }
  if (typeof e.code !== 'string') return null;
  const message = fixFor(e.code, String(e.message ?? ''), e.syscall, placeOf(e, place));
  return message === null ? null : new LlmqError(message, { cause: error });
}

function placeOf(e: { code?: unknown; path?: unknown }, place: ErrorPlace | undefined): ErrorPlace {
  if (place) return place;
  if (typeof e.path === 'string') return { what: 'the file', path: e.path };
  return { what: String(e.code).startsWith('SQLITE_') ? 'the database' : 'a file', path: '' };
}

/** `the database q.db`, or just `a file` when the path is unknown. */
function named(p: ErrorPlace): string {
  return p.path ? `${p.what} ${p.path}` : p.what;
}

/** Copying a queue to read it elsewhere: the file, and its -wal where it has one (its latest commits). */
function copyCommand(path: string): string {
  return `cp ${shellWord(path)} /tmp/llmq-copy.db (and its -wal file, if it has one, to /tmp/llmq-copy.db-wal), then --db /tmp/llmq-copy.db`;
}

function capital(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

function fixFor(code: string, message: string, syscall: unknown, p: ErrorPlace): string | null {
  const it = named(p);
  const isDb = p.what === 'the database';
  // SQLite's extended codes (SQLITE_READONLY_DBMOVED, SQLITE_IOERR_WRITE ...) share their primary code's fix.
  const primary = code.startsWith('SQLITE_') ? code.split('_').slice(0, 2).join('_') : code;
  switch (primary) {
    case 'EACCES':
    case 'EPERM':
      return `Permission denied for ${it} (${code}). Check the permissions of the file and of its folder, or use a path you may write.`;
    case 'EROFS':
      return `${capital(it)} is on a read-only file system (EROFS). Use a path on a writable disk.`;
    case 'SQLITE_READONLY':
      // the file may be readable: SQLite must still make its -shm (and -wal) beside it to open a WAL database, even to read
      if (code === 'SQLITE_READONLY_DIRECTORY' && isDb && p.path) {
        const folder = dirname(p.path);
        return (
          `The folder ${folder} is not writable for you, and SQLite must create ${basename(p.path)}-shm there to open ${p.path}, even to read it. ` +
          `Make the folder writable, or work on a copy: ${copyCommand(p.path)}.`
        );
      }
      return (
        `${capital(it)} is read-only (${message}). Make the file and its folder writable` +
        // not `llmq copy`: it opens its source for writing too (SQLite's WAL needs the -shm file beside it)
        (isDb && p.path ? `, or work on a copy of the file: ${copyCommand(p.path)}.` : '.')
      );
    case 'ENOTDIR':
      return `Cannot use ${it}: a part of that path is a file, not a folder. Give a path inside a folder.`;
    case 'EEXIST':
      // Only a recursive mkdir through a file says this; an existing file is otherwise not an error.
      return syscall === 'mkdir' ? `Cannot use ${it}: a part of that path is a file, not a folder. Give a path inside a folder.` : null;
    case 'ENOENT':
      // The folder the command runs in was removed: every relative path is then unknowable.
      if (syscall === 'uv_cwd')
        return 'The current folder no longer exists (it was removed or moved). Change to a folder that exists and run the command again.';
      // Where a folder cannot be made although its parent exists (under /proc, say); a missing file is otherwise the caller's to word.
      return syscall === 'mkdir' ? `Cannot make the folder for ${it} (${message}). Use a path where folders can be made.` : null;
    case 'EISDIR':
      return `${capital(it)} is a folder. Give the path of a file.`;
    case 'ENOSPC':
    case 'EDQUOT':
    case 'SQLITE_FULL':
      return (
        `No space left for ${it} (${code === 'EDQUOT' ? 'EDQUOT: over the disk quota' : code}). ` +
        `Free some space and run the command again${isDb ? '; what was committed before is kept' : ''}.`
      );
    case 'SQLITE_CANTOPEN':
      if (p.path && isFolder(p.path))
        return `${capital(it)} is a folder. Give the path of a database file, e.g. ${p.path.replace(/\/+$/, '')}/llmq.db.`;
      return `Cannot open ${it} (${message}). Check that its folder exists and that you may read and write there.`;
    case 'SQLITE_CORRUPT':
      return (
        `${capital(it)} is damaged (${message}). Restore it from a backup, or save what is readable: ` +
        `sqlite3 ${p.path || 'llmq.db'} .recover | sqlite3 recovered.db`
      );
    case 'SQLITE_NOTADB':
      return `${capital(it)} is not an SQLite database (${message}). Point --db at an llmq database or a new file.`;
    case 'SQLITE_BUSY':
    case 'SQLITE_LOCKED': {
      const holder = p.lockHolder?.() ?? null;
      if (holder !== null)
        return (
          `${capital(it)} is locked (${code}) and stayed so past llmq's wait: ${holder}. Nothing is lost: ` +
          'what was stored is kept. Run the command again once it has.'
        );
      // the write lock held past the busy timeout (10 s) by another program, or past a run's lease
      return (
        `${capital(it)} is locked by another program (${code}) and stayed so past llmq's wait. Nothing is lost: ` +
        'what was stored is kept, and jobs a run held go back to pending as their leases run out (a minute). ' +
        'Run the command again once the program holding it (sqlite3 or a database browser in a transaction, a backup, a long enqueue) lets go.'
      );
    }
    case 'SQLITE_IOERR':
      return `A disk error on ${it} (${code}: ${message}). Check the disk and that there is space on it, then run the command again.`;
    default:
      return null;
  }
}

function isFolder(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
