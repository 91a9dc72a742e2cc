import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';
import { LlmqError } from '../errors.js';
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
/** Blocks asked of each worker at a time: memory stays a few blocks whatever the size. */
const AHEAD = 2;
/** Worker threads: this one only writes what they send, in order. */
const WORKERS = 2;

export interface ExportSource {
  readonly reader: QueueReader;
  /** Where the queue is, for a worker thread to open it too; null keeps the export on this thread (`:memory:`). */
  readonly location: string | null;
  readonly filter: ExportFilter;
}

/**
 * The export's text in input order, head first, a chunk at a time; `counts` is filled as it goes.
 * Reading rows and writing their lines is CPU on one thread (two thirds of it building the driver's
 * values), so a large export is split into blocks of item seqs: this thread formats the even ones
 * and a worker thread, with its own connection, the odd ones, a few blocks ahead; the text is
 * handed over in order. A block's failure is thrown where that block's text would have been, so
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
  const span = source.location === null || availableParallelism() < 2 ? null : await source.reader.itemSeqSpan();
  if (!span || span.last - span.first + 1 < sizes.parallelMinItems || source.location === null) {
    yield* formatPages(source.reader.exportPages(source.filter), o, counts);
    return;
  }
  const blocks: Array<{ afterSeq: number; upToSeq: number }> = [];
  for (let after = span.first - 1; after < span.last; after += sizes.blockSeqs) {
    blocks.push({ afterSeq: after, upToSeq: Math.min(after + sizes.blockSeqs, span.last) });
  }
  // Items enqueued while the export runs are read as one thread would read them: the last block has no end.
  blocks[blocks.length - 1] = { afterSeq: blocks[blocks.length - 1]!.afterSeq, upToSeq: Number.MAX_SAFE_INTEGER };
  // Alike threads, so alike shares: block b is worker b % WORKERS's, each asked AHEAD blocks at a time.
  const workers = Array.from({ length: WORKERS }, () => new BlockWorker(source.location!, source.filter, o));
  const ask = (b: number) => {
    if (b < blocks.length) workers[b % WORKERS]!.ask(b, blocks[b]!);
  };
  let finished = false;
  try {
    for (let b = 0; b < WORKERS * AHEAD; b++) ask(b);
    for (let b = 0; b < blocks.length; b++) {
      const done = await workers[b % WORKERS]!.take(b);
      ask(b + WORKERS * AHEAD);
      addCounts(counts, done.counts);
      const worker = workers[b % WORKERS]!;
      yield { bytes: new Uint8Array(done.buffer, 0, done.length), written: () => worker.giveBack(done.buffer) };
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

/** What the worker thread is given: where to read, and how to write it. */
export interface BlockWorkerData {
  readonly location: string;
  readonly filter: ExportFilter;
  readonly options: ExportOptions;
}

export type BlockRequest =
  | { readonly block: number; readonly items: { afterSeq: number; upToSeq: number } }
  /** a block's buffer, written: the worker fills it again */
  | { readonly spare: ArrayBuffer }
  | 'close';

export type BlockReply =
  | { readonly block: number; readonly buffer: ArrayBuffer; readonly length: number; readonly counts: ExportCounts }
  | { readonly block: number; readonly error: { message: string; code?: string; userFacing: boolean; stack?: string } };

const FROM_SOURCE = import.meta.url.endsWith('.ts');
const WORKER = new URL(FROM_SOURCE ? './export-worker.ts' : './export-worker.js', import.meta.url);

function startWorker(workerData: BlockWorkerData): Worker {
  if (!FROM_SOURCE) return new Worker(WORKER, { workerData });
  // Under the test runner (run from the project's folder) these modules are TypeScript: the worker has tsx load its module.
  const load = `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(WORKER.href)}); })`;
  return new Worker(load, { eval: true, workerData });
}

/** The worker thread that formats the odd blocks, one request at a time, in the order asked. */
class BlockWorker {
  readonly #worker: Worker;
  readonly #replies = new Map<number, BlockReply>();
  #waiting: { block: number; resolve: (reply: BlockReply) => void; reject: (error: Error) => void } | null = null;
  #broken: Error | null = null;
  readonly #exited: Promise<void>;

  constructor(location: string, filter: ExportFilter, options: ExportOptions) {
    this.#worker = startWorker({ location, filter, options });
    this.#exited = new Promise((resolve) => this.#worker.once('exit', () => resolve()));
    this.#worker.on('message', (reply: BlockReply) => {
      if (this.#waiting?.block === reply.block) {
        const waiting = this.#waiting;
        this.#waiting = null;
        waiting.resolve(reply);
      } else this.#replies.set(reply.block, reply);
    });
    const fail = (error: Error) => {
      this.#broken ??= error;
      this.#waiting?.reject(this.#broken);
      this.#waiting = null;
    };
    this.#worker.on('error', fail);
    this.#worker.on('exit', (code) => fail(new Error(`the export's worker thread stopped early (exit code ${code})`)));
  }

  ask(block: number, items: { afterSeq: number; upToSeq: number }): void {
    const request: BlockRequest = { block, items };
    this.#worker.postMessage(request);
  }

  /** A block's buffer, written: the worker fills it again (after a stop, there is no one to give it to). */
  giveBack(buffer: ArrayBuffer): void {
    if (this.#broken) return;
    const back: BlockRequest = { spare: buffer };
    this.#worker.postMessage(back, [buffer]);
  }

  /** The text of `block` (asked for before), or its failure thrown as the worker saw it. */
  async take(block: number): Promise<{ buffer: ArrayBuffer; length: number; counts: ExportCounts }> {
    let reply = this.#replies.get(block);
    this.#replies.delete(block);
    if (!reply) {
      if (this.#broken) throw this.#broken;
      reply = await new Promise<BlockReply>((resolve, reject) => {
        this.#waiting = { block, resolve, reject };
      });
    }
    if ('error' in reply) {
      const e = reply.error;
      const error = e.userFacing ? new LlmqError(e.message) : Object.assign(new Error(e.message), { code: e.code });
      if (!e.userFacing && e.stack) error.stack = e.stack;
      throw error;
    }
    return reply;
  }

  /** After the last block, let the worker close its connection; on a stop before that, stop it (it only reads). */
  async close(finished: boolean): Promise<void> {
    if (finished && !this.#broken) this.#worker.postMessage('close' satisfies BlockRequest);
    else await this.#worker.terminate();
    await this.#exited;
  }
}
