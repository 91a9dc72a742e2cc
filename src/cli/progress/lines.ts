import { FAILED_JOBS_NAMED, type ProgressSnapshot, type RunSummary, type SchedulerEventMap } from '../../scheduler/events.js';
import type { LaneSnapshot } from '../../scheduler/lane.js';
import {
  compact,
  count,
  duration,
  int,
  oneLine,
  nextTryText,
  outageText,
  percent,
  printable,
  quotedName,
  rate,
  shortDuration,
  usd,
  type Paint,
} from '../../report/format.js';
import { refusedCount, retryHints } from '../../report/refused.js';
import { collectCommand } from '../again.js';
import type { ProgressState } from './state.js';

/** The text pieces every human renderer shares, each sized for an 80-column terminal. */

/** The cost so far: "$0.42", "≥$0.42" when some model has no price, or "unknown". */
export function costAmount(s: ProgressState): string {
  if (s.cost !== null) return usd(s.cost);
  return s.knownCost > 0 ? `≥${usd(s.knownCost)}` : 'unknown';
}

/** The cost as a detail on its own: an amount reads as a cost, "unknown" needs the word. */
export function costText(s: ProgressState): string {
  const amount = costAmount(s);
  return amount === 'unknown' ? 'cost unknown' : amount;
}

/**
 * "sending waits: Redis (--redis) not answering for 35s", once it has not answered for a few seconds
 * (a blip is no news); null while it answers.
 */
export function boardDownText(since: number | null, now: number): string | null {
  if (since === null || now - since < BOARD_DOWN_NOTED_MS) return null;
  return `sending waits: Redis (--redis) not answering for ${duration((now - since) / 1000)}`;
}

const BOARD_DOWN_NOTED_MS = 3000;

/** "run 1a2b3c4d on ./llmq.db via mock: 40,000 jobs to do, 12 already done" */
export function startText(
  p: { runId: string; total: number; alreadyDone: number; dyingMayHold?: number; silentMayHold?: number; takenBack?: number },
  where: Where,
): string {
  const on = (where.db ? ` on ${where.db}` : '') + (where.provider ? ` via ${where.provider}` : '');
  const held = p.dyingMayHold || p.silentMayHold || 0;
  const todo = p.total === 0 ? (held ? 'nothing pending yet' : 'nothing to do') : `${count(p.total, 'job')} to do`;
  // the jobs a run killed outright left running, back now: the run's count grew by them
  const takenBack = p.takenBack ? `, ${int(p.takenBack)} taken back from a run that stopped` : '';
  const back = p.dyingMayHold
    ? `; up to ${int(held)} more held by a run that stopped on this machine, back within seconds`
    : held
      ? `; up to ${int(held)} more held by a run that stopped heartbeating, back when its leases run out (a minute at most)`
      : '';
  return `run ${p.runId.slice(0, 8)}${on}: ${todo}${takenBack}${p.alreadyDone ? `, ${int(p.alreadyDone)} already done` : ''}${back}`;
}

export interface Where {
  readonly db: string | null;
  readonly provider: string | null;
  /** Appended to each command the summary suggests, so it reaches the same queue (` --db q.db`). */
  readonly again?: string;
  /**
   * What a suggested `llmq run` needs besides (` --provider mock`), as `runArguments` gives it, after
   * the run that ended so: a place for the endpoint after one that reached nothing there, for the
   * amount of a budget spent.
   */
  readonly runAgain?: (r: RunSummary) => string;
  /** The offline mock answered (ProgressOptions.offline). */
  readonly offline?: boolean;
}

/**
 * What the bar and its count show: this run's jobs finished of its jobs to do, or, while other runs
 * work the queue too (`shared`), the queue's (each run alone would stand at its share of the queue,
 * and jump to 100% at the end).
 */
export function progressOf(p: ProgressSnapshot | null, total: number): { finished: number; total: number } {
  if (p?.shared) return { finished: p.shared.finished, total: p.shared.finished + p.shared.left };
  const finished = p ? p.done + p.failed : 0;
  return { finished, total: Math.max(total, finished) };
}

/**
 * "31,204/40,000 78% · 4.6 jobs/s · 612 tok/s · ETA 31m" (the bar goes in front on a TTY); with other
 * runs on the queue, its count, pace and ETA: "61,204/80,000 77% · 2 runs · 9.2 jobs/s · ETA 34m".
 */
export function countsText(p: ProgressSnapshot | null, total: number): string {
  const { finished, total: t } = progressOf(p, total);
  const parts = [`${int(finished)}/${int(t)} ${percent(finished, t)}`];
  // the others may have ended: still the queue's count, at this run's pace
  if (p?.shared) parts.push(...(p.shared.runs > 1 ? [`${int(p.shared.runs)} runs`] : []), `${rate(p.shared.jobsPerSecond)} jobs/s`);
  else if (p) parts.push(`${rate(p.jobsPerSecond)} jobs/s`, `${compact(Math.round(p.tokensPerSecond))} tok/s`);
  if (p) parts.push(`ETA ${p.etaSeconds === null ? '--' : shortDuration(p.etaSeconds)}`);
  return parts.join(' · ');
}

/**
 * "in flight 8 · waiting 3 · backoff 2 · failed 1 · $0.42", after "this run 4,120 at 4.6 jobs/s"
 * while others work the queue too; "rate-limited 26" after the backoff once a 429 came (a run
 * refused every time, its 429s taken as noise, showed nothing amiss but "0 jobs/s").
 */
export function detailText(s: ProgressState, paint: Paint): string {
  const p = s.snapshot;
  const parts = [
    ...(p?.shared ? [`this run ${int(p.done + p.failed)} at ${rate(p.jobsPerSecond)} jobs/s`] : []),
    `in flight ${int(p?.inFlight ?? 0)}`,
    `waiting ${int(p?.waiting ?? 0)}`,
    `backoff ${int(p?.backingOff ?? 0)}`,
    ...(p?.rateLimited ? [paint.yellow(`rate-limited ${int(p.rateLimited)}`)] : []),
    (p?.failed ? paint.red : (x: string) => x)(`failed ${int(p?.failed ?? 0)}`),
    costText(s),
  ];
  return parts.join(' · ');
}

/** Failures printed as they come; past this many, `llmq status` groups the rest. The run names as many by their item. */
const MAX_FAILURE_LINES = FAILED_JOBS_NAMED;

/**
 * A failed job as its line names it (`failureText`): its first item's id (what the user enqueued, and what `llmq
 * show` takes), quoted when it has spaces; else the start of its key (no item points at it).
 */
function failedName(f: SchedulerEventMap['job:failed']): string {
  if (!f.item) return `job ${f.key.slice(0, 12)}`;
  const id = printable(f.item);
  return /\s/.test(id) ? quotedName(f.item) : id;
}

/**
 * What the run's `n`th failure (from 1) prints: its own line for the first MAX_FAILURE_LINES, a note
 * that the rest go unlisted at the first of those (not at the last listed: a run with exactly that
 * many failures has none unlisted), then nothing.
 */
export function failureText(n: number, f: SchedulerEventMap['job:failed'], paint: Paint, width: number, where: Where): string | null {
  if (n <= MAX_FAILURE_LINES) {
    const shared = f.item && f.moreItems ? ', shared with other items' : '';
    return oneLine(`${paint.red('failed')} ${failedName(f)} (attempt ${f.attempt}${shared}): ${f.error}`, width);
  }
  if (n === MAX_FAILURE_LINES + 1)
    return paint.dim(`further failures are not listed here; llmq status${where.again ?? ''} groups them by reason`);
  return null;
}

/** The note shown while dispatch is paused, or null. */
export function pauseText(s: ProgressState, now: number, width = 68): string | null {
  if (s.stopping?.aborting) return 'stopping: aborting the requests in flight; their jobs go back to pending (a try may be billed)';
  if (s.stopping)
    return `stopping: letting requests in flight finish, for up to ${duration(s.stopping.graceMs / 1000)} (--grace); a second Ctrl-C (or signal) aborts`;
  const pause = s.paused;
  if (!pause) {
    const snap = s.snapshot?.paused;
    if (!snap) return null;
    return `paused (${snap.reason === 'rate_limit' ? 'rate limited' : 'provider failing'}), resuming in ${duration(Math.max(0, snap.until - now) / 1000)}`;
  }
  const next = duration(Math.max(0, pause.untilMs - now) / 1000);
  const detail = pause.detail ? ` (${pause.detail})` : '';
  // 68 leaves room for the color codes within 80 columns (cli-progress counts them as characters);
  // plain output passes a wider width, since nothing redraws it and the detail is the useful part.
  if (pause.reason === 'rate_limit') return oneLine(`paused: rate limited, resuming in ${next}${detail}`, width);
  // how long the provider has been down and how long the run waits for it (--max-outage), first: the detail is cut first
  const { downSinceMs: downSince, givesUpAtMs: givesUpAt } = pause;
  const down = downSince === undefined || givesUpAt === undefined ? 'failing' : outageText(downSince, givesUpAt, now);
  return oneLine(`paused: provider ${down}, ${nextTryText(pause.untilMs, givesUpAt, now)}${detail}`, width);
}

/** A run that found nothing to send and sent nothing: its counts would all be zeros. */
export function isEmptyRun(r: Pick<RunSummary, 'done' | 'failed' | 'retried' | 'remaining'>, s: ProgressState): boolean {
  return s.total === 0 && r.done === 0 && r.failed === 0 && r.retried === 0 && r.remaining === 0;
}

/**
 * The end-of-run summary and, when something is left to do, the next command. Of `where`: `again`,
 * what every suggested command needs to reach this queue (`dbArgument`); `runAgain`, what a suggested
 * `llmq run` needs besides to send where this run sent (`runArguments`); `offline`, the offline mock
 * answered (its cut-off stand-ins propose no more room).
 */
export function summaryText(
  r: RunSummary,
  s: ProgressState,
  paint: Paint,
  where: Pick<Where, 'again' | 'runAgain' | 'offline'> = {},
): string {
  const { again = '', offline = false } = where;
  const runAgain = where.runAgain?.(r) ?? '';
  const run = `llmq run${runAgain}`;
  const suggest = (line: (commands: string) => string, split: string, commands: readonly string[]) =>
    suggestLines(line, split, commands, again, paint);
  const wall = r.wallMs / 1000;
  const head = {
    drained: paint.green('finished'),
    limit: 'stopped at the limit',
    signal: paint.yellow('stopped'),
    fatal: paint.red('stopped by an error'),
    budget: paint.yellow('stopped by the budget'),
  }[r.reason];
  if (r.reason === 'drained' && isEmptyRun(r, s)) {
    const lines = suggest((c) => `nothing was pending: ${c} shows the queue.`, 'nothing was pending; this shows the queue:', [
      'llmq status',
    ]);
    if (r.failedInStore && allRefused(r)) lines.push(`${count(r.failedInStore, 'failed job')}: ${refusedAgain(r.failedInStore)}`);
    else if (r.failedInStore) {
      const wait = `${count(r.failedInStore, 'failed job')} wait:`;
      lines.push(...retryLines(r, suggest, run, wait, wait));
    }
    // one line when each suggestion fits on its own (a command split over lines, indented, does not)
    const split = lines.some((l) => l.startsWith(' '));
    return lines.join(again || split ? '\n' : ' ') + '\n';
  }
  const lines = [
    `${head} in ${duration(wall)}: ${paint.green(int(r.done) + ' done')}, ${r.failed ? paint.red(int(r.failed) + ' failed') : '0 failed'}, ${count(r.retried, 'retry', 'retries')}`,
    `  tokens ${compact(r.promptTokens)} in · ${compact(r.completionTokens)} out · cost ${costAmount(s)} · ${rate(wall > 0 ? (r.done + r.failed) / wall : 0)} jobs/s` +
      (r.rateLimited ? ` · ${int(r.rateLimited)} rate-limited` : ''),
  ];
  // else they read as the pace tripping the limit it says it keeps
  if (r.strayRateLimited) lines.push(paint.dim(`  ${strayText(r.strayRateLimited, r.rateLimited)}`));
  // beside "0 retries" the count alone read as requests lost, or never tried again
  else if (r.rateLimited) lines.push(paint.dim(`  ${limitedText(r.rateLimited)}`));
  // answers rejected as not the JSON asked for were billed: the cost above counts them, and says so
  if (s.billedNotKept) {
    const amount = s.billedNotKeptUsd > 0 ? `${usd(s.billedNotKeptUsd)}${s.cost === null ? '' : ' of it'} for ` : '';
    lines.push(paint.dim(`  ${amount}${count(s.billedNotKept, 'answer')} billed and not kept (not the JSON asked for)`));
  }
  const incomplete = incompleteText(r);
  if (incomplete) lines.push(paint.yellow(`  ${incomplete}`) + paint.dim(` ${incompleteKeptText(r)}`));
  lines.push(...cutOffLines(r, paint, run, again, offline));
  // beside "2 retries", the tries that may be billed read as more than were sent: the probes are neither
  if (r.probes)
    lines.push(
      paint.dim(
        `  ${count(r.requests, 'request')} sent, ${int(r.probes)} of them ${r.probes === 1 ? 'a probe' : 'probes'} while the provider was down (one at a time; a failed one counts as no retry)`,
      ),
    );
  if (r.mayBeBilled.tries) {
    const { tries, usd: worst } = r.mayBeBilled;
    lines.push(
      paint.yellow(`  ${count(tries, 'try', 'tries')} may be billed, up to ${worst === null ? 'an unknown amount' : usd(worst)}`) +
        paint.dim(' (sent, no usable answer; llmq status counts them)'),
    );
  }
  // paid for, and left out of "done" (another run's answer, or none needed): without this the run's
  // cost reads as more than its answers'
  if (r.answersNotStored) {
    const n = r.answersNotStored;
    lines.push(
      paint.yellow(`  ${count(n, 'answer')} paid for and not stored`) +
        paint.dim(
          `: ${n === 1 ? 'its job was' : 'their jobs were'} answered by another run meanwhile (this run was stopped or frozen past its leases), or forgotten`,
        ),
    );
  }
  // A fatal error's message and fix are printed by the run command, once.
  // batches out that no run collects: a run --via batch does; `llmq run` as run here never sends them
  for (const u of r.uncollected) {
    const out = `  ${count(u.jobs, 'job')} in batches no run collects:`;
    lines.push(...suggest((c) => `${out} ${c}`, out, [collectCommand(u.baseUrl)]));
  }
  // a batch counts the jobs it was sent with; some may be stored already (a run killed while collecting)
  const remaining = Math.max(0, r.remaining - r.uncollected.reduce((sum, u) => sum + u.jobs, 0));
  if (remaining > 0 && r.reason === 'drained') {
    // drained: nothing pending was left, so what remains is held elsewhere, and another run takes none of it
    const held = `  ${count(remaining, 'job')} held by another run or a batch; see them:`;
    lines.push(...suggest((c) => `${held} ${c}`, held, ['llmq status']));
  } else if (remaining > 0 && r.reason !== 'budget' && r.reason !== 'fatal') {
    // after the budget, its own message says to go on with a larger one: a bare `llmq run` would spend
    // without one; after a fatal error, its fix says to run again once it is fixed, not before
    const left = `  ${count(remaining, 'job')} left pending;`;
    const them = remaining === 1 ? 'it' : 'them';
    lines.push(...suggest((c) => `${left} ${c} picks ${them} up`, `${left} this picks ${them} up:`, [run]));
  }
  lines.push(...failedLines(r, paint, { again, runAgain }));
  if (s.unpricedModels.size > 0) {
    lines.push(paint.dim(`  no price for ${[...s.unpricedModels].join(', ')}: set one with --price IN,OUT (USD per million tokens)`));
  }
  return lines.join('\n') + '\n';
}

/**
 * The failed jobs in the queue as a run ends: where to see why, and what tries them again (nothing
 * when the provider refused them all as sent). `again` as `Where` has it; `runAgain`, what a suggested
 * `llmq run` needs besides (`Where.runAgain`'s of this run). The batch lane's end says them too.
 */
export function failedLines(
  r: Pick<RunSummary, 'failedInStore' | 'failuresInStore'>,
  paint: Paint,
  where: Pick<Where, 'again'> & { readonly runAgain?: string } = {},
): string[] {
  if (!r.failedInStore) return [];
  const { again = '', runAgain = '' } = where;
  const suggest = (line: (commands: string) => string, split: string, commands: readonly string[]) =>
    suggestLines(line, split, commands, again, paint);
  const why = `  ${count(r.failedInStore, 'failed job')} in the queue. See why:`;
  const lines = suggest((c) => `${why} ${c}`, why, ['llmq status']);
  if (allRefused(r)) lines.push(`  ${refusedAgain(r.failedInStore)}`);
  else lines.push(...retryLines(r, suggest, `llmq run${runAgain}`, '  Try again:', '  Send them again with more room:'));
  return lines;
}

/**
 * The retry-failed to try the failed jobs again with, and the run after it (`retryHints`): after
 * `head` when one command does (`roomHead` when that one gives them all more room); else the cut-off
 * ones with room first, then the others.
 */
function retryLines(
  r: Pick<RunSummary, 'failedInStore' | 'failuresInStore'>,
  suggest: (line: (commands: string) => string, split: string, commands: readonly string[]) => string[],
  run: string,
  head: string,
  roomHead: string,
): string[] {
  const hints = retryHints(r.failuresInStore, r.failedInStore);
  if (hints.length === 0) return [];
  const [first, second] = hints;
  if (!second) {
    const what = first!.kind === 'room' && first!.all ? roomHead : head;
    return suggest((c) => `${what} ${c}`, what, [first!.command, run]);
  }
  const room = `  The ${int(first!.count)} cut off, with more room:`;
  return [
    ...suggest((c) => `${room} ${c}`, room, [first!.command]),
    ...suggest((c) => `  Then the others: ${c}`, '  Then the others:', [second.command, run]),
  ];
}

/** Said in place of retry-failed when `allRefused`. */
function refusedAgain(failed: number): string {
  return failed === 1
    ? 'the provider refused it as sent (HTTP 4xx): sent again, it fails the same way'
    : 'the provider refused them as sent (HTTP 4xx): sent again, they fail the same way';
}

/** Every failed job in the queue refused as sent (`refusedAsSent`): retry-failed would pay for the same refusals. */
function allRefused(r: Pick<RunSummary, 'failedInStore' | 'failuresInStore'>): boolean {
  return r.failedInStore > 0 && refusedCount(r.failuresInStore) === r.failedInStore;
}

/** What the summary says after `incompleteText`: where such answers are, and how to find them. */
export function incompleteKeptText(r: Pick<RunSummary, 'cutOff' | 'refused' | 'empty'>): string {
  // an empty answer's finish_reason is "stop": export marks nothing of it but its empty output
  if (!r.cutOff && !r.refused) return '(kept as done; llmq export shows their output as "")';
  return `(kept as done; llmq export marks each: finish_reason${r.empty ? ', and output "" of the empty' : ''})`;
}

/**
 * After a run whose answers were cut off: the commands that ask them again with more room (`run`, the
 * `llmq run` that sends them, its lane's), each with `again`; of the offline mock, why not.
 */
export function cutOffLines(
  r: Pick<RunSummary, 'cutOff' | 'cutOffRoom'>,
  paint: Paint,
  run: string,
  again: string,
  offline: boolean,
): string[] {
  // the mock's stand-ins (a summary of the document) are longer than a label: a real model's may fit
  if (r.cutOff && offline)
    return [paint.dim("  the offline mock's stand-in answers are longer than a short max_tokens allows; a real model's may fit it")];
  if (!r.cutOff || !r.cutOffRoom) return [];
  return suggestLines(
    (c) => `  to ask the cut-off ones again with more room: ${c}`,
    '  to ask the cut-off ones again with more room:',
    [`llmq retry-failed --cut-off --max-tokens ${r.cutOffRoom}`, run],
    again,
    paint,
  );
}

/** "3 answers cut off at max_tokens · 1 declined (a refusal or the content filter) · 2 empty", or '' when every answer was whole. */
export function incompleteText(r: Pick<RunSummary, 'cutOff' | 'refused' | 'empty'>): string {
  const parts = [
    r.cutOff ? `${count(r.cutOff, 'answer')} cut off at max_tokens` : '',
    r.refused ? `${int(r.refused)} declined (a refusal or the content filter)` : '',
    // billed for nothing: most often a gateway that dropped the content
    r.empty ? (r.cutOff || r.refused ? `${int(r.empty)} empty` : `${count(r.empty, 'answer')} empty (no text)`) : '',
  ];
  return parts.filter(Boolean).join(' · ');
}

/**
 * The commands to type next, each with `again` (the queue's --db), in `line` joined by `&&` when
 * that fits 80 columns; else `split`, then each command on lines of its own, whole, so it can be
 * pasted (a long path is never shortened in a command): one that is still too long goes on at its
 * flags, after a backslash.
 */
function suggestLines(
  line: (commands: string) => string,
  split: string,
  commands: readonly string[],
  again: string,
  paint: Paint,
): string[] {
  const full = commands.map((c) => c + again);
  if (line(full.join(' && ')).length <= 80) return [line(full.map((c) => paint.bold(c)).join(' && '))];
  return [split, ...full.flatMap((c) => continued(c, 80 - 4).map((l) => `    ${paint.bold(l)}`))];
}

/**
 * A command as lines of at most `width` columns where it can be: it goes on at a flag (with its
 * value), indented, after a backslash. One with a quoted value stays whole: a backslash inside
 * quotes would be part of the value.
 */
function continued(command: string, width: number): string[] {
  if (command.length <= width || /['"]/.test(command)) return [command];
  const [head = '', ...flags] = command.split(/(?= --)/);
  const lines = [head];
  for (const f of flags) {
    const last = lines.length - 1;
    if ((lines[last] + f).length + 2 <= width) lines[last] += f;
    else lines.push(`  ${f.trimStart()}`);
  }
  return lines.map((l, i) => (i < lines.length - 1 ? `${l} \\` : l));
}

/**
 * One lane's pace against its limit, for lanes that have one:
 * "gpt-4o-mini 9.8 req/s of 10 (600 rpm, 200k tpm from headers)", "gpt-4o 3.0 req/s of 3.2 by tokens (7,200 rpm,
 * 100k tpm from headers)" when the token limit binds first, or "... paused 1.2s".
 */
export function laneText(l: LaneSnapshot, now: number): string | null {
  const down = boardDownText(l.boardDownSince ?? null, now);
  if (down) return oneLine(`${l.model} ${down}`, 78);
  if (l.rpm === null && l.tpm === null && l.pausedUntil === null) return null;
  const limits = limitsText(l);
  // paced under what the headers say (the user's --rpm or --tpm, or slowed by 429s on a shared key):
  // what they say is said apart, not lent to the lower figures
  const said = l.learned?.source === 'headers' ? l.learned : null;
  const under = (paced: number | null, given: number | null) => paced !== null && given !== null && paced < given * 0.99;
  const from = !l.learned
    ? ''
    : l.learned.source !== 'headers'
      ? ' learned from 429s'
      : under(l.rpm, said!.rpm) || under(l.tpm, said!.tpm)
        ? `; the headers say ${limitsText(said!)}`
        : ' from headers';
  // the ceiling the limits make together: with requests weighing many tokens, the token limit binds first
  const of = l.ceiling
    ? ` of ${rate(l.ceiling.perSecond)}${l.ceiling.by === 'tokens' ? ' by tokens' : ''}`
    : l.rpm !== null
      ? ` of ${rate(l.rpm / 60)}`
      : '';
  // under a second is the pace's own wait for a budget's next share (at a tight limit, every few
  // requests): "paused 0s" said nothing but looked like a stall
  const left = l.pausedUntil === null ? 0 : l.pausedUntil - now;
  const paused = left >= 1000 ? ` · paused ${duration(left / 1000)}` : '';
  return oneLine(`${l.model} ${rate(l.requestsPerSecond)} req/s${of}${limits ? ` (${limits}${from})` : ''}${paused}`, 78);
}

/** "600 rpm, 1.0M tpm": the limits of a lane that are known. */
function limitsText(l: { readonly rpm: number | null; readonly tpm: number | null }): string {
  return [l.rpm !== null ? `${compact(Math.round(l.rpm))} rpm` : '', l.tpm !== null ? `${compact(Math.round(l.tpm))} tpm` : '']
    .filter(Boolean)
    .join(', ');
}

/** The stray 429s among a run's (`RunSummary.strayRateLimited`). */
function limitedText(all: number): string {
  return all === 1 ? 'the 429 used no attempt: its job is tried again' : `the ${int(all)} 429s used no attempt: their jobs are tried again`;
}

function strayText(stray: number, all: number): string {
  const which =
    stray === all
      ? all === 1
        ? 'the 429 was'
        : `the ${int(all)} 429s were`
      : `${int(stray)} of the ${int(all)} 429s ${stray === 1 ? 'was' : 'were'}`;
  // the others did not keep it: said, where "the pace kept" stood beside a pace cut to 120 of 300
  const others = all - stray;
  const rest = others === 0 ? '' : `; the other ${others === 1 ? '' : `${int(others)} `}paused or slowed the lane`;
  return `${which} stray (no rate-limit headers): tried again, the pace kept${rest}`;
}
