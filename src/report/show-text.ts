import { RUN_DIED_TEXT } from '../store/claim-result.js';
import { CUT_OFF, finishReasonOf, isRefusal } from '../provider/finish.js';
import type { ItemDetail } from '../store/types.js';
import { count, duration, int, NO_PAINT, oneLine, printable, printableText, usd, utcTime, type Paint } from './format.js';
import { mayBeBilledText } from './status-text.js';

/** Text longer than this is cut in `llmq show` unless `--full`. */
export const TRIM_CHARS = 800;

/**
 * What of a job's cost its own tries do not account for: the billed tries of a request its item
 * moved from, whose job was dropped unanswered with its attempts (`retry-failed --max-tokens` of an
 * answer cut off before its JSON was whole, a document edited after its answers were rejected),
 * their cost carried to this job. `show` gave that cost with no word of it. 0 when there is none
 * (below a nano-dollar: the two sums' rounding).
 */
function costOfReplaced(d: ItemDetail, jobUsd: number): number {
  // the tries a job's cost holds: its answers, kept or not, whose price was known (billedAnswerUsd)
  const own = d.attempts
    .filter((a) => a.usage !== null && a.mayBeBilled !== true && (a.costUsd ?? 0) > 0)
    .reduce((sum, a) => sum + a.costUsd!, 0);
  const rest = jobUsd - own;
  return rest >= 1e-9 ? rest : 0;
}

/** The human `llmq show <id>`: the item, its job, the request, every attempt, the answer. */
export function renderItem(
  d: ItemDetail,
  o: { full?: boolean; paint?: Paint; now?: number; sharedWith?: { readonly ids: readonly string[]; readonly more: boolean } } = {},
): string {
  const p = o.paint ?? NO_PAINT;
  const full = o.full ?? false;
  const j = d.job;
  const out: string[] = [];
  const head = (s: string) => out.push('', p.bold(s));
  const field = (label: string, value: string) => out.push(`  ${label.padEnd(10)}${value}`);
  const stateColor = j.state === 'done' ? p.green : j.state === 'failed' ? p.red : j.state === 'running' ? p.cyan : (s: string) => s;

  out.push(`${p.bold('item')} ${printable(d.id)}`);
  field('source', printable(d.source));
  if (d.meta && Object.keys(d.meta).length) field('meta', printable(oneLine(JSON.stringify(d.meta), 68)));
  head('job');
  field('key', j.key);
  const shared = o.sharedWith;
  if (shared?.ids.length) {
    const n = shared.more ? `more than ${int(shared.ids.length)}` : int(shared.ids.length);
    const ids = shared.ids.map((id) => printable(id)).join(', ') + (shared.more ? ', ...' : '');
    const head = `with ${n} other ${shared.ids.length === 1 && !shared.more ? 'item' : 'items'} (one request, sent once): `;
    field('shared', head + oneLine(ids, Math.max(12, 68 - head.length)));
  }
  field(
    'state',
    stateColor(j.state) + (j.state === 'pending' && j.runAfter > (o.now ?? Date.now()) ? p.dim(` (next try ${utcTime(j.runAfter)})`) : ''),
  );
  field('model', j.model);
  field('attempts', String(j.attempts));
  field('priority', String(j.priority));
  if (j.leaseOwner) field('lease', `${j.leaseOwner} until ${utcTime(j.leaseExpiresAt ?? 0)}`);
  field('created', utcTime(j.createdAt));
  if (j.finishedAt) field('finished', utcTime(j.finishedAt));
  // the tokens of answers not kept (not the JSON asked for) were billed too: said apart from the answer's
  const notKeptTries = d.attempts.filter((a) => a.usage !== null && a.outcome !== 'done' && a.mayBeBilled !== true);
  const notKeptIn = notKeptTries.reduce((sum, a) => sum + a.usage!.promptTokens, 0);
  const notKeptOut = notKeptTries.reduce((sum, a) => sum + a.usage!.completionTokens, 0);
  const notKeptAnswers = count(notKeptTries.length, 'answer');
  if (j.usage) {
    const more = notKeptTries.length ? p.dim(` (and ${int(notKeptIn)} in, ${int(notKeptOut)} out for ${notKeptAnswers} not kept)`) : '';
    field('tokens', `${int(j.usage.promptTokens)} in, ${int(j.usage.completionTokens)} out${more}`);
  } else if (notKeptTries.length)
    field('tokens', `${int(notKeptIn)} in, ${int(notKeptOut)} out` + p.dim(` (${notKeptAnswers} billed and not kept)`));
  // answers the job did not keep (not the JSON asked for) were billed: its cost counts them, and says so
  // (those whose price was known: what the job's cost holds)
  const notKept = d.attempts.filter(
    (a) => a.usage !== null && a.outcome !== 'done' && a.mayBeBilled !== true && (a.costUsd ?? 0) > 0,
  ).length;
  const notes = notKept ? [`${count(notKept, 'answer')} billed and not kept`] : [];
  const replaced = typeof j.costUsd === 'number' ? costOfReplaced(d, j.costUsd) : 0;
  if (replaced > 0) notes.push(`${usd(replaced)} billed and not kept, for answers of the request it replaced`);
  const notKeptNote = notes.length ? p.dim(` (with ${notes.join('; ')})`) : '';
  if (typeof j.costUsd === 'number') field('cost', usd(j.costUsd) + notKeptNote);
  else if (j.state === 'done') field('cost', p.yellow('unknown (no price when it was answered)'));
  const maybe = d.attempts.filter((a) => a.mayBeBilled);
  if (maybe.length) {
    const upTo = maybe.some((x) => typeof x.costUsd !== 'number') ? null : maybe.reduce((a, x) => a + x.costUsd!, 0);
    field('', p.yellow(mayBeBilledText(maybe.length, upTo)) + p.dim(' (sent, no usable answer)'));
  }
  if (j.error) field('error', p.red(printable(j.error)));

  head('request');
  out.push(...renderRequest(j.request, full, p));

  // a 429, an outage's try or a stop gives its attempt back: the next try has the same number
  const givenBack = d.attempts.filter((a) => !counted(a)).length;
  head(`attempts (${givenBack ? `${count(d.attempts.length, 'try', 'tries')}, ${int(givenBack)} not counted` : int(d.attempts.length)})`);
  const numberWidth = Math.max(0, ...d.attempts.map((a) => `#${a.attempt}`.length));
  const unrecorded = triesWithoutRecord(d);
  if (unrecorded > 0) {
    const them = unrecorded === 1 ? 'it' : 'them';
    out.push(
      p.yellow(`  ${unrecorded === 1 ? '1 try' : `${int(unrecorded)} tries`} left no record: the run holding ${them} died`) +
        p.dim(` (a request that had left may be billed)`),
    );
  }
  if (!d.attempts.length && unrecorded === 0) out.push(p.dim('  none yet'));
  for (const [i, a] of d.attempts.entries()) {
    // retry-failed starts a failed job's count of attempts again: say so where the numbers restart
    const before = d.attempts[i - 1];
    if (before?.outcome === 'failed') out.push(p.dim('  (failed, then put back by llmq retry-failed: attempts counted afresh)'));
    const status = a.status === null ? 'no response' : `HTTP ${a.status}`;
    const outcome =
      a.outcome === 'done'
        ? p.green(a.outcome)
        : a.outcome === 'failed'
          ? p.red(a.outcome)
          : p.yellow(a.outcome === 'not_counted' ? 'not counted' : a.outcome);
    const number = (counted(a) ? `#${a.attempt}` : '-').padStart(numberWidth);
    out.push(
      `  ${number}  ${utcTime(a.startedAt)}  ${status.padEnd(11)}  ${latency(a.latencyMs).padStart(7)}  ${outcome}` +
        p.dim(`  run ${a.runId.slice(0, 8)}`),
    );
    if (a.error) out.push(`      ${p.red(printable(full ? a.error : oneLine(a.error, 72)))}`);
  }

  head('answer');
  if (j.output === null) out.push(p.dim(j.state === 'failed' ? '  none: the job failed' : '  none yet'));
  else out.push(...indent(trim(j.output, full)));
  if (!full && (j.output?.length ?? 0) > TRIM_CHARS) out.push(p.dim(`  (cut at ${TRIM_CHARS} characters; --full shows everything)`));
  const finish = j.state === 'done' ? finishReasonOf(j.response) : null;
  if (finish === CUT_OFF) out.push(p.yellow('  (the provider cut this answer off at max_tokens: finish_reason "length")'));
  else if (finish === 'content_filter') out.push(p.yellow('  (stopped by the provider\'s content filter: finish_reason "content_filter")'));
  else if (isRefusal(finish)) out.push(p.yellow('  (not an answer: the model declined, finish_reason "refusal")'));
  return out.join('\n') + '\n';
}

function renderRequest(request: string, full: boolean, p: Paint): string[] {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(request) as Record<string, unknown>;
  } catch {
    return indent(trim(request, full));
  }
  const out: string[] = [];
  const { messages, model: _model, ...params } = body;
  if (Object.keys(params).length)
    out.push(
      p.dim(
        '  ' +
          Object.entries(params)
            .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
            .join(' '),
      ),
    );
  for (const m of Array.isArray(messages) ? messages : []) {
    const msg = m as { role?: string; content?: unknown };
    out.push(`  ${p.cyan(`[${msg.role ?? '?'}]`)}`);
    const text = typeof msg.content === 'string' ? msg.content : JSON.stringify(msg.content, null, 2);
    out.push(...indent(trim(text ?? '', full), '    '));
  }
  return out;
}

function trim(text: string, full: boolean): string {
  if (full || text.length <= TRIM_CHARS) return text;
  return `${text.slice(0, TRIM_CHARS)}… [${int(text.length - TRIM_CHARS)} more characters]`;
}

/** Text shown as lines under a heading: the document's and the answer's own control characters escaped. */
function indent(text: string, pad = '  '): string[] {
  return printableText(text)
    .split('\n')
    .map((l) => pad + l);
}

function latency(ms: number): string {
  return ms < 10_000 ? `${int(ms)}ms` : duration(ms / 1000);
}

/**
 * Attempts the job's count used that no attempt row records: a claim raises the count before the
 * request leaves (and a run claims ahead), and a run that dies writes nothing more. Counted since
 * the last retry-failed (after a failed row the count starts again), leaving out the try a running
 * job has out now.
 */
function triesWithoutRecord(d: ItemDetail): number {
  // a failed job ended by a try has its record; one failed by a claim (its attempts used by runs
  // that died) has none: "attempts (0) none yet" stood under "gave up after 5 attempts"
  if (d.job.state === 'failed' && !d.job.error?.includes(RUN_DIED_TEXT)) return 0;
  const lastFailed = d.attempts.findLastIndex((a) => a.outcome === 'failed');
  // a try that gave its attempt back records none: the try after it has the same number
  const recorded = new Set(
    d.attempts
      .slice(lastFailed + 1)
      .filter(counted)
      .map((a) => a.attempt),
  );
  const used = d.job.state === 'running' ? d.job.attempts - 1 : d.job.attempts;
  let missing = 0;
  for (let n = 1; n <= used; n++) if (!recorded.has(n)) missing++;
  return missing;
}

/** A try that used one of the job's attempts: not a 429's, an outage's or a stopped run's (given back). */
function counted(a: ItemDetail['attempts'][number]): boolean {
  return a.outcome !== 'not_counted' && a.outcome !== 'released';
}
