import { isAbsolute, posix, relative, resolve, sep } from 'node:path';
import {
  addFromAnotherFile,
  KEPT_REJECTIONS_PER_SOURCE,
  sourceFile,
  type EnqueueRow,
  type FromAnotherFile,
  type MovedItem,
  type JobQueue,
  type JobState,
  type QueueReader,
  type SourceRejections,
  type StoreIdentity,
} from '../store/types.js';
import { otherIdOfSameFile, type SameFileOtherId } from './overlap.js';
import { goneFiles, type GoneFiles, type WalkedFolder } from './gone-files.js';
import { movedLines, type MovedLines } from './moved-lines.js';
import { databaseFiles } from '../store/sqlite/files.js';
import { isSkipped, readFolder, readTextFile, type FolderOptions, type Skipped } from './folder.js';
import { globMatcher } from './glob.js';
import { DEFAULT_ID_FIELD, DEFAULT_TEXT_FIELD, readJsonl, readJsonlFile, type EntrySink, type JsonlOptions } from './jsonl.js';
import { makeRenderer, type RequestOptions } from './render.js';
import { SEEN_IDS_PER_CALL, SeenIds } from '../store/seen-ids.js';
import { resolveSources, type Source } from './sources.js';
import { MissingValueError } from './template.js';
import {
  DEFAULT_MAX_DOC_BYTES,
  MAX_REJECTED_IDS,
  countStates,
  isRejection,
  StopReading,
  type Document,
  type Entry,
  type Rejection,
} from './types.js';

export interface EnqueueOptions {
  /** Folders, text files, `.jsonl`/`.ndjson` files, or `-` for JSONL on `stdin`. */
  readonly sources: readonly string[];
  readonly request: RequestOptions;
  /** Include patterns for files in folders; none means every file. */
  readonly globs?: readonly string[];
  /** Include hidden files and folders (names starting with `.`). @default false */
  readonly hidden?: boolean;
  /** @default 'id' */
  readonly idField?: string;
  /** @default DEFAULT_TEXT_FIELD */
  readonly textField?: string;
  /** @default 1048576 (1 MiB) */
  readonly maxDocBytes?: number;
  /** What `-` reads. Required when a source is `-`. */
  readonly stdin?: AsyncIterable<Buffer | string>;
  /** Called for every rejection as it happens, so a caller can report while a big file streams. */
  readonly onReject?: (rejection: Rejection) => void;
  /**
   * Awaited between chunks of input. A caller that prints rejections to a pipe returns a promise
   * of the pipe's 'drain' here: otherwise a fast input full of bad lines queues output in memory
   * faster than the reader takes it (gigabytes, for 200 MB of bad lines).
   */
  readonly backpressure?: () => Promise<void> | void;
  /** Called for every file left out of a folder: a database (the queue's own, or any SQLite file), a JSON Lines file. */
  readonly onSkip?: (skipped: Skipped) => void;
  readonly now?: () => number;
  /**
   * Rows per store transaction. Large enough that commits (and the WAL checkpoints they trigger)
   * are few, small enough that a concurrent `llmq run` waits well under a second for its claim.
   * A batch is held twice while the bulk load's writer thread stores it and the next is read:
   * 10,000 rows peaked at 286-300 MB RSS for a million documents, 5,000 at 260-266 MB, and 100,000
   * new documents into a queue of a million took the same time either way (10.6-11.0 s).
   * @default 5000
   */
  readonly batchRows?: number;
  /** Request bytes per store transaction, so a batch of large documents stays small in memory. @default 16 MiB */
  readonly batchBytes?: number;
  /**
   * Stop reading when aborted (Ctrl-C): the documents read so far are still stored, a bulk load is
   * finished, and the summary says `stopped`. Enqueueing the same input again adds the rest.
   */
  readonly signal?: AbortSignal;
  /**
   * Told between chunks of input how many documents are read so far, and once more as a bulk load
   * starts building its indexes, the long last step of a big load (`resumable`: EndLoadOptions).
   */
  readonly onProgress?: (p: EnqueueProgress) => void;
}

export type EnqueueProgress =
  | { readonly stage: 'reading'; readonly documents: number }
  | { readonly stage: 'indexing'; readonly documents: number; readonly resumable: boolean };

export interface EnqueueSummary {
  /** Documents looked at: files, and non-blank JSONL lines (rejected ones included). */
  readonly documents: number;
  readonly newJobs: number;
  readonly newItems: number;
  /** Items that were already queued with exactly the same request. */
  readonly unchanged: number;
  /** Items whose document changed since they were queued; they now point at a new job. */
  readonly updated: number;
  /** Old jobs of updated items that were not answered yet: dropped, never to be sent. */
  readonly dropped: number;
  /** Answered jobs whose items all moved to new jobs: the answers stay, the items will be sent again. */
  readonly orphanedAnswers: number;
  /** Jobs already queued, waiting or failed, that took the priority asked for (`--priority`). */
  readonly reprioritized: number;
  /**
   * Documents whose request `retry-failed --max-tokens` superseded (its answers were cut off at its
   * max_tokens): kept at the request with more room instead (`EnqueueResult.keptRaised`).
   */
  readonly keptRaised: number;
  /** New or updated items that point at a job that had failed: they stay failed with it (`EnqueueResult.joinedFailed`). */
  readonly joinedFailed: number;
  /** Updated items whose document now comes from another file: likely another document under the same id. */
  readonly fromAnotherFile: FromAnotherFile | null;
  /** Items already queued, their document unchanged, that now come from another file (`EnqueueResult.sourceRenamed`). */
  readonly sourceRenamed: FromAnotherFile | null;
  /** The first updated item, with the request of the job it left and of its new one (`EnqueueResult.firstMoved`). */
  readonly firstMoved: MovedItem | null;
  /**
   * Folders enqueued whose files the queue held already as items of a folder inside or around them
   * (`otherIdOfSameFile`): each such file is now two items. One per folder, with its first file.
   */
  readonly sameFilesOtherIds: readonly SameFileOtherId[];
  /**
   * JSONL lines without the id field, given `file:line` ids: how many, the first with its fields, and
   * how many lines had it. With the default `id`, null unless other lines of the input have it.
   */
  readonly withoutIdField: {
    readonly count: number;
    readonly path: string;
    readonly line: number;
    readonly has: readonly string[];
    /** JSONL lines of the input that have the field: with the default `id`, said only when some do. */
    readonly withIdField: number;
    /** Of `count`, the lines whose id field is there but null. */
    readonly nullIds: number;
  } | null;
  /** JSONL lines with a number past 2^53 in a field other than the id, which lost digits when read: how many, and the first. */
  readonly roundedNumbers: {
    readonly count: number;
    readonly path: string;
    readonly line: number;
    readonly field: string;
    readonly read: number;
  } | null;
  /** OpenAI Batch API lines read (`custom_id` and `body`): each body is the request as it is, no template or request flag applies. */
  readonly batchLines: number;
  readonly rejected: number;
  /**
   * Rejected documents whose id names an item enqueued before (and not one of this input's): that
   * item keeps its earlier document, and its answer if it has one, though the input no longer says
   * so. How many, by their jobs' states, and the first. Null when there are none.
   */
  readonly keptEarlier: KeptEarlier | null;
  /**
   * Items an earlier enqueue of a folder given now made whose file is gone: they stay in the queue
   * (sent, or their answers exported) until forgotten. Null when there are none.
   */
  readonly goneFiles: GoneFiles | null;
  /** Items named by their line in a JSONL file read to its end whose line is no line without an id now (`MovedLines`), or null. */
  readonly movedLines: MovedLines | null;
  /** Database files in folders that were left out: the queue's own, and other SQLite files. */
  readonly skipped: number;
  /** The first rejections (at most MAX_KEPT_REJECTIONS); `onReject` sees them all. */
  readonly rejections: readonly Rejection[];
  /** Store transactions written. */
  readonly batches: number;
  readonly elapsedMs: number;
  /** Reading stopped early (`signal`): what was read is stored, the rest of the input is not. */
  readonly stopped: boolean;
}

export const MAX_KEPT_REJECTIONS = 1000;

/** Rejected documents whose item was enqueued before (`EnqueueSummary.keptEarlier`). */
export interface KeptEarlier {
  /** Items (an item rejected on two lines is one). */
  readonly count: number;
  /** Their jobs' states: `pending` and `running` ones are sent as enqueued before, `done` ones keep that answer. */
  readonly states: Readonly<Partial<Record<JobState, number>>>;
  /** The first in input order: its place and id. */
  readonly first: { readonly path: string; readonly line?: number; readonly id: string };
  /** The first few ids (KEPT_EARLIER_IDS_SHOWN), in input order. */
  readonly ids: readonly string[];
  /** Only the first MAX_REJECTED_IDS rejected documents with an id were looked up. */
  readonly partial: boolean;
}

/** What enqueue needs of the store: its intake, and where it lives (to skip its own files in a folder). */
export type IntakeStore = Pick<JobQueue, 'enqueue' | 'beginLoad' | 'endLoad' | 'keepRejections'> &
  StoreIdentity &
  Partial<Pick<QueueReader, 'item' | 'itemStates' | 'folderItems' | 'lineItemIds' | 'itemSeqSpan'>>;

/**
 * Read every source, render each document into its request, and store the rows in batches.
 * Bad input never stops the good: each rejection is reported and the rest goes in. Source paths are
 * checked before anything is written, so a typo in one of them enqueues nothing.
 */
export async function enqueue(store: IntakeStore, options: EnqueueOptions): Promise<EnqueueSummary> {
  const now = options.now ?? Date.now;
  const started = now();
  const named = await resolveSources(options.sources, options.stdin !== undefined);
  const maxDocBytes = options.maxDocBytes ?? DEFAULT_MAX_DOC_BYTES;
  const config: ReadConfig = {
    stdin: options.stdin,
    signal: options.signal,
    folderFirsts: [],
    walkedFolders: [],
    readJsonlFiles: [],
    jsonl: { maxDocBytes, idField: options.idField ?? DEFAULT_ID_FIELD, textField: options.textField ?? DEFAULT_TEXT_FIELD },
    folder: {
      maxDocBytes,
      include: globMatcher(options.globs ?? []),
      hidden: options.hidden ?? false,
      ownDatabase: store.kind === 'sqlite' && store.location !== ':memory:' ? await databaseFiles(store.location) : undefined,
      readFiles: new Set<string>(),
    },
  };
  // a file or folder named beside the folder that holds it is read after it, its files only where
  // the walk did not read them (`docs docs/a`: read as named too, each file of docs/a was a second
  // item under a second id, two jobs where the prompt names the path); a walk skips files read
  // already (FolderOptions.readFiles), so what the outer walk left out (a --glob, an answers
  // folder, a link it does not follow) is still read as named
  const inner = new Set(named.filter((source) => inFolderNamed(source, named, config.folder)));
  const sources = [
    ...named.filter((source) => !inner.has(source)),
    ...named.filter((source) => inner.has(source) && source.kind === 'folder'),
    ...named.filter((source) => inner.has(source) && source.kind === 'file'),
  ];
  // a queue without items before this enqueue has no item of a line that moved (a first enqueue skips the look)
  const hadItems = named.some((source) => source.kind === 'jsonl') && (await store.itemSeqSpan?.()) != null;
  const batcher = new Batcher(store, options, now);
  store.beginLoad?.();
  let stopped = false;
  // the inputs read to their end: what they rejected replaces what an earlier enqueue of each did
  // (each once: one named twice, `notes notes/`, is one row)
  const readWhole = new Set<string>();
  try {
    try {
      for (const source of sources) {
        if (source.kind === 'file' && inner.has(source) && config.folder.readFiles?.has(resolve(source.file))) {
          readWhole.add(source.path);
          continue;
        }
        batcher.beginSource(source.path);
        await readSource(source, batcher, config);
        readWhole.add(source.path);
      }
    } catch (error) {
      if (!(error instanceof StopReading)) throw error;
      stopped = true;
    }
    await batcher.write();
  } catch (error) {
    await batcher.settle();
    batcher.close();
    // A bulk load builds its indexes before the error is reported. Should that fail too, the first
    // error is the one to report (and the next command that writes finishes the load).
    await store.endLoad?.().catch(() => undefined);
    throw error;
  }
  const rejectedIds = batcher.rejectedIdsOfOtherItems();
  let repeatedJobs = 0;
  let gone: GoneFiles | null = null;
  let moved: MovedLines | null = null;
  let kept: KeptItems | null = null;
  try {
    const onIndexing = ({ resumable }: { resumable: boolean }) =>
      options.onProgress?.({ stage: 'indexing', documents: batcher.documents, resumable });
    repeatedJobs = (await store.endLoad?.({ onIndexing }))?.repeatedJobs ?? 0;
    // before the rejections are kept: status names the items they leave as they were
    kept = store.itemStates ? await keptEarlierItems(store.itemStates.bind(store), rejectedIds) : null;
    // what was read is stored: a failure to keep the list loses only what status would name again
    if (readWhole.size) {
      const rejections = batcher.rejectionsBySource([...readWhole], started, kept?.ids ?? new Set());
      await store.keepRejections(rejections).catch(() => undefined);
    }
    // a walk stopped early did not read what it did not reach
    if (store.folderItems && store.itemStates && !stopped) {
      const reader = { folderItems: store.folderItems.bind(store), itemStates: store.itemStates.bind(store) };
      // what was read is stored: a look that fails (or is stopped) only leaves the warning out
      gone = await goneFiles(reader, config.walkedFolders, (id) => batcher.read(id), options.signal).catch(() => null);
    }
    if (store.lineItemIds && store.itemStates && !stopped && hadItems && config.readJsonlFiles.length) {
      const reader = { lineItemIds: store.lineItemIds.bind(store), itemStates: store.itemStates.bind(store) };
      // a line rejected now keeps its item, which keptEarlier says: not one of lines moved
      const rejectedNow = new Set(rejectedIds.ids.map((r) => r.id));
      const readAgain = (id: string) => batcher.read(id) || rejectedNow.has(id);
      moved = await movedLines(reader, config.readJsonlFiles, readAgain, options.signal).catch(() => null);
    }
  } finally {
    batcher.close();
  }
  const summary = batcher.summary();
  const sameFilesOtherIds: SameFileOtherId[] = [];
  const item = store.item?.bind(store);
  for (const { root, first } of config.folderFirsts) {
    if (!item || sameFilesOtherIds.some((s) => s.root === root)) continue; // one per folder source
    const found = await otherIdOfSameFile({ item }, first, root);
    if (found) sameFilesOtherIds.push(found);
  }
  return {
    ...summary,
    keptEarlier: kept?.summary ?? null,
    goneFiles: gone,
    movedLines: moved,
    sameFilesOtherIds,
    newJobs: summary.newJobs - repeatedJobs,
    elapsedMs: now() - started,
    stopped,
  };
}

/** Ids of `keptEarlier` given, at most: enough to name in one `llmq forget`. */
const KEPT_EARLIER_IDS_SHOWN = 5;

/** Rejected documents whose item was enqueued before: what the summary says, and all their ids (for `keptItem`). */
interface KeptItems {
  readonly summary: KeptEarlier;
  readonly ids: ReadonlySet<string>;
}

/** Of the rejected documents, those whose id names an item the queue holds: kept as enqueued before. */
async function keptEarlierItems(itemStates: NonNullable<IntakeStore['itemStates']>, rejected: RejectedIds): Promise<KeptItems | null> {
  // each item once (an id rejected on two lines), the first in input order
  const firstOf = new Map<string, RejectedIds['ids'][number]>();
  for (const r of rejected.ids) if (!firstOf.has(r.id)) firstOf.set(r.id, r);
  if (firstOf.size === 0) return null;
  const asked = [...firstOf.values()];
  const found = await itemStates(asked.map((r) => r.id));
  const kept: Array<{ rejection: RejectedIds['ids'][number]; state: JobState }> = [];
  for (const [i, state] of found.entries()) if (state !== null) kept.push({ rejection: asked[i]!, state });
  if (kept.length === 0) return null;
  const states = countStates(kept.map((k) => k.state));
  const { path, line, id } = kept[0]!.rejection;
  const ids = kept.slice(0, KEPT_EARLIER_IDS_SHOWN).map((k) => k.rejection.id);
  return {
    summary: { count: kept.length, states, first: { path, ...(line !== undefined && { line }), id }, ids, partial: rejected.partial },
    ids: new Set(kept.map((k) => k.rejection.id)),
  };
}

/**
 * `input`, ending with StopReading as soon as `signal` aborts, even while no data comes: stdin
 * may be idle (`tail -f log | llmq enqueue -`), and a stop must not wait for the next line.
 */
async function* untilStopped<T>(input: AsyncIterable<T>, signal: AbortSignal | undefined): AsyncGenerator<T> {
  if (!signal) return yield* input;
  const it = input[Symbol.asyncIterator]();
  const stopped = new Promise<never>((_, reject) => {
    if (signal.aborted) reject(new StopReading());
    else signal.addEventListener('abort', () => reject(new StopReading()), { once: true });
  });
  stopped.catch(() => {});
  try {
    for (;;) {
      const next = await Promise.race([it.next(), stopped]);
      if (next.done) return;
      yield next.value;
    }
  } finally {
    // not awaited: a read may still be pending on an idle stream
    void it.return?.();
  }
}

interface RejectedIds {
  readonly ids: ReadonlyArray<{ readonly id: string; readonly path: string; readonly line: number | undefined }>;
  readonly partial: boolean;
}

interface ReadConfig {
  readonly stdin: AsyncIterable<Buffer | string> | undefined;
  readonly signal: AbortSignal | undefined;
  readonly jsonl: JsonlOptions;
  readonly folder: FolderOptions;
  /** Files named alone, and each folder's first document (FOLDERS_LOOKED_AT), for `otherIdOfSameFile`. */
  readonly folderFirsts: FolderFirst[];
  /** Folders walked to their end, for `goneFiles`. */
  readonly walkedFolders: WalkedFolder[];
  /** JSONL files read to their end, as their items' sources spell them, for `movedLines`. */
  readonly readJsonlFiles: string[];
}

/**
 * Folders of a folder source whose first document is looked up for `otherIdOfSameFile`: an earlier
 * enqueue of one folder inside it shows in that folder's files only. A few indexed lookups each.
 */
const FOLDERS_LOOKED_AT = 256;

interface FolderFirst {
  readonly root: string;
  readonly first: Pick<Document, 'id' | 'path'>;
}

/**
 * Whether a file or folder is named beside a folder that holds it, whose walk may read it: read
 * twice (`notes notes/n1.txt`), its second read was rejected as a duplicate of the first, or took a
 * second id and job (`notes/sub/b.txt` alone is `b.txt`, inside `notes` it is `sub/b.txt`). Such a
 * file is read after the folders, as named only when the walk left it out (a database, an llmq
 * export: the walk says why; hidden, outside `--glob`: not even looked at); such a folder is walked
 * after them, its files the walk read already left out.
 */
function inFolderNamed(source: Source, sources: readonly Source[], folder: FolderOptions): boolean {
  if (source.kind !== 'file' && source.kind !== 'folder') return false;
  const path = resolve(source.file);
  return sources.some((s) => {
    if (s.kind !== 'folder' || s === source) return false;
    const rel = relative(resolve(s.file), path);
    if (rel === '' || rel === '..' || rel.startsWith(`..${sep}`) || isAbsolute(rel)) return false;
    const inside = rel.split(sep).join('/');
    const walked = folder.hidden || !inside.split('/').some((part) => part.startsWith('.'));
    return walked && (source.kind === 'folder' || folder.include(inside));
  });
}

async function readSource(source: Source, sink: Batcher, o: ReadConfig): Promise<void> {
  switch (source.kind) {
    case 'stdin':
      return readJsonl(untilStopped(o.stdin!, o.signal), '-', o.jsonl, sink, true);
    case 'jsonl': {
      // its lines read (a document or a line's rejection came): not refused whole (unreadable, gzip, UTF-16),
      // where no item of it was read again and none moved
      let linesRead = false;
      const watched: EntrySink = {
        add: (entry) => {
          linesRead ||= !isRejection(entry) || entry.line !== undefined;
          sink.add(entry);
        },
        flush: () => sink.flush(),
      };
      await readJsonlFile(source.file, source.path, o.jsonl, watched);
      if (linesRead) o.readJsonlFiles.push(source.path);
      return;
    }
    case 'file':
      // a file of a folder enqueued before is in the queue already, under its path in that folder
      o.folderFirsts.push({ root: source.path, first: { id: source.id, path: source.path } });
      sink.add(await readTextFile(source.file, source.path, source.id, o.folder));
      return sink.flush();
    case 'folder': {
      // each folder's first document, of the first FOLDERS_LOOKED_AT folders walked
      const folders = new Set<string>();
      for await (const entry of readFolder(source.file, o.folder)) {
        if (isSkipped(entry)) sink.skip(entry);
        else {
          if (!isRejection(entry) && folders.size < FOLDERS_LOOKED_AT) {
            const folder = posix.dirname(entry.path);
            if (!folders.has(folder)) {
              folders.add(folder);
              o.folderFirsts.push({ root: source.path, first: { id: entry.id, path: entry.path } });
            }
          }
          sink.add(entry);
        }
        await sink.flush();
      }
      o.walkedFolders.push({ path: source.file, shown: source.path });
    }
  }
}

/**
 * Collects rendered rows and writes them a batch at a time. Remembers every id seen in this enqueue
 * (on disk, `SeenIds`) to catch the same id twice: the first document keeps the id and the later
 * one is rejected naming both places, because silently letting either win would lose a document
 * the user asked for without saying so. Ids are checked SEEN_IDS_PER_CALL at a time (one statement
 * instead of one per document): rendered rows wait in `#unchecked` until the check, which comes
 * before anything else is reported or written (another rejection, a skip, the end of a chunk), so
 * rejections and rows come out in input order, exactly as when each was checked as it came.
 */
class Batcher implements EntrySink {
  readonly #store: IntakeStore;
  readonly #render: (doc: Document) => EnqueueRow;
  readonly #onReject: ((r: Rejection) => void) | undefined;
  readonly #backpressure: (() => Promise<void> | void) | undefined;
  readonly #onSkip: ((s: Skipped) => void) | undefined;
  readonly #signal: AbortSignal | undefined;
  readonly #now: () => number;
  readonly #maxRows: number;
  readonly #maxBytes: number;
  readonly #seen: SeenIds;
  /** The JSONL field of item ids (--id-field), for the advice of #keptEarlier. */
  readonly #idField: string;
  readonly #onProgress: EnqueueOptions['onProgress'];
  #rows: EnqueueRow[] = [];
  /** Rejected documents that had an id, in input order (the first MAX_REJECTED_IDS), for `keptEarlier`. */
  #rejectedIds: Array<{ id: string; path: string; line: number | undefined }> = [];
  #rejectedIdsPartial = false;
  /** Rendered rows whose ids are not checked yet, with where each came from; in input order. */
  #unchecked: { row: EnqueueRow; path: string; line: number | undefined }[] = [];
  #bytes = 0;
  #documents = 0;
  #newJobs = 0;
  #dropped = 0;
  #orphanedAnswers = 0;
  #reprioritized = 0;
  #keptRaised = 0;
  #joinedFailed = 0;
  #fromAnotherFile: FromAnotherFile | null = null;
  #sourceRenamed: FromAnotherFile | null = null;
  #firstMoved: MovedItem | null = null;
  /** JSONL lines without the id field: how many, and the first (`EnqueueSummary.withoutIdField`). */
  #withoutIdField: { count: number; path: string; line: number; has: readonly string[]; nullIds: number } | null = null;
  /** JSONL lines with it (OpenAI Batch lines, named by custom_id, are neither). */
  #withIdField = 0;
  #roundedNumbers: EnqueueSummary['roundedNumbers'] = null;
  #batchLines = 0;
  #newItems = 0;
  #unchanged = 0;
  #updated = 0;
  #rejected = 0;
  #skipped = 0;
  #batches = 0;
  readonly #rejections: Rejection[] = [];
  /** Rejections by the input they came from (`beginSource`), what the store keeps of them. */
  readonly #bySource = new Map<string, { rejected: number; first: SourceRejections['first'][number][]; ids: (string | undefined)[] }>();
  #source: string | null = null;
  /** The batch being written while the next one is read; awaited before another starts, so batches still go in one at a time, in order. */
  #writing: Promise<void> | null = null;

  constructor(store: IntakeStore, o: EnqueueOptions, now: () => number) {
    this.#store = store;
    this.#render = makeRenderer(o.request);
    // after the renderer: a bad template throws before the temporary index file is opened
    this.#seen = new SeenIds();
    this.#onReject = o.onReject;
    this.#backpressure = o.backpressure;
    this.#onSkip = o.onSkip;
    this.#signal = o.signal;
    this.#now = now;
    this.#maxRows = o.batchRows ?? 5_000;
    this.#maxBytes = o.batchBytes ?? 16 * 1024 * 1024;
    this.#idField = o.idField ?? 'id';
    this.#onProgress = o.onProgress;
  }

  add(entry: Entry): void {
    // A stop is checked as the next document comes, not as a chunk ends: one asked while the last
    // chunk is stored stops nothing (all was read), where at the chunk's end it cut an input read whole.
    if (this.#signal?.aborted) throw new StopReading();
    this.#documents++;
    if (isRejection(entry)) return this.#reject(entry);
    if (entry.withoutIdField) {
      this.#withoutIdField ??= { count: 0, path: entry.path, line: entry.line ?? 0, has: entry.withoutIdField, nullIds: 0 };
      this.#withoutIdField.count++;
      // the field is there, its value null
      if (entry.withoutIdField.includes(this.#idField)) this.#withoutIdField.nullIds++;
    } else if (entry.line !== undefined && !entry.body) this.#withIdField++;
    if (entry.body) this.#batchLines++;
    let row: EnqueueRow;
    try {
      row = this.#render(entry);
    } catch (error) {
      if (error instanceof MissingValueError) {
        return this.#reject({ path: entry.path, line: entry.line, id: entry.id, reason: error.message });
      }
      throw error;
    }
    // what is stored of a rejected line is nothing: only the rows' numbers are said
    if (entry.roundedNumber) {
      const r = this.#roundedNumbers;
      this.#roundedNumbers = r
        ? { ...r, count: r.count + 1 }
        : { count: 1, path: entry.path, line: entry.line ?? 0, ...entry.roundedNumber };
    }
    // Only a document that became a row claims its id: a rejected one leaves it free.
    this.#unchecked.push({ row, path: entry.path, line: entry.line });
    if (this.#unchecked.length === SEEN_IDS_PER_CALL) this.#checkIds();
  }

  /** A file left out of a folder is no document: not counted as one, and not a rejection. */
  skip(s: Skipped): void {
    // a walk through thousands of skipped files stops as promptly as one through documents
    if (this.#signal?.aborted) throw new StopReading();
    this.#checkIds();
    this.#skipped++;
    this.#onSkip?.(s);
  }

  /** Write full batches; a partial one waits for more rows. Between chunks of input. */
  async flush(): Promise<void> {
    // every chunk: a duplicate on a slow stdin is reported when its line comes, not 64 lines later
    this.#checkIds();
    this.#onProgress?.({ stage: 'reading', documents: this.#documents });
    await this.#backpressure?.();
    if (this.#rows.length >= this.#maxRows || this.#bytes >= this.#maxBytes) await this.#write(false);
  }

  /** Write everything, the last batch partial. */
  async write(): Promise<void> {
    this.#checkIds();
    await this.#write(true);
  }

  async #write(all: boolean): Promise<void> {
    while (this.#rows.length >= this.#maxRows || (this.#rows.length > 0 && (all || this.#bytes >= this.#maxBytes))) {
      let rows = this.#rows;
      if (rows.length > this.#maxRows) {
        rows = rows.splice(0, this.#maxRows);
        for (const r of rows) this.#bytes -= r.request.length;
      } else {
        this.#rows = [];
        this.#bytes = 0;
      }
      // A store that writes elsewhere (PostgreSQL's server, SQLite's bulk load writer thread) stores
      // this batch while the next one is read, rendered and hashed; SQLite's other writes are
      // synchronous, so they overlap nothing.
      await this.#writing;
      const writing = this.#store.enqueue(rows, this.#now()).then((r) => {
        this.#batches++;
        this.#newJobs += r.newJobs;
        this.#newItems += r.newItems;
        this.#unchanged += r.unchanged;
        this.#updated += r.movedItems;
        this.#dropped += r.droppedJobs;
        this.#orphanedAnswers += r.orphanedAnswers;
        // ?? 0: a store written before the field (plain JavaScript) would make the sum NaN
        this.#reprioritized += r.reprioritized ?? 0;
        this.#keptRaised += r.keptRaised ?? 0;
        this.#joinedFailed += r.joinedFailed ?? 0;
        this.#fromAnotherFile = addFromAnotherFile(this.#fromAnotherFile, r.fromAnotherFile);
        this.#sourceRenamed = addFromAnotherFile(this.#sourceRenamed, r.sourceRenamed);
        this.#firstMoved ??= r.firstMoved ?? null;
        if (r.keptItems) this.#keptEarlier(rows, r.keptItems);
      });
      // its failure is reported when it is awaited, before the next batch or at the end
      writing.catch(() => {});
      this.#writing = writing;
    }
    if (all) await this.#writing;
  }

  /** Wait for the batch in flight, whatever becomes of it: a failed read then leaves what was written before it, as when batches did not overlap. */
  async settle(): Promise<void> {
    await this.#writing?.catch(() => {});
  }

  /** Whether a document of the id `id` came to this enqueue's check of ids (a reader's rejections do not). */
  read(id: string): boolean {
    return this.#seen.has(id);
  }

  close(): void {
    this.#seen.close();
  }

  /**
   * The rejected documents' ids that no document of this input took (one rejected, another of the
   * same id enqueued, in either order, is this input's item). After `write`, before `close`: asks
   * the ids seen.
   */
  rejectedIdsOfOtherItems(): RejectedIds {
    const ids = this.#rejectedIds.filter((r) => !this.#seen.has(r.id));
    return { ids, partial: this.#rejectedIdsPartial };
  }

  /** Documents read so far: files, and non-blank JSONL lines (rejected ones included). */
  get documents(): number {
    return this.#documents;
  }

  summary(): Omit<EnqueueSummary, 'elapsedMs' | 'stopped' | 'sameFilesOtherIds' | 'keptEarlier' | 'goneFiles' | 'movedLines'> {
    return {
      documents: this.#documents,
      newJobs: this.#newJobs,
      newItems: this.#newItems,
      unchanged: this.#unchanged,
      updated: this.#updated,
      dropped: this.#dropped,
      orphanedAnswers: this.#orphanedAnswers,
      reprioritized: this.#reprioritized,
      keptRaised: this.#keptRaised,
      joinedFailed: this.#joinedFailed,
      fromAnotherFile: this.#fromAnotherFile,
      sourceRenamed: this.#sourceRenamed,
      firstMoved: this.#firstMoved,
      // with the default field, lines without ids are the usual file:line items unless others have
      // one, or the field is there with no value
      withoutIdField:
        this.#withoutIdField && (this.#idField !== DEFAULT_ID_FIELD || this.#withIdField > 0 || this.#withoutIdField.nullIds > 0)
          ? { ...this.#withoutIdField, withIdField: this.#withIdField }
          : null,
      roundedNumbers: this.#roundedNumbers,
      batchLines: this.#batchLines,
      rejected: this.#rejected,
      skipped: this.#skipped,
      rejections: this.#rejections,
      batches: this.#batches,
    };
  }

  /** Check the ids of the rows that wait for it, keep the rows whose id is new and reject the others, in input order. */
  #checkIds(): void {
    const unchecked = this.#unchecked;
    if (unchecked.length === 0) return;
    this.#unchecked = [];
    const firsts = this.#seen.addAll(
      unchecked.map((u) => u.row.itemId),
      unchecked.map((u) => u.row.source), // `file:line`, already built for the row
    );
    for (let i = 0; i < unchecked.length; i++) {
      const { row, path, line } = unchecked[i]!;
      const first = firsts?.[i];
      if (first !== undefined) {
        // a file's id is its path inside the folder given: two folders of like-named files (2023/ 2024/) meet here
        const fix =
          line === undefined
            ? ": a file's id is its path inside the folder given, so enqueue the folder that holds both to give each its own"
            : '';
        this.#report({ path, line, reason: `duplicate id ${JSON.stringify(row.itemId)} (first at ${first}, which is kept)${fix}` });
        continue;
      }
      this.#rows.push(row);
      this.#bytes += row.request.length;
    }
  }

  /** Rows read before a rejection are checked first, so that what is reported stays in input order. */
  #reject(r: Rejection): void {
    this.#checkIds();
    this.#report(r);
  }

  /**
   * Lines of a stream (stdin, a pipe) whose id, their line number, names an item of an earlier
   * enqueue that holds another request: most likely another stream piped in before, whose document
   * is kept; or the same stream with another prompt, model or option, which a line number cannot
   * tell apart from it. Rejected, saying how to give the lines ids of their own.
   */
  #keptEarlier(rows: readonly EnqueueRow[], kept: readonly string[]): void {
    const ids = new Set(kept);
    for (const row of rows) {
      if (!row.positional || !ids.has(row.itemId)) continue;
      const path = sourceFile(row.source); // `-:12`: the line's place, as `where` made it
      // a stream's lines are checked after its batch is written, maybe while the next input is read:
      // the input is the stream's path, as a JSONL input's rejections name it
      this.#report(
        {
          path,
          line: Number(row.source.slice(path.length + 1)),
          reason:
            `id ${JSON.stringify(row.itemId)} (its line number in ${path === '-' ? 'stdin' : 'this pipe'}) already names an item with ` +
            'another request, which is kept: a document from an earlier enqueue without ids, or this one with another prompt, ' +
            `model or option. Give each line an ${JSON.stringify(this.#idField)} field to replace or keep documents by id`,
        },
        path,
      );
    }
  }

  /** The input read from now on: its rejections are counted apart (`rejectionsBySource`). */
  beginSource(source: string): void {
    this.#source = source;
    if (!this.#bySource.has(source)) this.#bySource.set(source, { rejected: 0, first: [], ids: [] });
  }

  /**
   * What was rejected of each of `sources` (read whole: those only), as the store keeps it; `at`: when
   * the enqueue began. `kept`: ids of items enqueued before that keep their earlier documents (`keptItem`).
   */
  rejectionsBySource(sources: readonly string[], at: number, kept: ReadonlySet<string>): SourceRejections[] {
    return sources.map((source) => {
      // a source read inside another (a file named beside its folder) was never begun: none of its own
      const { rejected, first, ids } = this.#bySource.get(source) ?? { rejected: 0, first: [], ids: [] };
      const marked = first.map((f, i) => {
        const id = ids[i];
        return id !== undefined && kept.has(id) ? { ...f, keptItem: id } : f;
      });
      return { source, at, rejected, first: marked };
    });
  }

  /** `source`: the input the rejected document came from, when not the one being read (a pipe's line checked later). */
  #report(r: Rejection, source = this.#source): void {
    this.#rejected++;
    const of = source === null ? undefined : this.#bySource.get(source);
    if (of) {
      of.rejected++;
      if (of.first.length < KEPT_REJECTIONS_PER_SOURCE) {
        of.first.push({ path: r.path, ...(r.line !== undefined && { line: r.line }), reason: r.reason });
        of.ids.push(r.id);
      }
    }
    if (r.id !== undefined) {
      if (this.#rejectedIds.length < MAX_REJECTED_IDS) this.#rejectedIds.push({ id: r.id, path: r.path, line: r.line });
      else this.#rejectedIdsPartial = true;
    }
    if (this.#rejections.length < MAX_KEPT_REJECTIONS) this.#rejections.push(r);
    this.#onReject?.(r);
  }
}
