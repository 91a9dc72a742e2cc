import { where } from '../ingest/types.js';
import type { Rejection } from '../ingest/types.js';
import { int } from '../report/format.js';

/** Lines of one file rejected for one reason that are printed one by one; the rest are gathered. */
export const REJECTIONS_NAMED_ONE_BY_ONE = 10;
/** Runs of line numbers kept per gathered reason: scattered lines beyond this are counted only. */
const RANGES_KEPT = 50;
/**
 * Files and reasons counted at most: past this many, a new one is printed and not counted. Reasons
 * quote their line ("x123" is not valid JSON), and ten million such lines must not be ten million
 * keys in memory.
 */
const KEYS_KEPT = 10_000;

/** Lines of one file rejected for one reason, past the ones printed one by one. */
interface Gathered {
  readonly path: string;
  readonly reason: string;
  /** Runs of consecutive line numbers, [first, last]. */
  readonly ranges: Array<[number, number]>;
  lines: number;
  /** Lines in no kept range (scattered past RANGES_KEPT runs). */
  unranged: number;
}

/** Files (of a folder, or named alone) rejected for one reason, past the ones printed one by one. */
interface GatheredFiles {
  readonly reason: string;
  files: number;
  last: string;
}

/**
 * What `enqueue` prints of its rejections. A JSONL file read with the wrong `--text-field` rejects
 * every one of its lines for the same reason: printed one per line, a million-line file buried the
 * summary under a million lines of stderr. The first lines of each file and reason are printed as they
 * come; later ones are gathered and printed at the end as line ranges, so every line is still named
 * (up to RANGES_KEPT runs of them). Files rejected whole are named one by one up to as many for each reason, then counted.
 */
export class RejectionLog {
  readonly #seen = new Map<string, number>();
  readonly #gathered = new Map<string, Gathered>();
  readonly #gatheredFiles = new Map<string, GatheredFiles>();

  /** The rejection as a line to print now (`file:line: reason`), or null when it is gathered for the end. */
  add(r: Rejection): { where: string; reason: string } | null {
    if (r.line === undefined) return this.#addFile(r.path, r.reason);
    const key = `${r.path}\u0000${r.reason}`;
    if (this.#seen.size >= KEYS_KEPT && !this.#seen.has(key)) return { where: where(r.path, r.line), reason: r.reason };
    const seen = (this.#seen.get(key) ?? 0) + 1;
    this.#seen.set(key, seen);
    if (seen <= REJECTIONS_NAMED_ONE_BY_ONE) return { where: where(r.path, r.line), reason: r.reason };
    let g = this.#gathered.get(key);
    if (!g) {
      g = { path: r.path, reason: r.reason, ranges: [], lines: 0, unranged: 0 };
      this.#gathered.set(key, g);
    }
    g.lines++;
    const last = g.ranges.at(-1);
    if (last && last[1] === r.line - 1) last[1] = r.line;
    else if (g.ranges.length < RANGES_KEPT) g.ranges.push([r.line, r.line]);
    else g.unranged++;
    return null;
  }

  /**
   * A file rejected whole. The first files of each reason are named one by one; past them the reason
   * is said once at the end with how many more it took: a template asking {{meta.x}} of a folder's
   * files (which have none) printed the same line for each of 5,000 files.
   */
  #addFile(path: string, reason: string): { where: string; reason: string } | null {
    const key = `\u0001${reason}`;
    if (this.#seen.size >= KEYS_KEPT && !this.#seen.has(key)) return { where: path, reason };
    const seen = (this.#seen.get(key) ?? 0) + 1;
    this.#seen.set(key, seen);
    if (seen <= REJECTIONS_NAMED_ONE_BY_ONE) return { where: path, reason };
    const g = this.#gatheredFiles.get(key);
    if (g) {
      g.files++;
      g.last = path;
    } else this.#gatheredFiles.set(key, { reason, files: 1, last: path });
    return null;
  }

  /**
   * The gathered rejections, one line each, in the order each was first gathered:
   * `file:12-4000,4002 (3,990 more lines)` with its reason, then `190 more files (the last: notes/z.txt)`.
   */
  gathered(): Array<{ where: string; reason: string }> {
    const lines = [...this.#gathered.values()].map((g) => {
      const ranges = g.ranges.map(([a, b]) => (a === b ? String(a) : `${a}-${b}`)).join(',');
      const beyond = g.unranged > 0 ? `; ${int(g.unranged)} of them after these` : '';
      return { where: `${g.path}:${ranges} (${int(g.lines)} more ${g.lines === 1 ? 'line' : 'lines'}${beyond})`, reason: g.reason };
    });
    const files = [...this.#gatheredFiles.values()].map((g) => ({
      where: `${int(g.files)} more ${g.files === 1 ? 'file' : 'files'} (the last: ${g.last})`,
      reason: g.reason,
    }));
    return [...lines, ...files];
  }
}
