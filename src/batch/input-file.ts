import type { ClaimedJob } from '../store/types.js';

/** The Batch API's cap on one input file. */
export const MAX_INPUT_BYTES = 200 * 1024 * 1024;

export interface InputFile {
  readonly content: string;
  /** The jobs in the file, in order; each line's `custom_id` is the job key. */
  readonly keys: string[];
  /** Jobs that did not fit under the byte cap: to hand back. */
  readonly left: string[];
}

/**
 * One Batch API input file: a line per job, `custom_id` = the job key (unique, and what maps an
 * answer back to its job). The request is spliced in as stored, so the bytes sent are the job's.
 */
export function buildInputFile(jobs: readonly ClaimedJob[], maxBytes = MAX_INPUT_BYTES): InputFile {
  const lines: string[] = [];
  const keys: string[] = [];
  const left: string[] = [];
  let bytes = 0;
  for (const job of jobs) {
    const line = `{"custom_id":${JSON.stringify(job.key)},"method":"POST","url":"/v1/chat/completions","body":${job.request}}\n`;
    const size = Buffer.byteLength(line);
    if (left.length > 0 || (bytes + size > maxBytes && lines.length > 0)) {
      left.push(job.key);
      continue;
    }
    lines.push(line);
    keys.push(job.key);
    bytes += size;
  }
  return { content: lines.join(''), keys, left };
}
