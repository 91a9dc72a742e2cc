import { createHash } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { join, relative, resolve, sep } from 'node:path';
import { UsageError } from '../errors.js';
import { ANSWERS_MARKER } from '../answers-folder.js';

// Control characters everywhere; on Windows also the characters its filesystems refuse (a
// `file.jsonl:12` id keeps its colon on POSIX).
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it removes.
const UNSAFE = process.platform === 'win32' ? /[\x00-\x1f<>:"|?*]/g : /[\x00-\x1f]/g;

/** The short hash of an id that tells apart paths which would otherwise meet. */
export function shortHash(id: string): string {
  return createHash('sha256').update(id).digest('hex').slice(0, 8);
}

/**
 * The extension of answer files, checked: it is appended to every file name, so a separator or
 * `..` in it would put files outside the folder.
 */
export function answerExt(ext: string | undefined): string {
  if (ext === undefined) return '.out';
  // biome-ignore lint/suspicious/noControlCharactersInRegex: a NUL ends a path in the OS, so it is refused like a separator.
  if (/[\\/\x00]/.test(ext) || ext.includes('..')) {
    throw new UsageError(
      `--ext '${ext}' is not a file extension: it may not hold a path separator or '..'. Expected something like .md or txt.`,
    );
  }
  return ext === '' || ext.startsWith('.') ? ext : `.${ext}`;
}

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
  // Any rewrite (.., ./, //, a leading /, C:, control characters) could meet another id's path; and
  // an item's file may not take the name of the folder's mark (`.llmq-answers`): written over, or
  // removed as stale, the folder would be read as documents again.
  if (clean.join('/') !== id || `${clean.at(-1)}${ext}` === ANSWERS_MARKER) name += '~' + shortHash(id);
  const path = resolve(root, name + ext);
  // Belt and braces: whatever the rewriting missed, nothing leaves root.
  if (!path.startsWith(root + sep)) throw new Error(`internal: export path for item '${id}' escapes ${root}`);
  return path;
}

/**
 * Chooses each item's file under `root` so that no item's file or folder is in another's way. Ids
 * `a` and `a.out/b` want `a.out` as a file and as a folder; whichever comes second gets the short
 * hash of its id on the name that is taken (`a.out~1a2b3c4d/b.out`, or `a~1a2b3c4d.out`). Taken
 * means: a file written for another item in this export, or a folder, or a file found on disk where
 * a folder is needed. A file found on disk at an item's own path is an earlier export's: replaced.
 */
export class AnswerPaths {
  readonly #root: string;
  /** Files written in this export. */
  readonly #files = new Set<string>();
  /** Folders known to be there (made or found). */
  readonly #folders = new Set<string>();

  constructor(root: string) {
    this.#root = root;
    this.#folders.add(root);
  }

  /** The path for an item's file; `moved` when it is not the one its id asks for. */
  async place(id: string, ext: string): Promise<{ path: string; moved: boolean }> {
    const parts = relative(this.#root, itemPath(this.#root, id, ext)).split(sep);
    let moved = false;
    for (let i = 0; i < parts.length; i++) {
      const last = i === parts.length - 1;
      for (let n = 1; await this.#taken(join(this.#root, ...parts.slice(0, i + 1)), last); n++) {
        parts[i] = withSuffix(parts[i]!, `~${shortHash(id)}${n > 1 ? `-${n}` : ''}`, last ? ext : '', n > 1);
        moved = true;
      }
    }
    const path = join(this.#root, ...parts);
    this.#files.add(path);
    return { path, moved };
  }

  /** Whether this export wrote `path` (for an item, or for another that took its name). */
  wrote(path: string): boolean {
    return this.#files.has(path);
  }

  /** Remember the folders that now exist on the way to a written file. */
  madeFolders(path: string): void {
    for (let dir = resolve(path, '..'); dir.startsWith(this.#root + sep); dir = resolve(dir, '..')) this.#folders.add(dir);
  }

  async #taken(path: string, asFile: boolean): Promise<boolean> {
    if (this.#files.has(path)) return true;
    if (this.#folders.has(path)) return asFile;
    const s = await stat(path).catch(() => null);
    if (s === null) return false;
    if (s.isDirectory()) {
      this.#folders.add(path);
      return asFile;
    }
    return !asFile;
  }
}

/** `name.out` + `~hash` -> `name~hash.out`; `again` replaces the suffix added before instead. */
function withSuffix(part: string, suffix: string, ext: string, again: boolean): string {
  const stem = ext && part.endsWith(ext) ? part.slice(0, part.length - ext.length) : part;
  const base = again ? stem.replace(/~[0-9a-f]{8}(-\d+)?$/, '') : stem;
  return base + suffix + (ext && part.endsWith(ext) ? ext : '');
}
