import { access, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * The file `llmq export --out-dir` leaves in the folder it writes: a folder enqueue that meets it in
 * a subfolder leaves that subfolder out. Answers exported beside the documents (`--out-dir
 * docs/answers`) were read back as new documents by the next `llmq enqueue docs`, and a run paid to
 * summarize the summaries. Hidden, so a walk never reads it as a document of its own.
 */
export const ANSWERS_MARKER = '.llmq-answers';

const MARKER_TEXT =
  'This folder holds answers that `llmq export --out-dir` wrote. `llmq enqueue` leaves it out of a folder it reads,\n' +
  'so that the answers are not sent again as documents. To enqueue its files anyway, name this folder itself.\n';

/** Mark `dir` (made already) as a folder of exported answers. */
export async function markAnswersFolder(dir: string): Promise<void> {
  await writeFile(join(dir, ANSWERS_MARKER), MARKER_TEXT);
}

/** Whether `dir` is a folder `llmq export --out-dir` wrote. */
export async function isAnswersFolder(dir: string): Promise<boolean> {
  return access(join(dir, ANSWERS_MARKER)).then(
    () => true,
    () => false,
  );
}
