import type pg from 'pg';
import {
  addFromAnotherFile,
  type EnqueueResult,
  type FromAnotherFile,
  type EnqueueRow,
  type ForgetResult,
  type ForgetWhich,
} from '../types.js';
import { inTransaction } from './connect.js';
import { withSuperseding } from '../superseded.js';
import { DROPPED } from '../tally.js';

/**
 * One set-based statement per chunk: new jobs in input order (ON CONFLICT DO NOTHING, so identical
 * requests share one job), then the items upserted; rows whose item is unchanged touch neither. `before` reads the items as they were when the
 * statement started (every CTE sees the same snapshot), which is what tells new, moved and
 * unchanged apart without a round trip per row. Moved items get the new job, source and meta;
 * unchanged ones are left alone, as in the SQLite store.
 */
/**
 * A batch's rows, from `inputParams`: each column comes as one JSON array. node-pg writes a text[]
 * parameter as an array literal escaped character by character in JavaScript, which took more
 * client CPU than reading and hashing the documents (170 ms per 10,000 requests); JSON.stringify
 * does it natively (40 ms), and the server reads either as fast.
 */
export const INPUT_SQL = `SELECT item_id, source, meta, key, request, model, priority::int, ord FROM ROWS FROM (
    json_array_elements_text($1::json), json_array_elements_text($2::json), json_array_elements_text($3::json),
    json_array_elements_text($4::json), json_array_elements_text($5::json), json_array_elements_text($6::json),
    json_array_elements_text($7::json)
  ) WITH ORDINALITY AS t(item_id, source, meta, key, request, model, priority, ord)`;

/**
 * The seven JSON arrays INPUT_SQL reads. Text that is not JSON already is made well-formed first: a
 * lone surrogate (possible in an id read from JSONL) is sent as U+FFFD, as the text[] it replaced
 * sent it, where the server's JSON reader would refuse its escape.
 */
export function inputParams(rows: readonly EnqueueRow[]): string[] {
  const col = (f: (r: EnqueueRow) => string | number | null) => JSON.stringify(rows.map(f));
  return [
    ...itemParams(rows),
    col((r) => r.key),
    col((r) => wellFormed(r.request)),
    col((r) => wellFormed(r.model)),
    col((r) => r.priority),
  ];
}

/** The first three of inputParams: the items' ids, sources and other fields. */
function itemParams(rows: readonly EnqueueRow[]): [ids: string, sources: string, metas: string] {
  return [
    JSON.stringify(rows.map((r) => wellFormed(r.itemId))),
    JSON.stringify(rows.map((r) => wellFormed(r.source))),
    JSON.stringify(rows.map((r) => (r.meta ? JSON.stringify(r.meta) : null))),
  ];
}

/** String.prototype.toWellFormed (Node 20), which the TypeScript lib in use does not declare. */
const wellFormed = (s: string): string => (s as string & { toWellFormed(): string }).toWellFormed();

/** sourceFile (types.ts) in SQL. */
const SOURCE_FILE = (column: string) => `regexp_replace(${column}, ':[0-9]+$', '')`;

/**
 * Items that now come from another file (sourceFile: a JSONL line's file, not its line), `moved` to
 * another job or not: how many (`name`) and the first (`first_name`: id, source before, source now),
 * as `FromAnotherFile` has them. Over `input t` and `before b`.
 */
const fromAnotherFileColumns = (name: string, moved: boolean) => {
  const where = `b.job_key ${moved ? '<>' : '='} t.key AND ${SOURCE_FILE('b.source')} <> ${SOURCE_FILE('t.source')}`;
  return `count(*) FILTER (WHERE ${where})::int AS ${name},
  (array_agg(json_build_array(t.item_id, b.source, t.source) ORDER BY t.ord) FILTER (WHERE ${where}))[1] AS first_${name}`;
};
/** Unchanged items that now come from another file (`EnqueueResult.sourceRenamed`). */
const RENAMED_COLUMNS = fromAnotherFileColumns('renamed', false);

/**
 * An unchanged item takes where it comes from now, and its other fields: a file renamed or moved left
 * its items under the old name, which forget --source then took. A CTE of ENQUEUE_SQL and PROBE_SQL,
 * over their `input` and `before`; `now` the placeholder of the time in each.
 */
const refreshUnchangedSql = (now: string) => `refreshed AS (
  UPDATE items SET source = t.source, meta = t.meta, updated_at = ${now}
  FROM input t JOIN before b ON b.id = t.item_id
  WHERE items.id = t.item_id AND b.job_key = t.key AND (b.source IS DISTINCT FROM t.source OR b.meta IS DISTINCT FROM t.meta)
)`;

const ENQUEUE_SQL = `
WITH input AS (${INPUT_SQL}),
before AS (
  -- = ANY walks the unique index however large items grows (a join here may scan the table)
  SELECT i.id, i.job_key, i.source, i.meta FROM items i WHERE i.id = ANY(ARRAY(SELECT item_id FROM input))
),
changed AS (
  -- An unchanged item's job exists (items.job_key references it): leaving those rows out spares a
  -- lookup at a random place of the key index per row when the same file comes again.
  SELECT t.* FROM input t LEFT JOIN before b ON b.id = t.item_id WHERE b.job_key IS DISTINCT FROM t.key
),
new_jobs AS (
  INSERT INTO jobs (key, request, model, priority, created_at, updated_at)
  SELECT key, request, model, priority, $8, $8
  FROM (SELECT DISTINCT ON (key) key, request, model, priority, ord FROM changed ORDER BY key, ord) AS first_of_key
  ORDER BY ord
  ON CONFLICT (key) DO NOTHING
  RETURNING 1
),
-- an existing job an item points at again (its old text enqueued again): its answer is needed once more
adopted AS (
  UPDATE jobs SET orphaned = false WHERE key IN (SELECT key FROM changed) AND orphaned
),
upserted AS (
  INSERT INTO items (id, source, job_key, meta, created_at, updated_at)
  SELECT item_id, source, key, meta, $8, $8 FROM changed ORDER BY ord
  ON CONFLICT (id) DO UPDATE SET job_key = EXCLUDED.job_key, source = EXCLUDED.source, meta = EXCLUDED.meta,
    updated_at = EXCLUDED.updated_at
  WHERE items.job_key <> EXCLUDED.job_key
  RETURNING 1
),
${refreshUnchangedSql('$8')}
SELECT (SELECT count(*) FROM new_jobs) AS new_jobs,
       (SELECT array_agg(DISTINCT b2.job_key) FROM input t2 JOIN before b2 ON b2.id = t2.item_id
         WHERE b2.job_key <> t2.key) AS old_keys,
       -- where each old job's item went (of several, the last: as row by row), for its cost if it is dropped
       (SELECT jsonb_object_agg(b2.job_key, t2.key ORDER BY t2.ord) FROM input t2 JOIN before b2 ON b2.id = t2.item_id
         WHERE b2.job_key <> t2.key) AS moved_to,
       count(*) FILTER (WHERE b.id IS NULL) AS new_items,
       count(*) FILTER (WHERE b.job_key <> t.key) AS moved,
       count(*) FILTER (WHERE b.job_key = t.key) AS unchanged,
       (SELECT count(*) FROM upserted) AS written,
       -- items that now point at a job that had failed: they stay failed with it (the snapshot: new jobs
       -- are not among them); looked up only when some job has failed (a one-time check on jobs_state)
       (SELECT count(*) FROM changed c JOIN jobs j ON j.key = c.key
         WHERE j.state = 'failed' AND EXISTS (SELECT 1 FROM jobs f WHERE f.state = 'failed'))::int AS joined_failed,
       -- moved items whose document now comes from another file (EnqueueResult.fromAnotherFile)
       ${fromAnotherFileColumns('elsewhere', true)},
       ${RENAMED_COLUMNS},
       -- the first moved row, by its place in the input, and the request of the job it left (read as
       -- the statement began: the job may be dropped after it)
       (SELECT json_build_array(t2.ord, j.request) FROM input t2 JOIN before b2 ON b2.id = t2.item_id JOIN jobs j ON j.key = b2.job_key
         WHERE b2.job_key <> t2.key ORDER BY t2.ord LIMIT 1) AS first_moved
FROM input t LEFT JOIN before b ON b.id = t.item_id`;

interface Counts {
  new_jobs: number;
  new_items: number;
  moved: number;
  unchanged: number;
  old_keys: string[] | null;
  /** Each of `old_keys` and the key its item moved to. */
  moved_to: Record<string, string> | null;
  elsewhere: number;
  renamed: number;
  first_renamed: [string, string, string] | null;
  joined_failed: number;
  first_elsewhere: [string, string, string] | null;
  /** The first moved row: its place in the rows sent (from 1), and the request of the job it left. */
  first_moved: [number, string] | null;
}

/**
 * Enqueues into one queue take turns, a batch's transaction at a time (runs are not held up). Each
 * tells new, moved and unchanged items apart by what it reads before it writes, and under READ
 * COMMITTED another enqueue's rows committed in between are not in that read: two enqueues of the
 * same ids at once left the jobs of one without items, to be sent and paid for with no item to
 * show them, and a stream's line could take an earlier stream's item (EnqueueRow.positional).
 */
export const ONE_ENQUEUE_AT_A_TIME_SQL = `SELECT pg_advisory_xact_lock(hashtext('llmq enqueue ' || current_schema()))`;

/**
 * Wait for an enqueue's transaction in progress to end, holding off the next for the rest of the
 * caller's transaction (the turns of ONE_ENQUEUE_AT_A_TIME_SQL, shared). Taken before a statement
 * asks whether a job is still needed by an item: an enqueue moving the job's item away, not yet
 * committed, would otherwise be unseen, its job left pending with no item, sent and paid for.
 */
export const AFTER_ENQUEUE_IN_PROGRESS_SQL = `SELECT pg_advisory_xact_lock_shared(hashtext('llmq enqueue ' || current_schema()))`;

/**
 * enqueue --priority (EnqueueRow.setsPriority): jobs of the rows ($1 keys, $2 priorities, $3 item
 * ids, as JSON arrays) that exist and wait, or failed, take the priority asked for; of a key given
 * twice, the later row's, as row by row. A job that items not among the rows need too only moves
 * forward. Jobs this enqueue made have the priority already and are not counted.
 */
const REPRIORITIZE_SQL = `WITH asked AS (
    SELECT key, (array_agg(priority::int ORDER BY ord DESC))[1] AS priority, array_agg(item_id) AS ids
    FROM ROWS FROM (json_array_elements_text($1::json), json_array_elements_text($2::json), json_array_elements_text($3::json))
      WITH ORDINALITY AS t(key, priority, item_id, ord)
    GROUP BY key
  )
  UPDATE jobs j SET priority = a.priority, updated_at = $4 FROM asked a
  WHERE j.key = a.key AND j.state IN ('pending', 'failed') AND j.priority <> a.priority
    AND (a.priority < j.priority OR NOT EXISTS (SELECT 1 FROM items i WHERE i.job_key = j.key AND i.id <> ALL(a.ids)))`;

/** Of the keys `$1`, those superseded by a request whose job is there, and it (src/store/superseded.ts). */
const SUPERSEDING_OF_SQL = `SELECT s.key, j.key AS by, j.request FROM superseded s JOIN jobs j ON j.key = s.by_key
  WHERE s.key = ANY($1::text[])`;

/**
 * Each old key of `$1` superseded by the key beside it in `$2` (EnqueueRow.supersedes), and what
 * the old one superseded before superseded by the new one now (a second raise).
 */
const SUPERSEDE_SQL = `WITH pairs AS (SELECT DISTINCT ON (old) old, new FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS p(old, new, ord)
  ORDER BY old, ord DESC),
repointed AS (UPDATE superseded s SET by_key = p.new FROM pairs p WHERE s.by_key = p.old)
INSERT INTO superseded (key, by_key) SELECT old, new FROM pairs ON CONFLICT (key) DO UPDATE SET by_key = EXCLUDED.by_key`;

/**
 * Jobs that lost their last item to a move and were never answered: never to be sent. What a
 * dropped job's billed tries cost goes to the job its item moved to (`$2`, old key to new, as
 * `moved_to`; null for none), else to the queue's dropped cost (tally.ts's DROPPED), as orphanDropper does on SQLite.
 */
const DROP_STALE_SQL = `
WITH dropped AS (
  DELETE FROM jobs j WHERE j.key = ANY($1::text[]) AND j.state IN ('pending', 'failed')
    AND NOT EXISTS (SELECT 1 FROM items i WHERE i.job_key = j.key)
  RETURNING j.key, j.model, j.cost_usd
), gone AS (
  DELETE FROM attempts a WHERE a.job_key IN (SELECT key FROM dropped) RETURNING 1
), carried AS (
  UPDATE jobs j SET cost_usd = coalesce(j.cost_usd, 0) + c.usd
  FROM (SELECT $2::jsonb ->> d.key AS to_key, sum(d.cost_usd) AS usd FROM dropped d WHERE d.cost_usd > 0 GROUP BY 1) c
  WHERE j.key = c.to_key
), kept AS (
  INSERT INTO job_counts SELECT d.model, '${DROPPED}', count(*), 0, 0, 0, sum(d.cost_usd), 0, 0
  FROM dropped d WHERE d.cost_usd > 0 AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.key = $2::jsonb ->> d.key) GROUP BY d.model
)
SELECT (SELECT count(*) FROM dropped)::int AS n`;

/**
 * Of the old jobs of moved items, those answered (or being answered) that no item points at now:
 * marked, so status counts done over the jobs items need (migration orphaned_answers).
 */
const ORPHANED_ANSWERS_SQL = `
WITH marked AS (
  UPDATE jobs j SET orphaned = true WHERE j.key = ANY($1::text[]) AND j.state IN ('done', 'running')
    AND NOT EXISTS (SELECT 1 FROM items i WHERE i.job_key = j.key)
  RETURNING 1
)
SELECT count(*)::int AS n FROM marked`;

/**
 * The first pass over a chunk when most of its items are likely unchanged (the same file enqueued
 * again): only ids and keys go to the server, the few bytes that tell new, moved and unchanged
 * apart (with the sources and other fields, which an unchanged item takes), and it answers which
 * rows are not unchanged. Those alone then go through ENQUEUE_SQL with their requests. Sending every row's request, source and meta had the server spend 80-110 ms of
 * ~170 ms per 10,000 unchanged rows parsing them, and the client as long writing them. A chunk
 * with positional rows (EnqueueRow.positional) is always probed: those that would move are kept out.
 */
const PROBE_SQL = `
WITH input AS (
  SELECT item_id, key, source, meta, ord::int FROM ROWS FROM (json_array_elements_text($1::json), json_array_elements_text($2::json),
      json_array_elements_text($3::json), json_array_elements_text($4::json))
    WITH ORDINALITY AS t(item_id, key, source, meta, ord)
),
before AS (
  SELECT i.id, i.job_key, i.source, i.meta FROM items i WHERE i.id = ANY(ARRAY(SELECT item_id FROM input))
),
${refreshUnchangedSql('$5')}
SELECT coalesce(array_agg(t.ord ORDER BY t.ord) FILTER (WHERE b.job_key IS DISTINCT FROM t.key), '{}') AS changed,
  coalesce(array_agg(t.ord ORDER BY t.ord) FILTER (WHERE b.job_key <> t.key), '{}') AS moved,
  ${RENAMED_COLUMNS}
FROM input t LEFT JOIN before b ON b.id = t.item_id`;

/**
 * Whether the next chunk is probed first: while most rows come back unchanged. A probe of a chunk
 * of new rows is a wasted round trip and index walk, so a chunk that was mostly new or moved turns
 * it off until a chunk is mostly unchanged again (every chunk's counts say so, probed or not).
 */
export class EnqueuePg {
  readonly #pool: pg.Pool;
  #probe = true;

  constructor(pool: pg.Pool) {
    this.#pool = pool;
  }

  async enqueue(given: readonly EnqueueRow[], now: number): Promise<EnqueueResult> {
    if (given.length === 0) return nothingEnqueued();
    const total = await inTransaction(this.#pool, async (client) => {
      await client.query(ONE_ENQUEUE_AT_A_TIME_SQL);
      const superseding = (await client.query<{ key: string; by: string; request: string }>(SUPERSEDING_OF_SQL, [given.map((r) => r.key)]))
        .rows;
      const { rows, kept: keptRaised } = withSuperseding(
        given,
        new Map(superseding.map((s) => [s.key, { key: s.by, request: s.request }])),
      );
      // ON CONFLICT DO UPDATE may touch a row once per statement, so an item id that comes back within
      // the batch starts a new chunk: later rows then see earlier ones, exactly like row-by-row.
      const chunks = splitOnRepeatedIds(rows);
      // counted afresh by each try: a transaction retried after a deadlock counts its rows once
      const total = nothingEnqueued();
      if (keptRaised) total.keptRaised = keptRaised;
      // counted once all chunks are in: an item may move back to its job later in the batch
      const movedFrom: string[] = [];
      const keptItems: string[] = [];
      for (const chunk of chunks) {
        let send = chunk;
        if (this.#probe || chunk.some((r) => r.positional)) {
          // the request stays home; the source and other fields go, to be kept up to date (refreshUnchangedSql)
          const [ids, sources, metas] = itemParams(chunk);
          const keys = JSON.stringify(chunk.map((r) => r.key));
          const probe = (
            await client.query<Pick<Counts, 'renamed' | 'first_renamed'> & { changed: number[]; moved: number[] }>(PROBE_SQL, [
              ids,
              keys,
              sources,
              metas,
              now,
            ])
          ).rows[0]!;
          total.unchanged += chunk.length - probe.changed.length;
          addFirst(total, 'sourceRenamed', probe.renamed, probe.first_renamed);
          const kept = new Set(probe.moved.filter((ord) => chunk[ord - 1]!.positional));
          for (const ord of kept) keptItems.push(chunk[ord - 1]!.itemId);
          send = probe.changed.filter((ord) => !kept.has(ord)).map((ord) => chunk[ord - 1]!);
        }
        const c = send.length ? await write(client, send, now) : null;
        if (c) {
          total.newJobs += c.new_jobs;
          total.newItems += c.new_items;
          total.movedItems += c.moved;
          if (c.joined_failed) total.joinedFailed = (total.joinedFailed ?? 0) + c.joined_failed;
          addFirst(total, 'fromAnotherFile', c.elsewhere, c.first_elsewhere);
          addFirst(total, 'sourceRenamed', c.renamed, c.first_renamed);
          total.unchanged += c.unchanged;
          if (c.first_moved && !total.firstMoved) {
            const [ord, was] = c.first_moved;
            const row = send[ord - 1]!;
            total.firstMoved = { id: row.itemId, was, now: row.request };
          }
          if (c.old_keys?.length) {
            total.droppedJobs += (await client.query<{ n: number }>(DROP_STALE_SQL, [c.old_keys, c.moved_to])).rows[0]!.n;
            movedFrom.push(...c.old_keys);
          }
        }
      }
      if (movedFrom.length) total.orphanedAnswers = (await client.query<{ n: number }>(ORPHANED_ANSWERS_SQL, [movedFrom])).rows[0]!.n;
      const superseded = rows.filter((r) => r.supersedes !== undefined);
      if (superseded.length) await client.query(SUPERSEDE_SQL, [superseded.map((r) => r.supersedes), superseded.map((r) => r.key)]);
      // not the rows of items kept (a stream's line numbers that now hold another document): refused, they change nothing
      const kept = new Set(keptItems);
      const asked = rows.filter((r) => r.setsPriority && !kept.has(r.itemId));
      if (asked.length) {
        const col = (f: (r: EnqueueRow) => string | number) => JSON.stringify(asked.map(f));
        const params = [col((r) => r.key), col((r) => r.priority), col((r) => wellFormed(r.itemId)), now];
        total.reprioritized = (await client.query(REPRIORITIZE_SQL, params)).rowCount ?? 0;
      }
      if (keptItems.length) total.keptItems = keptItems;
      return total;
    });
    this.#probe = total.unchanged * 2 >= given.length;
    return total;
  }
}

async function write(client: pg.PoolClient, rows: readonly EnqueueRow[], now: number): Promise<Counts> {
  return (await client.query<Counts>(ENQUEUE_SQL, [...inputParams(rows), now])).rows[0]!;
}

function splitOnRepeatedIds(rows: readonly EnqueueRow[]): EnqueueRow[][] {
  const chunks: EnqueueRow[][] = [];
  let chunk: EnqueueRow[] = [];
  let ids = new Set<string>();
  for (const r of rows) {
    if (ids.has(r.itemId)) {
      chunks.push(chunk);
      chunk = [];
      ids = new Set();
    }
    ids.add(r.itemId);
    chunk.push(r);
  }
  chunks.push(chunk);
  return chunks;
}

/** The counts of an enqueue before any row: each call adds to a fresh one. */
function nothingEnqueued(): { -readonly [K in keyof EnqueueResult]: EnqueueResult[K] } {
  return { newJobs: 0, newItems: 0, movedItems: 0, unchanged: 0, droppedJobs: 0, orphanedAnswers: 0, reprioritized: 0 };
}

/** Thrown to roll a dry run's transaction back. */
class DryRun extends Error {
  constructor(readonly result: ForgetResult) {
    super('dry run');
  }
}

/** The items of a source (ForgetWhich, types.ts) in PostgreSQL, `$1` the path: as SOURCE_ITEMS_WHERE_SQLITE. */
const FORGET_SOURCE_SQL = `DELETE FROM items WHERE source = $1 OR left(source, length($1) + 1) = $1 || '/'
  OR (left(source, length($1) + 1) = $1 || ':' AND substr(source, length($1) + 2) ~ '^[0-9]+$') RETURNING id, job_key`;

/** Store.forgetItems: one enqueue's turn (ONE_ENQUEUE_AT_A_TIME_SQL), so no enqueue moves an item meanwhile. */
export async function forgetItemsPg(pool: pg.Pool, which: ForgetWhich, o: { dryRun?: boolean }): Promise<ForgetResult> {
  try {
    return await inTransaction(pool, async (client) => {
      await client.query(ONE_ENQUEUE_AT_A_TIME_SQL);
      let unknownIds: string[] = [];
      const removed =
        'ids' in which
          ? await client.query<{ id: string; job_key: string }>('DELETE FROM items WHERE id = ANY($1::text[]) RETURNING id, job_key', [
              [...which.ids],
            ])
          : await client.query<{ id: string; job_key: string }>(FORGET_SOURCE_SQL, [which.source]);
      const keys = removed.rows.map((x) => x.job_key);
      // what enqueues of the source, or of a folder in it, rejected: no longer a thing to fix
      if (!('ids' in which)) {
        await client.query(`DELETE FROM rejections WHERE source = $1 OR left(source, length($1) + 1) = $1 || '/'`, [which.source]);
      }
      // sorted as JavaScript sorts (the SQLite store's order), not in the database's collation
      const ids = removed.rows.map((x) => x.id).sort();
      if ('ids' in which) {
        const found = new Set(ids);
        unknownIds = [...new Set(which.ids.filter((id) => !found.has(id)))];
      }
      const distinct = [...new Set(keys)];
      const droppedJobs = distinct.length ? (await client.query<{ n: number }>(DROP_STALE_SQL, [distinct, null])).rows[0]!.n : 0;
      const orphanedAnswers = distinct.length ? (await client.query<{ n: number }>(ORPHANED_ANSWERS_SQL, [distinct])).rows[0]!.n : 0;
      const result = { items: keys.length, ids, droppedJobs, orphanedAnswers, unknownIds };
      // what it would do: done, then rolled back
      if (o.dryRun) throw new DryRun(result);
      return result;
    });
  } catch (error) {
    if (error instanceof DryRun) return error.result;
    throw error;
  }
}

/** A statement's tally of `fromAnotherFileColumns` added to `total`'s `field`: left absent while there is none, as the SQLite store's. */
function addFirst(
  total: { fromAnotherFile?: FromAnotherFile | null; sourceRenamed?: FromAnotherFile | null },
  field: 'fromAnotherFile' | 'sourceRenamed',
  count: number,
  first: [string, string, string] | null,
): void {
  if (!first) return;
  const [id, was, now] = first;
  total[field] = addFromAnotherFile(total[field], { count, first: { id, was, now } });
}
