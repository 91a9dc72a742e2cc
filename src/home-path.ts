import { homedir } from 'node:os';
import { join } from 'node:path';

/**
 * `~` and `~/...` as the user's home folder. A shell expands them only at the start of a word, so
 * `--db=~/q.db` reaches llmq as written and would otherwise make a folder named `~`.
 */
export function expandHome(path: string): string {
  if (path === '~') return homedir();
  return path.startsWith('~/') ? join(homedir(), path.slice(2)) : path;
}
