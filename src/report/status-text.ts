import {
  compact,
  duration,
  int,
  NO_PAINT,
  nextTryText,
  oneLine,
  outageText,
  percent,
  printable,
  quotedName,
  rate,
  usd,
  wrap,
  type Paint,
} from './format.js';
import { diedRun, type RunCost, type RunReport, type StatusReport } from './status.js';
import { refusedCount, retryHints } from './refused.js';
import { runMayBeBilled } from './status-cost.js';
import { committedUsd } from '../store/spend-types.js';
import { KEPT_REJECTIONS_PER_SOURCE } from '../store/types.js';
import { collectedByLiveRun, uncollectedLabel } from '../batches-uncollected.js';

/** Runs listed by their money in `status`; older ones are summed on one line. */
const RUNS_SHOWN = 5;

/**
 * What `status` says of the batch lane besides its own block: how many submissions are live, the
 * runs that hold some, and for those no run is collecting, the command that collects them.
 */
export interface BatchLaneNotes {
  readonly live: number;
  /** Runs holding live batches, each with the command that takes them over (its endpoint's flags, the queue's --db). */
  readonly holders: ReadonlyMap<string, string>;
  /** By endpoint (`baseUrl`, as batches record it). */
  readonly uncollected: ReadonlyArray<{ readonly jobs: number; readonly command: string; readonly baseUrl: string }>;
}

const NO_BATCHES: BatchLaneNotes = { live: 0, holders: new Map(), uncollected: [] };

/** Rejected documents `status` names, of all inputs: the enqueue printed them all, `--json` has the first 20 of each input. */
const REJECTIONS_SHOWN = 5;

/**
 * A rejected document that was an item enqueued before (a line edited into broken JSON): that item
 * keeps its earlier document and answer, which export still gives, though the input no longer holds it.
 */
function keptItemNote(x: { readonly keptItem?: string }): string {
  return x.keptItem === undefined ? '' : `; the item ${quotedName(x.keptItem)} keeps its earlier document (and answer, if any)`;
}

/**
 * What the last enqueue of each input rejected: a document rejected among thousands of lines the
 * enqueue printed is found here later, by file and line, with how to get it in.
 */
function rejectedLines(rejected: StatusReport['rejected'], p: Paint): string[] {
  if (rejected.length === 0) return [];
  const total = rejected.reduce((n, r) => n + r.rejected, 0);
  const name = (source: string) => (source === '-' ? 'stdin' : printable(source));
  const inputs = rejected.length === 1 ? name(rejected[0]!.source) : `${int(rejected.length)} inputs`;
  const lines = [
    '',
    // of several inputs, the one enqueued last first; one input's in its own order
    p.bold('rejected') +
      p.dim(
        ` at enqueue (${int(total)} ${total === 1 ? 'document' : 'documents'} of ${inputs}${rejected.length > 1 ? ', the input enqueued last first' : ''})`,
      ),
  ];
  const shown = rejected.flatMap((r) => r.first).slice(0, REJECTIONS_SHOWN);
  const where = shown.map((x) => printable(x.line === undefined ? x.path : `${x.path}:${x.line}`));
  // the places aligned, as short ones are (file:line); a long path takes a line of its own
  const ww = Math.min(28, Math.max(...where.map((x) => x.length)));
  for (const [i, x] of shown.entries()) {
    const place = where[i]!;
    const [first, ...rest] = wrap(printable(x.reason + keptItemNote(x)), 74 - ww);
    if (place.length > ww) lines.push(`  ${p.yellow(place)}`, `  ${''.padEnd(ww)}  ${first ?? ''}`);
    else lines.push(`  ${p.yellow(place.padEnd(ww))}  ${first ?? ''}`);
    lines.push(...rest.map((line) => `  ${''.padEnd(ww)}  ${line}`));
  }
  if (total > shown.length)
    lines.push(
      p.dim(`  and ${int(total - shown.length)} more (llmq status --json lists the first ${KEPT_REJECTIONS_PER_SOURCE} of each input)`),
    );
  lines.push(p.dim(`  fix ${total === 1 ? 'it' : 'them'}, then enqueue the same input again: what is fixed goes in`));
  return lines;
}

/** The human `llmq status` block: compact, aligned, fits 80 columns. */
/** `again`: what each suggested command needs to reach this queue (` --db q.db`, `dbArgument`); `next`: what a suggested `llmq run` needs besides to send where the last run sent (`runArgumentsOfRun`), and a suggested `llmq estimate` to estimate that run (`estimateArgumentsOfRun`). */
export function renderStatus(
  r: StatusReport,
  p: Paint = NO_PAINT,
  again = '',
  next: { readonly run: string; readonly estimate: string } = { run: '', estimate: '' },
  batches: BatchLaneNotes = NO_BATCHES,
): string {
  const lines: string[] = [];
  lines.push(`${p.bold('llmq')} ${p.dim(r.db)}`);
  if (r.total === 0 && r.orphanedAnswers === 0) {
    const add = `  The queue is empty. Add documents with: llmq enqueue <folder|file.jsonl>${again}`;
    if (add.length <= 80) lines.push(add);
    else lines.push('  The queue is empty. Add documents with:', `    llmq enqueue <folder|file.jsonl>${again}`);
    // jobs forgotten after billed tries: what they cost stays the queue's
    if (r.cost.usd !== 0) lines.push(...costLines(r, p));
    // every document rejected: what the enqueue said, here again
    lines.push(...rejectedLines(r.rejected, p));
    return lines.join('\n') + '\n';
  }
  const w = Math.max(...[r.total, r.items, r.orphanedAnswers, ...Object.values(r.counts)].map((n) => int(n).length));
  const row = (label: string, n: number, note: string, color: (s: string) => string = (s) => s) =>
    lines.push(`  ${label.padEnd(9)}${color(int(n).padStart(w))}${note ? '  ' + note : ''}`);

  const saved = r.sharedItems > 0 ? ` · ${int(r.sharedItems)} ${r.sharedItems === 1 ? 'call' : 'calls'} saved by shared jobs` : '';
  row('jobs', r.total, p.dim(`for ${int(r.items)} item${r.items === 1 ? '' : 's'}${saved}`));
  row('done', r.counts.done, percent(r.counts.done, r.total), p.green);
  if (r.counts.running)
    row('running', r.counts.running, r.backingOff > 0 ? p.dim(`${int(r.backingOff)} waiting to retry in their run`) : '', p.cyan);
  const pendingNotes: string[] = [];
  // "waiting" only while a run is there to retry them; else the next run does
  if (r.retrying)
    pendingNotes.push(`${int(r.retrying)} ${r.activeRuns.some((x) => x.live) ? 'waiting to retry' : 'tried before, to retry'}`);
  if (r.oldestPending) pendingNotes.push(`oldest queued ${duration(r.oldestPending.ageSeconds)} ago`);
  row('pending', r.counts.pending, p.dim(pendingNotes.join(' · ')));
  row('failed', r.counts.failed, '', r.counts.failed ? p.red : (s) => s);
  if (r.orphanedAnswers) {
    const n = r.orphanedAnswers;
    // "kept  287  answers no item needs now": their items changed; enqueueing the old text again reuses them
    row('kept', n, p.dim(`${n === 1 ? 'answer' : 'answers'} no item needs now`));
  }
  lines.push(`  ${'tokens'.padEnd(9)}${compact(r.tokens.prompt)} in · ${compact(r.tokens.completion)} out`);
  // within 80 columns: what follows the amount so far goes on under it
  lines.push(...costLines(r, p));
  // several models: how far each has got, beside what it cost ("gpt-4o  12/20 done  $0.0012")
  const models = r.cost.byModel.length > 1 ? r.cost.byModel : [];
  // a model whose jobs were all dropped (forget) keeps its cost: said so, not "0/0 done"
  const progress = (m: (typeof models)[number]) => (m.jobs === 0 ? `${int(m.dropped)} dropped` : `${int(m.done)}/${int(m.jobs)} done`);
  const nameWidth = Math.max(0, ...models.map((m) => oneLine(m.model, 24).length));
  const doneWidth = Math.max(0, ...models.map((m) => progress(m).length));
  for (const m of models) {
    const price = onlyMock(r) ? '' : m.price ? p.dim(`$${m.price[0]}/$${m.price[1]} per M`) : p.yellow('no price');
    lines.push(
      `  ${''.padEnd(9)}${oneLine(m.model, 24).padEnd(nameWidth)}  ${progress(m).padStart(doneWidth)}  ${usd(m.usd).padStart(9)}${price ? '  ' + price : ''}`,
    );
  }
  const maybe = r.cost.mayBeBilled;
  if (maybe.tries > 0) {
    const text = mayBeBilledText(maybe.tries, maybe.usd, maybe.unpricedTries);
    // a price given to the mock to try a budget offline: what a provider would have billed, not a bill
    const why = allRunsMock(r)
      ? ' (no usable answer came; on the offline mock, at the price given: not billed)'
      : ' (no usable answer came)';
    lines.push(`  ${''.padEnd(9)}${p.yellow(text)}${p.dim(why)}`);
  }
  const sources = [...new Set(r.cost.byModel.map((m) => m.priceSource).filter((x): x is string => x !== null))];
  // the offline mock's $0 is no price's doing: naming a price list beside it reads as if it were
  if (sources.length && !onlyMock(r)) lines.push(`  ${'prices'.padEnd(9)}${p.dim(oneLine(sources.join(', '), 69))}`);
  lines.push(...runLines(r.cost.byRun, p));

  // "limits   gpt-4o-mini: 500 rpm, 200,000 tpm, from headers 3m ago"
  const hosts = new Set(r.limits.map((l) => l.baseUrl));
  for (const [i, l] of r.limits.entries()) {
    const what = [l.rpm !== null ? `${int(Math.round(l.rpm))} rpm` : '', l.tpm !== null ? `${int(Math.round(l.tpm))} tpm` : '']
      .filter(Boolean)
      .join(', ');
    const from = l.source === 'headers' ? 'from headers' : 'learned from 429s';
    const where = hosts.size > 1 ? ` at ${l.baseUrl}` : '';
    const text = `${l.model}${where}: ${what || 'unknown'}, ${from} ${duration(l.ageSeconds)} ago${l.expired ? ', expired' : ''}`;
    // wrapped under itself, not cut: a log or a CI page has no wider terminal to show the rest
    lines.push(...wrap(text, 69).map((line, j) => `  ${(i === 0 && j === 0 ? 'limits' : '').padEnd(9)}${line}`));
  }

  for (const [i, a] of r.alerts.entries()) {
    lines.push(`  ${(i === 0 ? 'alerts' : '').padEnd(9)}${p.red(oneLine(`${a.message} (run on ${a.host})`, 69))}`);
  }
  if (r.failures.length) {
    lines.push('', p.bold(`failures`) + p.dim(` (${int(r.counts.failed)} ${r.counts.failed === 1 ? 'job' : 'jobs'}, by reason)`));
    const cw = Math.max(...r.failures.map((f) => int(f.count).length));
    // a reason wrapped under itself, not cut: its end is often what to do (`--timeout; if the ...`)
    for (const f of r.failures) {
      const [first, ...rest] = wrap(f.error, 74 - cw);
      lines.push(`  ${p.red(int(f.count).padStart(cw))}  ${first ?? ''}`, ...rest.map((line) => `  ${''.padStart(cw)}  ${line}`));
    }
    const shown = r.failures.reduce((a, f) => a + f.count, 0);
    if (shown < r.counts.failed) lines.push(p.dim(`  ${int(r.counts.failed - shown).padStart(cw)}  other reasons`));
    const refused = refusedCount(r.failures);
    if (refused > 0) {
      lines.push(
        p.dim(
          `  ${refused === r.counts.failed ? 'the provider refused them' : `it refused ${int(refused)}`} as sent (HTTP 4xx): sent again, they fail`,
        ),
      );
      lines.push(p.dim('  the same way; fix the documents or options, then enqueue again'));
    }
    // the cut-off ones with room, then the others as they were (`retryHints`)
    const hints = retryHints(r.failures, r.counts.failed).map((h): [what: string, command: string] => [
      h.kind === 'room'
        ? `to send ${h.all ? 'them' : `the ${int(h.count)} cut off`} again with more room`
        : h.all
          ? 'to try them again'
          : 'to try the others again',
      h.command,
    ]);
    const then = `llmq run${next.run}${again}`;
    const one = hints.length === 1 ? `  ${hints[0]![0]}: ${hints[0]![1]}${again}, then ${then}` : '';
    if (one && one.length <= 80) lines.push(p.dim(one));
    else if (hints.length) lines.push(...hints.map(([what, command]) => p.dim(`  ${what}: ${command}${again}`)), p.dim(`  then: ${then}`));
  }

  lines.push(...rejectedLines(r.rejected, p));

  const live = r.activeRuns.filter((x) => x.live);
  const stale = r.activeRuns.filter((x) => !x.live);
  if (live.length || stale.length || r.lastRun) lines.push('');
  // the runs sending now besides one that is gone: they take its jobs back as they go
  const workingBesides = (run: RunReport) => live.filter((x) => x.id !== run.id && !x.pidGoneHere && !x.stoppedHere).length;
  for (const run of live) {
    // its last rate is not what it sends now: gone, it most likely sends nothing; stopped, nothing at all
    const eta = live.length === 1 && run.sending ? ` · ETA ${duration(r.etaSeconds)}` : '';
    const pace = run.sending ? ` · ${rate(run.recentJobsPerSecond)} jobs/s` : '';
    lines.push(`${p.cyan('running')}   ${runName(run)} for ${duration(run.wallSeconds)}${pace}${eta}`);
    // A run that stopped beating a while ago (killed on another machine, whose process cannot be
    // checked from here) still counts as running until STALE_RUN_MS; its rate and ETA are its last
    if (run.pidGoneHere) {
      // not "stopped?": that reads as Ctrl-Z, which stoppedText says apart
      lines.push(
        p.yellow(
          `${''.padEnd(10)}pid ${run.pid} is not running here: it ended or was killed; ${nextTakes(run.id, batches, workingBesides(run))}`,
        ),
      );
    } else if (run.stoppedHere) {
      lines.push(p.yellow(`${''.padEnd(10)}${stoppedText(run.pid)}`));
    } else if (!run.sending) {
      lines.push(
        p.yellow(
          `${''.padEnd(10)}no heartbeat for ${duration((r.now - run.heartbeatAt) / 1000)}: stopped? its jobs return as leases run out`,
        ),
      );
    }
    // its Redis (--redis) not answering: sending waits for it
    const downSince = Math.min(...run.lanes.map((l) => l.boardDownSince ?? Infinity));
    if (downSince !== Infinity) {
      lines.push(p.yellow(`${''.padEnd(10)}sending waits: Redis (--redis) not answering for ${duration((r.now - downSince) / 1000)}`));
    }
    // "0 jobs/s · ETA --" alone reads as a stuck run
    const pause = run.paused;
    if (pause && pause.until > r.now) {
      const next = duration((pause.until - r.now) / 1000);
      const why =
        pause.reason === 'rate_limit'
          ? `rate limited, resuming in ${next}`
          : pause.downSince !== undefined && pause.givesUpAt !== undefined
            ? `the provider ${outageText(pause.downSince, pause.givesUpAt, r.now)}, ${nextTryText(pause.until, pause.givesUpAt, r.now)}`
            : `the provider failing, probing, resuming in ${next}`;
      lines.push(p.yellow(`${''.padEnd(10)}paused: ${why}`));
    }
  }
  if (live.length > 1) lines.push(`${''.padEnd(10)}together ${rate(r.jobsPerSecond ?? 0)} jobs/s · ETA ${duration(r.etaSeconds)}`);
  for (const run of stale) {
    lines.push(`${p.yellow('silent')}    ${runName(run)}: no heartbeat for ${duration((r.now - run.heartbeatAt) / 1000)}`);
    if (run.gone) lines.push(p.dim(`${''.padEnd(10)}its process is gone; ${nextTakes(run.id, batches, workingBesides(run))} at once`));
    else if (run.stoppedHere) lines.push(p.yellow(`${''.padEnd(10)}${stoppedText(run.pid)}`));
    // silent past the takeover (STALE_RUN_MS is longer): its batches are the next batch run's now
    else if (batches.holders.has(run.id))
      lines.push(p.dim(`${''.padEnd(10)}it probably died; ${nextTakes(run.id, batches, workingBesides(run))}`));
    // silent past STALE_RUN_MS, its leases (a minute past its last beat) ran out: it said they would, for ever
    else
      lines.push(
        p.dim(
          `${''.padEnd(10)}it probably died, and its leases ran out: ${nextTakes(run.id, batches, workingBesides(run))}, if any are left`,
        ),
      );
  }
  const last = r.lastRun;
  if (last && last.endedAt !== null) {
    const ago = duration((r.now - last.endedAt) / 1000);
    // a run that died is known to have worked until its last heartbeat; its end is when its jobs were taken back
    const when = diedRun(last) ? `last heard ${duration((r.now - last.heartbeatAt) / 1000)} ago` : `ended ${ago} ago`;
    lines.push(`${'last run'}  ${runName(last)} ${when} (${endedHow(last)}) after ${duration(last.wallSeconds)}`);
    lines.push(
      `${''.padEnd(10)}${diedRun(last) ? 'at least ' : ''}${int(last.done)} done, ${int(last.failed)} failed · ${rate(last.averageJobsPerSecond)} jobs/s · ${rate(last.averageTokensPerSecond)} tokens/s` +
        rateLimitedText(last),
    );
    // a run that died wrote its figures last at its last heartbeat, seconds before
    if (diedRun(last)) lines.push(p.dim(`${''.padEnd(10)}(as of its last heartbeat: what it finished after is not counted here)`));
    // its figures alone would read as the queue's: a run beside it did the rest
    const beside = r.lastRunBeside;
    if (beside) {
      const n = beside.runs.length;
      const ids = beside.runs.slice(0, 3).map((x) => x.id.slice(0, 8) + (diedRun(x) ? ' died' : ''));
      const named = n > 3 ? `${ids.join(', ')} and ${n - 3} more` : ids.join(', ');
      lines.push(`${''.padEnd(10)}beside it ${n === 1 ? '1 other run' : `${n} other runs`} (${named}); together:`);
      lines.push(
        `${''.padEnd(10)}${beside.atLeast ? 'at least ' : ''}${int(beside.done)} done, ${int(beside.failed)} failed · ${rate(beside.averageJobsPerSecond)} jobs/s · ${rate(beside.averageTokensPerSecond)} tokens/s`,
      );
    }
    // "(fatal)" alone leaves the user to find the run's output, if they still have it
    if (last.error)
      for (const [i, l] of wrap(last.error, 64).entries()) lines.push(`${''.padEnd(10)}${p.red(`${i === 0 ? 'error ' : '      '}${l}`)}`);
    // done counts them as any answer: say once what they are
    if (last.provider === 'mock' && last.done > 0) {
      lines.push(p.dim(`${''.padEnd(10)}on the offline mock: its answers are stand-ins, sent again by a run with a real provider`));
    }
  }
  // work waiting and nothing working it: say what sends it (and what it would cost first). With no
  // run live and no batch out, the running jobs are a dead run's: the next run takes them back too;
  // not a stopped one's (Ctrl-Z), which keeps them, said above
  const leftRunning = live.length === 0 && batches.live === 0 && !stale.some((x) => x.stoppedHere) ? r.counts.running : 0;
  if ((r.counts.pending > 0 || leftRunning > 0) && live.length === 0) {
    lines.push('');
    const what = [
      r.counts.pending > 0 ? `the ${int(r.counts.pending)} pending` : '',
      leftRunning > 0 ? `the ${int(leftRunning)} a stopped run left running` : '',
    ].filter(Boolean);
    // the same --budget-total again would stop at once: the proposal leaves its amount to the user
    const spentTotal = last?.budgetReached === 'total' ? last.spendFlags.budgetTotal : null;
    if (spentTotal !== null) {
      // what the budget counts (answers, reservations, tries that may be billed): the new amount is chosen against it
      const committed = r.cost.byRun.reduce((sum, run) => sum + committedUsd(run), 0);
      lines.push(p.dim(`  the last run stopped at the queue's --budget-total of ${usd(spentTotal)}; raise it to go on`));
      lines.push(p.dim(`  (its runs have committed ${usd(committed)} of it: answers, and tries that may be billed)`));
    }
    // the same --budget again would stop at once, or after a request or two, when one request's worst case is more than it holds
    const ownTooSmall = last?.budgetReached === 'run' && last.budgetTooSmall ? last.spendFlags.budget : null;
    if (ownTooSmall !== null)
      lines.push(
        p.dim(
          `  the last run's --budget of ${usd(ownTooSmall)} is too small for its requests (one may cost more than was left); raise it to go on`,
        ),
      );
    // its address again would fail the same way: the proposal leaves the address to the user, as run's end did
    if (last?.wrongEndpoint === 'nobody-listened')
      lines.push(p.dim("  nothing listened at the last run's address: start its server, or give another"));
    else if (last?.wrongEndpoint === 'no-completions')
      lines.push(p.dim("  the last run's address takes no chat completions: give the right one"));
    for (const l of hint(`to send ${what.join(' and ')}:`, `llmq run${next.run}${again}`)) lines.push(p.dim(l));
    // estimate prices pending jobs: with none, it would say 0 to send
    if (r.counts.pending > 0)
      for (const l of hint('what that would cost and take:', `llmq estimate${next.estimate}${again}`)) lines.push(p.dim(l));
  }
  // batches out with no run to collect them: a plain `llmq run` leaves them be (sending their jobs
  // again would pay twice), so the command that collects them is said, also while plain runs work;
  // a live batch run to their endpoint takes them over on its next pass (`collectedByLiveRun`)
  const uncollected = batches.uncollected.filter((u) => !collectedByLiveRun(u.baseUrl, live));
  if (uncollected.length > 0) {
    lines.push('');
    for (const u of uncollected) for (const l of hint(uncollectedLabel(u.jobs), u.command)) lines.push(p.dim(l));
  }
  return lines.join('\n') + '\n';
}

/** A run whose process here is stopped (Ctrl-Z): what it does with its jobs, and what gets them done. */
function stoppedText(pid: number): string {
  return `pid ${pid} is stopped (Ctrl-Z): it keeps its jobs until continued (fg, or kill -CONT ${pid})`;
}

/**
 * What takes a stopped run's jobs back: a batch run for one that holds batches, else the runs working
 * the queue now (each takes a dead run's jobs back as it goes), else the next run.
 */
function nextTakes(runId: string, batches: BatchLaneNotes, working: number): string {
  const collect = batches.holders.get(runId);
  if (collect) return `the next ${collect} takes its batches over`;
  if (working === 0) return 'the next llmq run takes its jobs back';
  return `${working === 1 ? 'the run working on this queue takes' : `the ${int(working)} runs working on this queue take`} its jobs back`;
}

/** "fatal", "budget: --budget-total": the exit reason, and which budget when a budget ended it. */
function endedHow(run: RunReport): string {
  const reason = run.exitReason ?? 'unknown';
  if (reason !== 'budget' || run.budgetReached === null) return reason;
  return `${reason}: ${run.budgetReached === 'total' ? '--budget-total' : '--budget'}`;
}

/**
 * A suggested command after its label, on one line of 80 columns if it fits, else whole on the line
 * under it: never broken, as a command pasted from two lines runs its first half (`--db` without
 * its URL). A terminal folds a long line where it must, and a copy of it is still one line.
 */
function hint(label: string, command: string): string[] {
  const one = `  ${label} ${command}`;
  return one.length <= 80 ? [one] : [`  ${label}`, `    ${command}`];
}

/** The `cost` lines: its parts packed into lines of 69 columns, the first headed `cost`. */
function costLines(r: StatusReport, p: Paint): string[] {
  return packed(costParts(r, p), ' · ', 69).map((line, i) => `  ${(i === 0 ? 'cost' : '').padEnd(9)}${line}`);
}

function costParts(r: StatusReport, p: Paint): string[] {
  const c = r.cost;
  const parts: string[] = [];
  if (c.usd !== null) parts.push(`${usd(c.usd)} so far`);
  else
    parts.push(
      `${p.yellow('unknown')} (no price for ${c.unpriced.join(', ')}; set --price IN,OUT)` +
        (c.knownUsd > 0 ? `, ${usd(c.knownUsd)} priced` : ''),
    );
  // the average of the jobs done, not of the prompts left (estimate counts those): said as such
  if (c.remainingUsd !== null && c.remainingUsd > 0) parts.push(`about ${usd(c.remainingUsd)} more if the rest are like those done`);
  if (r.cost.byModel.length === 1) parts.push(p.dim(r.cost.byModel[0]!.model));
  if (onlyMock(r)) parts.push(p.dim('the offline mock bills nothing'));
  // a price given to the mock to try a budget offline: what it would have cost, read as money spent
  else if (allRunsMock(r) && (r.cost.usd ?? 0) > 0) parts.push(p.dim('on the offline mock at the price given: nothing was billed'));
  return parts;
}

/** Every run that sent ran on the offline mock, and nothing was spent. */
function onlyMock(r: StatusReport): boolean {
  return allRunsMock(r) && r.cost.usd === 0;
}

/** Every run that sent ran on the offline mock. */
function allRunsMock(r: StatusReport): boolean {
  return r.cost.byRun.length > 0 && r.cost.byRun.every((run) => run.mock);
}

/**
 * "may be billed: 3 tries, up to $0.0021" ("up to unknown" without a price). `unpriced` of the tries
 * had no worst case counted (out when a run without a budget died): "cost not known" when that is
 * all of them, else the bound says how many it covers. Those are "about": a dead run's last heartbeat
 * counted them, up to a beat before it died, and what it sent after is not in the count.
 */
export function mayBeBilledText(tries: number, upTo: number | null, unpriced = 0): string {
  const head = `may be billed: ${unpriced > 0 ? 'about ' : ''}${int(tries)} ${tries === 1 ? 'try' : 'tries'}`;
  if (unpriced <= 0) return `${head}, up to ${usd(upTo)}`;
  if (unpriced >= tries) return `${head}, cost not known`;
  return `${head}, up to ${usd(upTo)} for ${int(tries - unpriced)} of them`;
}

/** `parts` joined by `sep` into lines of at most `width` characters where they fit, each part whole. */
function packed(parts: readonly string[], sep: string, width: number): string[] {
  const lines: string[] = [];
  for (const part of parts) {
    const last = lines.length - 1;
    if (last >= 0 && lines[last]!.length + sep.length + part.length <= width) lines[last] += sep + part;
    else lines.push(part);
  }
  return lines;
}

/**
 * "runs     1a2b3c4d  $4.98 · budget $5.00 · 2 in flight, up to $0.12", newest first; what does not
 * fit in 80 columns goes on the next line, never cut (it is money).
 */
function runLines(runs: readonly RunCost[], p: Paint): string[] {
  const lines = runs.slice(0, RUNS_SHOWN).flatMap((run, i) => {
    // nothing priced is not $0: its answers cost what their model costs
    const parts = [run.spentUsd === 0 && run.unpricedTries > 0 ? 'cost unknown' : usd(run.spentUsd)];
    // said here too once the queue is done and the run is no longer among those working it
    if (run.died) parts.push(p.yellow('died'));
    if (run.budgetUsd !== null) parts.push(`budget ${usd(run.budgetUsd)}`);
    if (run.budgetTotalUsd !== null) parts.push(`queue budget ${usd(run.budgetTotalUsd)}`);
    if (run.live && run.inFlight > 0) parts.push(`${int(run.inFlight)} in flight, up to ${usd(run.reservedUsd)}`);
    const maybe = runMayBeBilled(run);
    if (maybe.tries > 0) parts.push(mayBeBilledText(maybe.tries, maybe.usd, maybe.unpricedTries));
    if (run.unpricedTries > 0) parts.push(`${int(run.unpricedTries)} answers without a price`);
    const [first, ...more] = packed(parts, ' · ', 59);
    return [`  ${(i === 0 ? 'runs' : '').padEnd(9)}${run.runId.slice(0, 8)}  ${first}`, ...more.map((l) => `${' '.repeat(21)}${l}`)];
  });
  const older = runs.slice(RUNS_SHOWN);
  if (older.length) {
    const spent = older.reduce((a, run) => a + run.spentUsd, 0);
    lines.push(p.dim(`  ${''.padEnd(9)}${int(older.length)} earlier ${older.length === 1 ? 'run' : 'runs'}  ${usd(spent)}`));
  }
  return lines;
}

function runName(run: RunReport): string {
  return `${run.id.slice(0, 8)} (${run.host} pid ${run.pid})`;
}

/** The 429s a run met, and of them the strays (the pace kept): what the limits line's "learned from 429s" came from. */
function rateLimitedText(run: RunReport): string {
  if (run.rateLimited === 0) return '';
  const stray = run.strayRateLimited ? ` (${int(run.strayRateLimited)} stray)` : '';
  return ` · ${int(run.rateLimited)} rate-limited${stray}`;
}
