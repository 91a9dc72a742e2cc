import type { Db } from './open.js';
import { ATTEMPTS_OF_JOB } from './attempts.js';
import type { ExportFilter, ExportRow } from '../types.js';
import { exportColumns, exportJobColumns, exportRowOf, toExportRowFromValues, type RawExportValues, type RawJobValues } from '../rows.js';
import { KeptJobs, pairedInOrder, RANGE_MIN, type RawItem } from '../export-pairing.js';
import { unplannedLimit } from './unplanned-limit.js';

/**
 * Items read at a time, and about as many jobs: a page of each in memory, however big the queue.
 * Small enough that a page's rows die young: 1000 made the collector promote them (1M rows: GC
 * 1.24 s and 140 MB peak at 1000, 0.36 s and 107 MB at 250).
 */
const PAGE = 250;
/** Jobs kept from earlier pages for items that share a job or come a little out of order. */
const KEPT_JOBS = 2 * PAGE;

/**
 * Items in input order with their jobs, a page at a time. Looking each item's job up by key costs a
 * random walk of jobs_key (SHA-256 keys) per row: half the export's read at a million rows. Jobs are
 * made in the order of the first item that asks for each, so a page of items mostly wants a run of
 * consecutive jobs: one lookup finds where the run starts, and the run is read in seq order. Jobs
 * the runs do not bring (an item sharing an older job, one moved to a new job) are looked up by key.
 */
export function* exportPagesMerged(db: Db, filter: ExportFilter): Generator<readonly ExportRow[]> {
  const states = filter.states?.length ? filter.states : null;
  // While a bulk load is under way jobs_key is not there yet: the join lets SQLite index it for itself.
  if (!db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = 'jobs_key'").get()) {
    yield* exportPagesJoined(db, filter);
    return;
  }
  const upTo = filter.items?.upToSeq ?? Number.MAX_SAFE_INTEGER;
  const items = db
    .prepare(`SELECT seq, id, source, meta, job_key FROM items WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ${PAGE}`)
    .raw(true);
  const cols = exportJobColumns(filter, ATTEMPTS_OF_JOB);
  const seqOf = db.prepare('SELECT seq FROM jobs WHERE key = ?').pluck();
  const run = db.prepare(`SELECT ${cols} FROM jobs j WHERE j.seq >= ? ORDER BY j.seq LIMIT ${unplannedLimit('?')}`).raw(true);
  const byKey = db.prepare(`SELECT ${cols} FROM jobs j WHERE j.key = ?`).raw(true);
  const jobs = new KeptJobs<RawJobValues>(KEPT_JOBS);
  // One read transaction per page: a page's items and jobs are seen as of one moment, as the join saw them.
  const readPage = db.transaction((after: number) => {
    const page = items.all(after, upTo) as RawItem[];
    const paired = pairInOrder(page);
    if (paired.length === page.length) return { page, paired };
    let wanted = [...new Set(page.slice(paired.length).map((i) => i[4]))].filter((k) => !jobs.has(k));
    while (wanted.length >= RANGE_MIN) {
      const from = seqOf.get(wanted[0]) as number | undefined;
      if (from === undefined) break;
      const want = new Set(wanted);
      const got = run.all(from, wanted.length) as RawJobValues[];
      let hits = 0;
      for (const job of got) {
        jobs.keep(job);
        if (want.has(job[0])) hits++;
      }
      wanted = wanted.filter((k) => !jobs.has(k));
      // a run that brought mostly other jobs: the rest are scattered, look them up one by one
      if (hits * 2 < got.length) break;
    }
    for (const key of wanted) {
      const job = byKey.get(key) as RawJobValues | undefined;
      if (job) jobs.keep(job);
    }
    return { page, paired };
  });
  /**
   * The usual page: each item has a job of its own, made in the items' order. The run of jobs from
   * the first item's pairs with the items by position (pairedInOrder) up to the first item that
   * breaks the order; the run's jobs are kept for the rest.
   */
  const pairInOrder = (page: readonly RawItem[]): RawJobValues[] => {
    const first = page[0];
    if (!first || jobs.has(first[4])) return [];
    const from = seqOf.get(first[4]) as number | undefined;
    if (from === undefined) return [];
    const got = run.all(from, page.length) as RawJobValues[];
    const paired = pairedInOrder(page, got);
    if (paired < page.length) for (const job of got) jobs.keep(job);
    return got.slice(0, paired);
  };
  let after = filter.items?.afterSeq ?? 0;
  for (;;) {
    const { page, paired } = readPage(after);
    const rows: ExportRow[] = [];
    for (let n = 0; n < page.length; n++) {
      const i = page[n]!;
      const job = paired[n] ?? jobs.get(i[4]);
      // no job: the join left such an item out too (the foreign key keeps it from happening)
      if (!job || (states && !states.includes(job[1]))) continue;
      rows.push(exportRowOf(i[1], i[2], i[3], job, 0));
    }
    yield rows;
    if (page.length < PAGE) return;
    after = page[page.length - 1]![0];
    jobs.pageDone(page, paired.length);
  }
}

/** The join, a page at a time: each item's job looked up by key (or through an index SQLite builds for the query). */
function* exportPagesJoined(db: Db, filter: ExportFilter): Generator<readonly ExportRow[]> {
  const states = filter.states?.length ? filter.states : null;
  const where = states ? `AND j.state IN (${states.map(() => '?').join(', ')})` : '';
  const page = db.prepare(`SELECT ${exportColumns(filter, ATTEMPTS_OF_JOB)}
      FROM items i JOIN jobs j ON j.key = i.job_key
      WHERE i.seq > ? AND i.seq <= ? ${where} ORDER BY i.seq LIMIT ${PAGE}`);
  // values, not an object per row: a fifth of the read's CPU at a million rows
  page.raw(true);
  const upTo = filter.items?.upToSeq ?? Number.MAX_SAFE_INTEGER;
  let after = filter.items?.afterSeq ?? 0;
  for (;;) {
    const rows = page.all(after, upTo, ...(states ?? [])) as RawExportValues[];
    yield rows.map(toExportRowFromValues);
    if (rows.length < PAGE) return;
    after = rows[rows.length - 1]![0];
  }
}
