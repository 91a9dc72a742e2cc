import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rename, rm, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve, sep } from 'node:path';
import { finished } from 'node:stream/promises';
import type { ExportRow, JobState } from '../store/types.js';
import { emptyCounts, writeExport, type ExportCounts, type ExportOptions } from './export.js';

/**
 * Export to a file through a temp file in the same folder, renamed into place only when complete:
 * a crash or a full disk never leaves a half-written results file under the final name.
 */
export async function exportToFile(rows: AsyncIterable<ExportRow>, path: string, o: ExportOptions): Promise<ExportCounts> {
  await mkdir(dirname(resolve(path)), { recursive: true });
  const tmp = join(dirname(resolve(path)), `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const out = createWriteStream(tmp, { flags: 'wx' });
  try {
    const counts = await writeExport(rows, out, o);
    out.end();
    await finished(out);
    await rename(tmp, path);
    return counts;
  } catch (error) {
    out.destroy();
    await rm(tmp, { force: true });
    throw error;
  }
}

export interface DirExportOptions {
  /** States to write; default done only. Failed items get an error file. */
  readonly states?: readonly JobState[] | null;
  /** Extension added to each item id, default `.out`. */
  readonly ext?: string;
}

/**
 * One answer file per item under `dir`, mirroring the item id as a path (`sub/a.txt` ->
 * `dir/sub/a.txt.out`). Failed items (when asked for) get `<id>.error` with the reason.
 * Each file is written to a temp name and renamed, so none is ever half written.
 */
export async function exportToDir(rows: AsyncIterable<ExportRow>, dir: string, o: DirExportOptions = {}): Promise<ExportCounts> {
  const counts = emptyCounts();
  const states = o.states?.length ? o.states : ['done'];
  const ext = o.ext === undefined ? '.out' : o.ext === '' || o.ext.startsWith('.') ? o.ext : `.${o.ext}`;
  const root = resolve(dir);
  const made = new Set<string>();
  for await (const r of rows) {
    if (!states.includes(r.state)) {
      counts.skipped[r.state]++;
      continue;
    }
    const path = itemPath(root, r.id, r.state === 'done' ? ext : r.state === 'failed' ? '.error' : `.${r.state}`);
    const folder = dirname(path);
    if (!made.has(folder)) {
      await mkdir(folder, { recursive: true });
      made.add(folder);
    }
    const text = r.state === 'done' ? (r.output ?? '') : (r.error ?? `the job is ${r.state}`) + '\n';
    const tmp = `${path}.${process.pid}.tmp`;
    await writeFile(tmp, text);
    await rename(tmp, path);
    counts.written++;
  }
  return counts;
}

// Control characters everywhere; on Windows also the characters its filesystems refuse (a
// `file.jsonl:12` id keeps its colon on POSIX).
// eslint-disable-next-line no-control-regex
const UNSAFE = process.platform === 'win32' ? /[\x00-\x1f<>:"|?*]/g : /[\x00-\x1f]/g;

/**
 * Where an item's file goes: its id as a relative path under `root`. Ids that would escape `root`
 * (`..`, absolute paths, drive letters) or hold characters no filesystem takes are rewritten, and a
 * short hash of the original id is added so two rewritten ids never collide with each other or
 * with an id that was already clean.
 */
export function itemPath(root: string, id: string, ext: string): string {
  const parts = id.split(/[\\/]+/).filter((s) => s !== '' && s !== '.');
  const clean = parts.map((part, i) => {
    let s = part.replace(UNSAFE, '_');
    if (/^\.+$/.test(s)) s = s.replace(/\./g, '_');
    if (i === 0 && /^[a-zA-Z]:$/.test(s)) s = s[0] + '_';
    if (Buffer.byteLength(s) > 200) s = s.slice(0, 100);
    return s;
  });
  if (clean.length === 0) clean.push('item');
  let name = clean.join(sep);
  // Any rewrite (.., ./, //, a leading /, C:, control characters) could meet another id's path.
  if (clean.join('/') !== id) name += '~' + createHash('sha256').update(id).digest('hex').slice(0, 8);
  const path = resolve(root, name + ext);
  // Belt and braces: whatever the rewriting missed, nothing leaves root.
  if (!path.startsWith(root + sep)) throw new Error(`internal: export path for item '${id}' escapes ${root}`);
  return path;
}
