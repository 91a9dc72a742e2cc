import { createWriteStream, fstatSync } from 'node:fs';
import { isatty } from 'node:tty';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';

/** Where a command's data goes, and how to wait until all of it is written. */
export interface DataSink {
  readonly stream: Writable;
  /** Flush and report a failed write as an error of the command. */
  done(): Promise<void>;
}

/**
 * Standard output for bulk data. process.stdout hands a failed write (`> /dev/full`, a full disk
 * behind `> results.jsonl`) to the process-wide error handler, where it can only crash the process;
 * when stdout is a file or a device, a stream of our own on the same descriptor returns the error
 * to the command instead, to be reported in one line. Pipes and terminals keep process.stdout: they
 * fill no disk, and a closed pipe is handled there.
 */
export function stdoutSink(): DataSink {
  let isFileOrDevice = false;
  try {
    const s = fstatSync(1);
    isFileOrDevice = s.isFile() || (s.isCharacterDevice() && !isatty(1));
  } catch {
    // no stdout to inspect: keep process.stdout
  }
  if (!isFileOrDevice) return { stream: process.stdout, done: async () => {} };
  // Writes at the descriptor's own offset, so `>>` still appends; fd 1 stays open for others.
  const stream = createWriteStream('', { fd: 1, autoClose: false });
  return {
    stream,
    done: async () => {
      stream.end();
      await finished(stream);
    },
  };
}
