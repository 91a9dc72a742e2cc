import type { JobState } from '../store/types.js';
import type { RoundedNumber } from './rounded-numbers.js';
/** One document read from a source, before it is rendered into a request. */
export interface Document {
  /** The item id: relative path, JSONL id field, `file:line`, or `custom_id`. */
  readonly id: string;
  /** The file it came from, as given (posix separators; `-` for stdin). */
  readonly path: string;
  /** 1-based line for JSONL documents; absent for whole files. */
  readonly line?: number;
  readonly text: string;
  readonly meta: Record<string, unknown> | null;
  /** An OpenAI Batch line's `body`: sent as it is, no template. */
  readonly body?: Record<string, unknown>;
  /** `text` needs no JSON escaping: `JSON.stringify(text)` is `text` in quotes (template.ts uses it as it is). */
  readonly textJsonSafe?: boolean;
  /**
   * The id is `file:line` of a stream (stdin, a pipe): a line number of input that has no name of
   * its own, which says nothing of the document that had the same id in an earlier enqueue.
   */
  readonly positional?: boolean;
  /**
   * A JSONL line without the field `--id-field` names, so its id is `file:line`: the fields it has
   * instead, for the warning that the name may be mistyped (said when the field is not the default
   * `id`, or when other lines of the input have it).
   */
  readonly withoutIdField?: readonly string[];
  /** A JSONL line's field whose integer, past 2^53, lost digits when read: for the warning. */
  readonly roundedNumber?: RoundedNumber;
}

/** Input that did not become an item, and why. Nothing is dropped without one of these. */
export interface Rejection {
  /** The file, as given (`-` for stdin). */
  readonly path: string;
  readonly line?: number;
  readonly reason: string;
  /**
   * The item id the document would have had, when it could be read: an item of that id enqueued
   * before keeps its earlier document (`EnqueueSummary.keptEarlier`).
   */
  readonly id?: string;
  /** A document refused for its size (`overMaxDocBytes`): that size, when it is known. */
  readonly bytes?: number;
}

/** How many of `states` are in each state, leaving out the nulls (no such item): for the warnings that say what an item's job will do. */
export function countStates(states: Iterable<JobState | null>): Partial<Record<JobState, number>> {
  const counts: Partial<Record<JobState, number>> = {};
  for (const state of states) if (state) counts[state] = (counts[state] ?? 0) + 1;
  return counts;
}

/** What readers yield: documents and rejections in input order, in small arrays to keep overhead low. */
export type Entry = Document | Rejection;

/** Rejected documents with an id looked up for `EnqueueSummary.keptEarlier`, at most (past it, the count is of these). */
export const MAX_REJECTED_IDS = 100_000;

export function isRejection(e: Entry): e is Rejection {
  return (e as Rejection).reason !== undefined;
}

/** `file:line` or `file`, as rejections and sources are printed. */
export function where(path: string, line?: number): string {
  return line === undefined ? path : `${path}:${line}`;
}

/** Options every reader needs. */
export interface ReadOptions {
  /** Documents (a file, or a JSONL line) larger than this many bytes are rejected unread. */
  readonly maxDocBytes: number;
}

export const DEFAULT_MAX_DOC_BYTES = 1024 * 1024;

/**
 * How every rejection for size says it (a file, a JSONL line, a pipe read to the limit): the one
 * rejection a flag undoes, which enqueue counts by it (`isOverMaxDocBytes`).
 */
export function overMaxDocBytes(max: number): string {
  return `over --max-doc-bytes ${sizeFlag(max)}`;
}

/** A byte count as --max-doc-bytes takes it, in the largest whole binary unit: 4MiB, 512KiB, 1000. */
export function sizeFlag(bytes: number): string {
  for (const [unit, size] of [
    ['GiB', 2 ** 30],
    ['MiB', 2 ** 20],
    ['KiB', 2 ** 10],
  ] as const) {
    if (bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return String(bytes);
}

/** A byte count for a person: 2,000,024. */
export function byteCount(bytes: number): string {
  return bytes.toLocaleString('en-US');
}

/** A rejection for size (`overMaxDocBytes`). */
export function isOverMaxDocBytes(reason: string): boolean {
  return reason.includes('over --max-doc-bytes ');
}

/** A short description of an fs error: `EACCES: permission denied`. */
export function fsReason(error: unknown): string {
  const e = error as NodeJS.ErrnoException;
  if (e?.code) return `cannot read (${e.code}: ${describeCode(e.code)})`;
  return `cannot read (${(error as Error)?.message ?? String(error)})`;
}

function describeCode(code: string): string {
  switch (code) {
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'ENOENT':
      return 'no such file (a broken link?)';
    case 'EISDIR':
      return 'is a folder';
    case 'ELOOP':
      return 'too many symbolic links';
    case 'EIO':
      return 'input/output error';
    default:
      return 'error';
  }
}

/** Thrown out of reading when the enqueue is asked to stop (Ctrl-C): not a read error of any file. */
export class StopReading extends Error {
  constructor() {
    super('reading stopped');
  }
}
