import { hostname } from 'node:os';
import { isRunProcessStopped } from '../../process-alive.js';
import type { Db } from './open.js';

/**
 * The runs of this machine stopped by a signal (Ctrl-Z, SIGSTOP), as a sentence saying how to let
 * them go on; null when there is none. A run stopped inside a write keeps SQLite's write lock, and
 * every other command that writes waits on it and fails (SQLITE_BUSY), where a stopped run is
 * otherwise only spared its jobs: the lock's holder then has a pid to name, not "another program".
 */
export function stoppedRunsText(db: Db): string | null {
  let pids: number[];
  try {
    const runs = db.prepare('SELECT pid, started_at FROM runs WHERE ended_at IS NULL AND host = ?').all(hostname()) as Array<{
      pid: number;
      started_at: number;
    }>;
    pids = runs.filter((r) => r.pid !== process.pid && isRunProcessStopped(r.pid, r.started_at)).map((r) => r.pid);
  } catch {
    return null; // a database too locked or damaged to read: the message stays the general one
  }
  if (pids.length === 0) return null;
  const one = pids.length === 1;
  return (
    `llmq run pid ${pids.join(', ')} on this machine ${one ? 'is' : 'are'} stopped (Ctrl-Z or SIGSTOP), most likely inside a write to it: ` +
    `fg in ${one ? 'its terminal' : 'their terminals'}, or kill -CONT ${pids.join(' ')}, lets ${one ? 'it' : 'them'} go on and let go of the queue`
  );
}
