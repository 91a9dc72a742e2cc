import { statSync } from 'node:fs';

/**
 * Whether the SQLite file a dashboard opened is still the one at its path. A queue removed and made
 * again under the same name (`rm q.db*`, then `llmq enqueue ... --db q.db`) leaves the dashboard
 * reading the removed file, which its open connection keeps: it showed the old queue's numbers, live,
 * beside `llmq status` reading the new one. Returns a check that throws, saying so, once the path
 * names another file or none.
 */
export function queueFileCheck(path: string): () => void {
  const opened = statSync(path);
  return () => {
    const now = statSync(path, { throwIfNoEntry: false });
    if (now && now.ino === opened.ino && now.dev === opened.dev) return;
    const what = now ? 'replaced by another file' : 'removed';
    throw new Error(`${path} was ${what} since this dashboard opened it: stop llmq serve and start it again to see the queue there now`);
  };
}
