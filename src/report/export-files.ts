import { randomBytes } from 'node:crypto';
import { createWriteStream, rmSync } from 'node:fs';
import { readdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join, relative, resolve } from 'node:path';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import { makeDirs } from '../make-dirs.js';
import { ANSWERS_MARKER, markAnswersFolder } from '../answers-folder.js';
import { isProcessAlive } from '../process-alive.js';
import { signalCounter } from '../second-signal.js';
import { EXIT, LlmqError } from '../errors.js';
import { knownError, type ErrorPlace } from '../errors-known.js';
import type { ExportRow, JobState } from '../store/types.js';
import { AnswerPaths, answerExt, itemPath } from './answer-paths.js';
import { emptyCounts, writeText, type ExportChunk, type ExportCounts } from './export.js';
import { resolveOutTarget } from './out-target.js';

// Rows are formatted while the last chunks are written, up to this much ahead of the disk.
const WRITE_BUFFER = 256 * 1024;

export interface FileExportOptions {
  /** The queue's SQLite file, which (with its -wal, -shm, -journal) is never written over. */
  readonly database?: string | null;
}

/**
 * Export to `--out`. A file (or a symlink to one) is written through a temp file in its own folder,
 * renamed into place only when complete: a crash or a full disk never leaves a half-written results
 * file under the final name, and a symlink stays a symlink. A FIFO or device is written as it is.
 */
export async function exportToFile(chunks: AsyncIterable<ExportChunk>, path: string, f: FileExportOptions = {}): Promise<void> {
  const place: ErrorPlace = { what: '--out', path };
  const target = await resolveOutTarget(path, f.database ?? null);
  try {
    if (target.kind === 'through')
      return await writeAll(chunks, createWriteStream(target.path, { flags: 'a', highWaterMark: WRITE_BUFFER }));
    makeDirs(dirname(target.path));
    await removeDeadExportsTemps(target.path);
    const tmp = join(dirname(target.path), `.${basename(target.path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
    const keepOnSignal = removeOnSignal(tmp);
    try {
      await writeAll(chunks, createWriteStream(tmp, { flags: 'wx', highWaterMark: WRITE_BUFFER }));
      await rename(tmp, target.path);
    } catch (error) {
      await rm(tmp, { force: true });
      throw error;
    } finally {
      keepOnSignal();
    }
  } catch (error) {
    throw knownError(error, place) ?? error;
  }
}

/**
 * The temp files of earlier exports to `target` that were killed (SIGKILL, a crash: no handler ran):
 * their process gone here and the file untouched for a minute (a folder shared with another machine
 * may hold one of its exports under way). Each was as large as the export it was, tens of MB, hidden.
 */
async function removeDeadExportsTemps(target: string): Promise<void> {
  const dir = dirname(target);
  const prefix = `.${basename(target)}.`;
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = /^(\d+)\.[0-9a-f]+\.tmp$/.exec(name.slice(prefix.length))?.[1];
    if (pid === undefined || Number(pid) === process.pid || isProcessAlive(Number(pid))) continue;
    const path = join(dir, name);
    const modified = await stat(path).then(
      (st) => st.mtimeMs,
      () => null,
    );
    if (modified !== null && Date.now() - modified > STALE_TEMP_MS) await rm(path, { force: true });
  }
}

/** How long a dead export's temp file stays untouched before another export removes it. */
const STALE_TEMP_MS = 60_000;

/**
 * Ctrl-C (or SIGTERM, SIGHUP) while the temp file is written: remove it, then exit 130 as every
 * command a signal stops does (SIGTERM's own death, 143, reads to a supervisor as a crash). Without
 * this the signal ended the process before any catch ran, and each stopped export left a hidden
 * partial file beside `--out`. Returns what stops listening.
 */
function removeOnSignal(tmp: string): () => void {
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  const stop = (): void => {
    for (const s of signals) process.off(s, onSignal);
  };
  const onSignal = (): void => {
    stop();
    rmSync(tmp, { force: true });
    process.exit(EXIT.SIGNAL);
  };
  for (const s of signals) process.on(s, onSignal);
  return stop;
}

/** Write the text to a stream of our own and close it, waiting until the last byte is out. */
async function writeAll(chunks: AsyncIterable<ExportChunk>, out: Writable): Promise<void> {
  try {
    await writeText(chunks, out);
    out.end();
    await finished(out);
  } catch (error) {
    // Wait for the file to be closed: its open may still be under way, and a temp file removed
    // before it is created would be created after, and left behind.
    if (!out.closed) {
      const closed = new Promise((resolve) => out.once('close', resolve));
      out.destroy();
      await closed;
    }
    throw error;
  }
}

export interface DirExportOptions {
  /** States to write; default done only. Failed items get an error file. */
  readonly states?: readonly JobState[] | null;
  /** Extension added to each item id, default `.out`. */
  readonly ext?: string;
  /** An item whose file could not be written; the others still are. */
  readonly onUnwritten?: (id: string, reason: string) => void;
  /** An item written under another name, because the one its id asks for is another item's. */
  readonly onMoved?: (id: string, path: string) => void;
  /** A file of an earlier export removed: its item is in another state now (`path` under the folder). */
  readonly onStale?: (id: string, path: string, state: JobState) => void;
  /** A stop signal: the export ends now (exit 130), `written` files written, none half. */
  readonly onStopped?: (signal: NodeJS.Signals, written: number) => void;
}

export interface DirExportCounts extends ExportCounts {
  /** Items that should have been written but could not be (each reported to `onUnwritten`). */
  unwritten: number;
  /** Files of an earlier export removed, their items in another state now (each reported to `onStale`). */
  stale: number;
  /**
   * The folder held other files and no mark of an earlier export: not marked as a folder of answers
   * (`ANSWERS_MARKER`), so an enqueue of it, or of a folder around it, reads these answers as documents.
   */
  unmarked?: boolean;
}

/** Failures that will fail every other file too: stop at the first and say so once. */
const STOPS_ALL = /^(ENOSPC|EDQUOT|EROFS|SQLITE_)/;

/**
 * One answer file per item under `dir`, mirroring the item id as a path (`sub/a.txt` ->
 * `dir/sub/a.txt.out`). Failed items (when asked for) get `<id>.error` with the reason.
 * Each file is written to a temp name and renamed, so none is ever half written. Paths that two
 * items would share get distinct names (see AnswerPaths); an item that still cannot be written is
 * reported and the rest go on.
 */
export async function exportToDir(
  pages: AsyncIterable<readonly ExportRow[]>,
  dir: string,
  o: DirExportOptions = {},
): Promise<DirExportCounts> {
  const counts: DirExportCounts = { ...emptyCounts(), unwritten: 0, stale: 0 };
  const states = o.states?.length ? o.states : ['done'];
  const ext = answerExt(o.ext);
  const suffixOf = (state: JobState) => (state === 'done' ? ext : state === 'failed' ? '.error' : `.${state}`);
  const root = resolve(dir);
  let earlier: boolean;
  let marked = false;
  try {
    makeDirs(root);
    const there = await readdir(root);
    earlier = there.length > 0;
    // a folder of answers only (new, empty, or marked by an earlier export): the mark leaves it out of
    // a folder enqueue around it. Other files in it may be documents, which that would leave out too.
    marked = there.includes(ANSWERS_MARKER);
    if (!earlier || marked) await markAnswersFolder(root);
    else counts.unmarked = true;
  } catch (error) {
    throw knownError(error, { what: '--out-dir', path: dir }) ?? error;
  }
  // only in a folder of answers alone: in another, such a name may be a file of the user's
  if (marked) await removeDeadAnswerTemps(root);
  const paths = new AnswerPaths(root);
  // A stop signal ends the export between two files: the one being written is finished first (written
  // whole, then renamed). Its temp file removed at once could still be made after, its open under
  // way, and be left. A second signal quits at once.
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  let writing = false;
  let stopBy: NodeJS.Signals | null = null;
  const stopNow = (signal: NodeJS.Signals): never => {
    o.onStopped?.(signal, counts.written);
    return process.exit(EXIT.SIGNAL);
  };
  // the same signal again at once is an echo of the first (npx, GNU timeout deliver it twice), no second one
  const signalsSoFar = signalCounter();
  const onSignal = (signal: NodeJS.Signals): void => {
    if (signalsSoFar(signal) >= 2 || !writing) stopNow(signal);
    stopBy = signal;
  };
  for (const s of signals) process.on(s, onSignal);
  const keepOnSignal = () => {
    for (const s of signals) process.off(s, onSignal);
  };
  const writeOne = async (path: string, text: string): Promise<void> => {
    writing = true;
    try {
      await writeWhole(path, text, `${path}.${process.pid}.tmp`);
    } finally {
      writing = false;
    }
  };
  /**
   * An earlier export into this folder left the item's file of a state it had then (`a.out` of an
   * answer since taken away by an edit of its document): removed, so that the folder does not show
   * it as the item's answer. Only the names its id gives for other states than its own, never a file
   * this export wrote.
   */
  const removeStale = async (r: ExportRow): Promise<void> => {
    for (const state of ['done', 'failed', 'pending', 'running'] as const) {
      if (suffixOf(state) === suffixOf(r.state)) continue;
      const path = itemPath(root, r.id, suffixOf(state));
      if (paths.wrote(path)) continue;
      const gone = await rm(path).then(
        () => true,
        () => false,
      );
      if (!gone) continue;
      counts.stale++;
      o.onStale?.(r.id, relative(root, path), r.state);
    }
  };
  try {
    for await (const page of pages) await writePage(page);
    if (stopBy !== null) stopNow(stopBy);
  } finally {
    keepOnSignal();
  }
  return counts;

  async function writePage(page: readonly ExportRow[]): Promise<void> {
    for (const r of page) {
      if (stopBy !== null) stopNow(stopBy);
      if (!states.includes(r.state)) {
        counts.skipped[r.state]++;
        if (earlier) await removeStale(r);
        continue;
      }
      const text = r.state === 'done' ? (r.output ?? '') : (r.error ?? `the job is ${r.state}`) + '\n';
      try {
        const { path, moved } = await paths.place(r.id, suffixOf(r.state));
        if (earlier) await removeStale(r);
        makeDirs(dirname(path));
        paths.madeFolders(path);
        await writeOne(path, text);
        if (moved) o.onMoved?.(r.id, relative(root, path));
        counts.written++;
      } catch (error) {
        if (error instanceof LlmqError) throw error;
        const code = (error as { code?: unknown }).code;
        if (typeof code === 'string' && STOPS_ALL.test(code)) throw knownError(error, { what: '--out-dir', path: dir }) ?? error;
        counts.unwritten++;
        o.onUnwritten?.(r.id, (error as Error).message);
      }
    }
  }
}

/**
 * The temp files of earlier `--out-dir` exports into `root` that were killed (SIGKILL, a crash: no
 * handler ran), as `removeDeadExportsTemps` finds them beside `--out`: each is an answer file's name
 * with `.PID.tmp` added, its process gone here and the file untouched for a minute.
 */
async function removeDeadAnswerTemps(root: string): Promise<void> {
  const entries = await readdir(root, { withFileTypes: true, recursive: true }).catch(() => []);
  for (const e of entries) {
    const pid = /\.(\d+)\.tmp$/.exec(e.name)?.[1];
    if (!e.isFile() || pid === undefined || Number(pid) === process.pid || isProcessAlive(Number(pid))) continue;
    const path = join(e.parentPath, e.name);
    const modified = await stat(path).then(
      (st) => st.mtimeMs,
      () => null,
    );
    if (modified !== null && Date.now() - modified > STALE_TEMP_MS) await rm(path, { force: true });
  }
}

/** A file that is either all there or not changed: written beside it, then renamed over it. */
async function writeWhole(path: string, text: string, tmp: string): Promise<void> {
  try {
    await writeFile(tmp, text);
    await rename(tmp, path);
  } catch (error) {
    await rm(tmp, { force: true });
    throw error;
  }
}
