import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * The file `llmq export --out-dir` leaves in a folder of its own answers: a folder enqueue that meets
 * it in a subfolder leaves that subfolder out. Answers exported beside the documents (`--out-dir
 * docs/answers`) were read back by the next `llmq enqueue docs` as new documents, and a run paid to
 * summarize the summaries. Hidden, so a walk never reads it as a document of its own.
 */
export const ANSWERS_MARKER = '.llmq-answers';

const MARKER_TEXT =
  'This folder holds answers that `llmq export --out-dir` wrote. `llmq enqueue` of a folder around it leaves it out,\n' +
  'so that the answers are not sent again as documents. To enqueue its files anyway, name this folder itself.\n';

/**
 * Mark `dir` (made already) as a folder of exported answers, unless it is already. Made only when
 * missing: another user's export into a shared folder need not own the file. A mark that cannot be
 * written loses only the enqueue's protection, never the export: the answers are written or refused on their own.
 */
export async function markAnswersFolder(dir: string): Promise<void> {
  await writeFile(join(dir, ANSWERS_MARKER), MARKER_TEXT, { flag: 'wx' }).catch(() => undefined);
}
