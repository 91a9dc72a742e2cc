import { availableParallelism } from 'node:os';
import type { Worker } from 'node:worker_threads';
import { LlmqError } from '../errors.js';
import { startModuleWorker } from '../worker-module.js';
import type { ExportFilter, JobState, QueueReader } from '../store/types.js';
import { exportHead, formatPages, type ExportChunk, type ExportCounts, type ExportOptions } from './export.js';

export interface BlockSizes {
  /** Below this many items (by seq) one thread does it all: starting the workers (~60 ms) would cost more than it saves. */
  readonly parallelMinItems: number;
  /** Items (by seq) in a block: what one worker reads and formats at a time. */
  readonly blockSeqs: number;
}

/** A block is about 2.5 MB of openai-batch text, so its hand-over is a small part of its work. */
const BLOCK_SIZES: BlockSizes = Object.freeze({ parallelMinItems: 50_000, blockSeqs: 4096 });
/** Blocks asked of each worker at a time (what it holds in bytes is bounded by its buffers: export-worker.ts). */
const AHEAD = 2;
/** Worker threads: this one only writes what they send, in order. */
const WORKERS = 2;

export interface ExportSource {
  readonly reader: QueueReader;
  /** Where the queue is, for worker threads to open it too; null keeps the export on this thread (`:memory:`, PostgreSQL). */
  readonly location: string | null;
  readonly filter: ExportFilter;
}

/**
 * The export's text in input order, head first, a chunk at a time; `counts` is filled as it goes.
 * Reading rows and writing their lines is CPU on one thread (two thirds of it the driver building
 * values), so a large export is split into blocks of item seqs, formatted by two worker threads
 * (block b by worker b % 2), each with its own connection, a few blocks ahead; this thread writes
 * their bytes in order. A block's failure is thrown where that block's text would have been, so
 * everything before it is written, as when one thread reads all.
 */
export async function* exportChunks(
  source: ExportSource,
  o: ExportOptions,
  counts: ExportCounts,
  sizes: BlockSizes = BLOCK_SIZES,
): AsyncGenerator<ExportChunk> {
  const head = exportHead(o.format);
  if (head) yield head;
  const location = availableParallelism() < 2 ? null : source.location;
  const span = location === null ? null : await source.reader.itemSeqSpan();
  if (location === null || !span || span.last - span.first + 1 < sizes.parallelMinItems) {
    yield* formatPages(source.reader.exportPages(source.filter), o, counts);
    return;
  }
  const blocks: Array<{ afterSeq: number; upToSeq: number }> = [];
  for (let after = span.first - 1; after < span.last; after += sizes.blockSeqs) {
    blocks.push({ afterSeq: after, upToSeq: Math.min(after + sizes.blockSeqs, span.last) });
  }
  // Items enqueued while the export runs are read as one thread would read them: the last block has
  // no end (its worker sends it in pieces, as any block, so it costs no more memory than the others).
  blocks[blocks.length - 1] = { afterSeq: blocks[blocks.length - 1]!.afterSeq, upToSeq: Number.MAX_SAFE_INTEGER };
  const workers: BlockWorker[] = [];
  const ask = (b: number) => {
    if (b < blocks.length) workers[b % WORKERS]!.ask(b, blocks[b]!);
  };
  let finished = false;
  try {
    for (let w = 0; w < WORKERS; w++) workers.push(new BlockWorker(location, source.filter, o));
    for (let b = 0; b < WORKERS * AHEAD; b++) ask(b);
    for (let b = 0; b < blocks.length; b++) {
      const worker = workers[b % WORKERS]!;
      for (;;) {
        const piece = await worker.take(b);
        if (piece.length === 0) worker.giveBack(piece.buffer, true);
        else yield { bytes: new Uint8Array(piece.buffer, 0, piece.length), written: (reusable) => worker.giveBack(piece.buffer, reusable) };
        if (piece.counts) {
          addCounts(counts, piece.counts);
          break;
        }
      }
      ask(b + WORKERS * AHEAD);
    }
    finished = true;
  } finally {
    await Promise.all(workers.map((w) => w.close(finished)));
  }
}

function addCounts(into: ExportCounts, from: ExportCounts): void {
  into.written += from.written;
  for (const s of Object.keys(from.skipped) as JobState[]) into.skipped[s] += from.skipped[s];
}

/** What a worker thread is given: where to read, and how to write it. */
export interface BlockWorkerData {
  readonly location: string;
  readonly filter: ExportFilter;
  readonly options: ExportOptions;
}

export type BlockRequest =
  | { readonly block: number; readonly items: { afterSeq: number; upToSeq: number } }
  /** a piece's buffer, written: the worker fills it again (`spare` null: the stream kept it; the worker may make another) */
  | { readonly spare: ArrayBuffer | null }
  | 'close';

/** A piece of a block's bytes, in order; the block's last piece has its counts. Or the block's failure. */
export type BlockReply =
  | { readonly block: number; readonly buffer: ArrayBuffer; readonly length: number; readonly counts: ExportCounts | null }
  | { readonly block: number; readonly error: WorkerError };

export interface WorkerError {
  readonly message: string;
  readonly name: string;
  readonly code?: string;
  /** An LlmqError's exit code: the message is for the user as it is. */
  readonly exitCode?: number;
  readonly stack?: string;
}

/**
 * A worker's young generation grows with what survives its scavenges (a block's lines until they
 * are encoded) and, unbounded, kept growing through the run: the export's RSS was 159 MB at 100,000
 * rows and 192 MB at 1,000,000. At 16 MB: 160 and 164 MB, as fast (8 MB: 143/150 MB, 10% slower).
 */
const WORKER_LIMITS = { maxYoungGenerationSizeMb: 16 };

function startWorker(workerData: BlockWorkerData): Worker {
  return startModuleWorker(import.meta.url, 'export-worker', { workerData, resourceLimits: WORKER_LIMITS });
}

/** A worker thread formatting the blocks asked of it, one at a time, in the order asked. Its pieces are taken by one reader, in order. */
class BlockWorker {
  readonly #worker: Worker;
  readonly #replies = new Map<number, BlockReply[]>();
  #waiting: { block: number; resolve: (reply: BlockReply) => void; reject: (error: Error) => void } | null = null;
  #broken: Error | null = null;
  #closing = false;
  readonly #exited: Promise<void>;

  constructor(location: string, filter: ExportFilter, options: ExportOptions) {
    this.#worker = startWorker({ location, filter, options });
    this.#exited = new Promise((resolve) => this.#worker.once('exit', () => resolve()));
    this.#worker.on('message', (reply: BlockReply) => {
      if (this.#waiting?.block === reply.block) {
        const waiting = this.#waiting;
        this.#waiting = null;
        waiting.resolve(reply);
      } else {
        const pieces = this.#replies.get(reply.block);
        if (pieces) pieces.push(reply);
        else this.#replies.set(reply.block, [reply]);
      }
    });
    const fail = (error: Error) => {
      this.#broken ??= error;
      this.#waiting?.reject(this.#broken);
      this.#waiting = null;
    };
    this.#worker.on('error', (error: Error & { code?: string }) =>
      fail(
        error.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? new LlmqError(
              'The export ran out of memory in a worker thread. Give Node more (NODE_OPTIONS=--max-old-space-size=4096) and export again.',
            )
          : error,
      ),
    );
    this.#worker.on('messageerror', fail);
    this.#worker.on('exit', (code) => {
      if (!this.#closing) fail(new Error(`the export's worker thread stopped before its blocks were done (exit code ${code})`));
    });
  }

  ask(block: number, items: { afterSeq: number; upToSeq: number }): void {
    this.#worker.postMessage({ block, items } satisfies BlockRequest);
  }

  /** The next piece of `block` (asked for before), or its failure thrown as the worker saw it. One taker at a time. */
  async take(block: number): Promise<{ buffer: ArrayBuffer; length: number; counts: ExportCounts | null }> {
    const pieces = this.#replies.get(block);
    let reply = pieces?.shift();
    if (pieces?.length === 0) this.#replies.delete(block);
    if (!reply) {
      if (this.#broken) throw this.#broken;
      if (this.#waiting) throw new Error(`BlockWorker.take(${block}) while block ${this.#waiting.block} is awaited: one taker at a time`);
      reply = await new Promise<BlockReply>((resolve, reject) => {
        this.#waiting = { block, resolve, reject };
      });
    }
    if ('error' in reply) throw rebuilt(reply.error);
    return reply;
  }

  /** A piece written: its buffer back to be filled again when `reusable`, else only word that it is out of the worker's hands. */
  giveBack(buffer: ArrayBuffer, reusable: boolean): void {
    if (this.#broken || this.#closing) return;
    if (reusable) this.#worker.postMessage({ spare: buffer } satisfies BlockRequest, [buffer]);
    else this.#worker.postMessage({ spare: null } satisfies BlockRequest);
  }

  /** After the last block, let the worker close its connection; on a stop before that, stop it (it only reads). */
  async close(finished: boolean): Promise<void> {
    this.#closing = true;
    if (finished && !this.#broken) this.#worker.postMessage('close' satisfies BlockRequest);
    else await this.#worker.terminate();
    await this.#exited;
  }
}

/** The worker's error on this thread: a user's message stays one (exit code and all); anything else keeps its name, code and stack. */
function rebuilt(e: WorkerError): Error {
  if (e.exitCode !== undefined) return new LlmqError(e.message, { exitCode: e.exitCode });
  const error = Object.assign(new Error(e.message), e.code === undefined ? {} : { code: e.code });
  error.name = e.name;
  if (e.stack) error.stack = e.stack;
  return error;
}
