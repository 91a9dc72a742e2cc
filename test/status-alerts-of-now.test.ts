import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadPriceTable } from '../src/pricing/price-table.js';
import { buildStatusReport } from '../src/report/status.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import type { RunAlert } from '../src/store/types.js';
import { NO_STATS } from './helpers/stores.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';

// A run's alerts are what its last heartbeat stored: status shows them while that is news, and not
// a wait the queue itself, read now, shows over.

const OLDEST: RunAlert = {
  kind: 'oldest',
  message: 'the oldest pending job has waited 1m 27s (alert at 30s)',
  value: 87_000,
  threshold: 30_000,
  since: 0,
};
const FAILED: RunAlert = { kind: 'failed', message: '3 jobs failed (alert at 2)', value: 3, threshold: 2, since: 0 };

async function queueWithRun(alerts: readonly RunAlert[], oldestAgoMs: number) {
  const store = new SqliteStore(join(tempDir(), 'q.db'));
  const now = Date.now();
  await seedJobs(store, 3);
  // the jobs' age as the run's watcher saw it, or younger: an older job was taken by another run since
  store.db.prepare('UPDATE jobs SET created_at = ?').run(now - oldestAgoMs);
  await store.startRun({ id: 'run-a', host: 'here', pid: 1, startedAt: now - 60_000, options: {} });
  await store.heartbeat('run-a', now, now + 30_000, { ...NO_STATS, alerts });
  const snapshot = await store.status();
  await store.close();
  return { snapshot, now };
}

const gone = (pidGone: string[] = []) => ({ dead: new Set<string>(), pidGone: new Set(pidGone), stopped: new Set<string>() });

describe('status: the alerts of live runs', () => {
  it('shows an alert a beating run raised', async () => {
    const { snapshot, now } = await queueWithRun([FAILED, OLDEST], 90_000);
    const r = buildStatusReport(snapshot, { now, prices: loadPriceTable(), db: 'q.db', here: gone() });
    expect(r.alerts.map((a) => a.kind)).toEqual(['failed', 'oldest']);
  });

  it('leaves out an oldest-pending alert whose wait the queue, read now, is under', async () => {
    const { snapshot, now } = await queueWithRun([FAILED, OLDEST], 14_000);
    const r = buildStatusReport(snapshot, { now, prices: loadPriceTable(), db: 'q.db', here: gone() });
    expect(r.alerts.map((a) => a.kind)).toEqual(['failed']);
  });

  it('leaves out the alerts of a run whose process is gone here (killed): its last heartbeat raised them for good', async () => {
    const { snapshot, now } = await queueWithRun([FAILED, OLDEST], 90_000);
    const r = buildStatusReport(snapshot, { now, prices: loadPriceTable(), db: 'q.db', here: gone(['run-a']) });
    expect(r.activeRuns.map((x) => [x.id, x.live, x.alerts.length])).toEqual([['run-a', true, 0]]);
    expect(r.alerts).toEqual([]);
  });

  it('leaves out the alerts of a run quiet past the time its figures are of now', async () => {
    const { snapshot, now } = await queueWithRun([FAILED], 90_000);
    const r = buildStatusReport(snapshot, { now: now + 12_000, prices: loadPriceTable(), db: 'q.db', here: gone() });
    expect(r.activeRuns.map((x) => [x.live, x.sending])).toEqual([[true, false]]);
    expect(r.alerts).toEqual([]);
  });
});
