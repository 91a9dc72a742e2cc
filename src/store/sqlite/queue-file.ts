import { statSync } from 'node:fs';

/**
 * Watches whether the SQLite file opened at `path` is still the one there. A queue removed, or made
 * again under the same name (`rm q.db*`, then `llmq enqueue ... --db q.db`), leaves the connection
 * reading and writing the removed file, which it keeps open: a dashboard showed the old queue, live,
 * and a run went on paying for answers stored where nothing will read them. Returns a look at the
 * path: null while it is the same file, else what became of it.
 */
export function queueFileWatch(path: string): () => 'removed' | 'replaced' | null {
  const opened = statSync(path);
  return () => {
    const now = statSync(path, { throwIfNoEntry: false });
    if (!now) return 'removed';
    return now.ino === opened.ino && now.dev === opened.dev ? null : 'replaced';
  };
}

/** What became of the queue's file, said: "q.db was removed", "q.db was replaced by another file". */
export function queueFileChangeText(path: string, change: 'removed' | 'replaced'): string {
  return `${path} was ${change === 'removed' ? 'removed' : 'replaced by another file'}`;
}
