// The worker thread of a large export (export-blocks.ts): it opens the same queue and formats the
// blocks it is asked for, in the order asked, each posted back as one string with its counts.
import { parentPort, workerData } from 'node:worker_threads';
import { LlmqError } from '../errors.js';
import { openStore } from '../store/open-store.js';
import type { Store } from '../store/types.js';
import type { BlockReply, BlockRequest, BlockWorkerData } from './export-blocks.js';
import { emptyCounts, formatPages } from './export.js';

const { location, filter, options } = workerData as BlockWorkerData;
const port = parentPort!;
const opened: Promise<Store> = openStore(location, { existing: true });
// a failed open is told with the first block asked for
opened.catch(() => {});
let queue = Promise.resolve();

port.on('message', (request: BlockRequest) => {
  if (typeof request === 'object' && 'spare' in request) spare.push(request.spare);
  else queue = queue.then(() => (request === 'close' ? close() : format(request.block, request.items)));
});

/** Buffers the writer has given back: a few, used again block after block, so memory waits on no collector. */
const spare: ArrayBuffer[] = [];
/** A block's first buffer: room for 4,096 openai-batch lines, grown when a block needs more. */
const FIRST_BYTES = 4 * 1024 * 1024;

async function format(block: number, items: { afterSeq: number; upToSeq: number }): Promise<void> {
  let reply: BlockReply;
  try {
    const store = await opened;
    const counts = emptyCounts();
    // Each chunk is encoded as it comes, into the block's buffer: its lines die young, rather than
    // living on in a block-long string the collector copies. The bytes are moved, not copied, to
    // the writer, which gives the buffer back when they are written.
    let bytes = Buffer.from(spare.pop() ?? new ArrayBuffer(FIRST_BYTES));
    let used = 0;
    for await (const chunk of formatPages(store.exportPages({ ...filter, items }), options, counts)) {
      // a UTF-16 unit is at most 3 bytes of UTF-8
      if (bytes.length - used < chunk.length * 3) {
        const larger = Buffer.from(new ArrayBuffer(Math.max(2 * bytes.length, used + chunk.length * 3)));
        bytes.copy(larger, 0, 0, used);
        bytes = larger;
      }
      used += bytes.write(chunk, used);
    }
    port.postMessage({ block, buffer: bytes.buffer as ArrayBuffer, length: used, counts } satisfies BlockReply, [
      bytes.buffer as ArrayBuffer,
    ]);
    return;
  } catch (error) {
    const e = error as Error & { code?: unknown };
    reply = {
      block,
      error: {
        message: String(e?.message ?? error),
        code: typeof e?.code === 'string' ? e.code : undefined,
        userFacing: error instanceof LlmqError,
        stack: e?.stack,
      },
    };
  }
  port.postMessage(reply);
}

async function close(): Promise<void> {
  const store = await opened.catch(() => null);
  await store?.close();
  port.close();
}
