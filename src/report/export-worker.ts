// A worker thread of a large export (export-blocks.ts): it opens the same queue and formats the
// blocks it is asked for, in the order asked, each sent back as pieces of UTF-8 bytes in buffers
// that move (not copy) to the writer and come back to be filled again once written.
import { parentPort, workerData } from 'node:worker_threads';
import { LlmqError } from '../errors.js';
import { openStore } from '../store/open-store.js';
import type { Store } from '../store/types.js';
import type { BlockReply, BlockRequest, BlockWorkerData, WorkerError } from './export-blocks.js';
import { emptyCounts, formatPages, type ExportCounts } from './export.js';

/** A piece is sent when its buffer is this full: about 6,000 openai-batch lines. */
const PIECE_BYTES = 4 * 1024 * 1024;
/** Buffers out of this thread's hands at most (sent and not yet written): what it holds whatever the answers' size. */
const MAX_BUFFERS = 3;
/** A chunk is at most ~64K characters of lines (formatPages), at most 3 bytes each; one longer line gets a buffer of its own. */
const BUFFER_BYTES = PIECE_BYTES + 3 * 64 * 1024;

const { location, filter, options } = workerData as BlockWorkerData;
const port = parentPort!;
const opened: Promise<Store> = openStore(location, { existing: true });
// a failed open is told with the first block asked for
opened.catch(() => {});
let queue = Promise.resolve();

/** Buffers written and given back, to be filled again. */
const spare: ArrayBuffer[] = [];
let outstanding = 0;
let bufferBack: (() => void) | null = null;

port.on('message', (request: BlockRequest) => {
  if (typeof request === 'object' && 'spare' in request) {
    outstanding--;
    if (request.spare && request.spare.byteLength === BUFFER_BYTES) spare.push(request.spare);
    bufferBack?.();
  } else queue = queue.then(() => (request === 'close' ? close() : format(request.block, request.items)));
});

/** A buffer to fill: a spare one, a new one while fewer than MAX_BUFFERS are out, else the next one back. */
async function nextBuffer(): Promise<Buffer> {
  while (spare.length === 0 && outstanding >= MAX_BUFFERS) await new Promise<void>((resolve) => (bufferBack = resolve));
  bufferBack = null;
  return Buffer.from(spare.pop() ?? new ArrayBuffer(BUFFER_BYTES));
}

function send(block: number, bytes: Buffer, length: number, counts: ExportCounts | null): void {
  outstanding++;
  const buffer = bytes.buffer as ArrayBuffer;
  port.postMessage({ block, buffer, length, counts } satisfies BlockReply, [buffer]);
}

async function format(block: number, items: { afterSeq: number; upToSeq: number }): Promise<void> {
  try {
    const store = await opened;
    const counts = emptyCounts();
    // Each chunk is encoded as it comes (its lines die young, rather than living on in a long
    // string the collector copies), into a buffer sent as a piece when full.
    let bytes = await nextBuffer();
    let used = 0;
    for await (const chunk of formatPages(store.exportPages({ ...filter, items }), options, counts)) {
      if (used > 0 && (used >= PIECE_BYTES || bytes.length - used < chunk.length * 3)) {
        send(block, bytes, used, null);
        bytes = await nextBuffer();
        used = 0;
      }
      if (bytes.length < chunk.length * 3) {
        // one line longer than a buffer: bytes of its own, not kept for reuse when given back
        const own = Buffer.from(new ArrayBuffer(Buffer.byteLength(chunk)));
        send(block, own, own.write(chunk), null);
        continue;
      }
      used += bytes.write(chunk, used);
    }
    send(block, bytes, used, counts);
  } catch (error) {
    port.postMessage({ block, error: workerError(error) } satisfies BlockReply);
  }
}

function workerError(error: unknown): WorkerError {
  const e = error as Error & { code?: unknown };
  return {
    message: String(e?.message ?? error),
    name: String(e?.name ?? 'Error'),
    code: typeof e?.code === 'string' ? e.code : undefined,
    exitCode: error instanceof LlmqError ? error.exitCode : undefined,
    stack: e?.stack,
  };
}

async function close(): Promise<void> {
  const store = await opened.catch(() => null);
  await store?.close();
  port.close();
}
