import type { Stats } from 'node:fs';
import { open } from 'node:fs/promises';

/** In a folder, only regular files are documents: opening a pipe there could wait forever for a writer. */
export const REASON_NOT_REGULAR = 'not a regular file (a socket, pipe or device)';

/**
 * Why a path the user named cannot be read as a source, or null when it can. Regular files and
 * pipes (`<(zcat a.jsonl.gz)`, a FIFO) are read; devices and sockets are refused, since
 * `/dev/zero` or `/dev/urandom` never end, and bounded memory would still mean reading forever.
 */
export function namedSourceReason(s: Stats): string | null {
  if (s.isFile() || s.isFIFO()) return null;
  const what = s.isCharacterDevice() ? 'a character device' : s.isBlockDevice() ? 'a block device' : s.isSocket() ? 'a socket' : 'a folder';
  return `not a regular file (${what}; to read a stream, pipe it to llmq enqueue -)`;
}

/**
 * At most `max + 1` bytes of a file: all of it when it fits, else just enough to know it does not.
 * Callers check the size from stat first, but a pipe has none and a file can grow after the stat,
 * so the read itself is bounded too. `expected` (the stat size) sizes the first read, so a file
 * that is as big as it said takes one read plus one to see its end.
 */
export async function readAtMost(file: string, max: number, expected = 0): Promise<Buffer> {
  const handle = await open(file, 'r');
  try {
    const chunks: Buffer[] = [];
    let total = 0;
    while (total <= max) {
      const want = Math.min(max + 1 - total, total === 0 ? expected + 1 : READ_BYTES);
      const { bytesRead, buffer } = await handle.read(Buffer.allocUnsafe(want), 0, want, null);
      if (bytesRead === 0) break;
      chunks.push(bytesRead === want ? buffer : buffer.subarray(0, bytesRead));
      total += bytesRead;
    }
    return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
  } finally {
    await handle.close();
  }
}

const READ_BYTES = 256 * 1024;
