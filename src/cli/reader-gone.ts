/**
 * When the reader of stdout or stderr goes away (`llmq run --json | head -5`, a closed terminal),
 * the next write fails with EPIPE (EIO on a hung-up terminal), and Node emits that again for every
 * later write. Most commands just exit quietly: their output has nowhere to go and they only read.
 * `run` must not exit there, with jobs in flight: it claims the event with `onReaderGone` and stops
 * like Ctrl-C, and writes through `whileReaderPresent` so nothing more is sent to the dead stream.
 */

const READER_GONE = new Set(['EPIPE', 'EIO']);

const gone = new Set<NodeJS.WritableStream>();
const claims = new Set<(stream: NodeJS.WritableStream) => void>();

/**
 * Listen for the reader of each stream going away, once per process (main does this before any
 * command runs). Unclaimed, it calls `exitQuietly`; claimed, the claims are told. Either happens
 * once per stream.
 * Any other stream error is rethrown: it is a bug or a full disk, not a reader leaving.
 */
export function watchReaders(streams: readonly NodeJS.WritableStream[], exitQuietly: () => void): void {
  for (const stream of streams) {
    stream.on('error', (error: NodeJS.ErrnoException) => {
      if (!READER_GONE.has(error.code ?? '')) throw error;
      // Writes queued before the first error fail too; the stream was dealt with on the first.
      if (gone.has(stream)) return;
      gone.add(stream);
      if (claims.size === 0) exitQuietly();
      else for (const claim of [...claims]) claim(stream);
    });
  }
}

/** Handle the reader going away instead of exiting; returns the function that gives it back. */
export function onReaderGone(claim: (stream: NodeJS.WritableStream) => void): () => void {
  claims.add(claim);
  return () => claims.delete(claim);
}

/** A write failed because the reader went away (EPIPE, EIO): not an error of the command. */
export function isReaderGoneError(error: unknown): boolean {
  return READER_GONE.has((error as NodeJS.ErrnoException | null)?.code ?? '');
}

/**
 * `stream` as it is, except that writes are dropped once its reader is gone. Only `write` is
 * intercepted: the progress bars (cli-progress, readline's cursor moves) write through it too, and
 * read `isTTY` and `columns` as they are.
 */
export function whileReaderPresent<S extends NodeJS.WritableStream>(stream: S): S {
  const write = (...args: Parameters<S['write']>): boolean => {
    if (gone.has(stream)) {
      // Keep the write contract: a callback (the last function argument) is still called.
      const callback = args.findLast((a: unknown) => typeof a === 'function') as (() => void) | undefined;
      if (callback) queueMicrotask(callback);
      return false;
    }
    return (stream.write as (...a: unknown[]) => boolean)(...args);
  };
  return new Proxy(stream, {
    get(target, property) {
      if (property === 'write') return write;
      const value = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
