import { compact, count, duration, int, listed, NO_PAINT, oneLine, printable, usd, wrap, type Paint } from './format.js';
import { budgetVerdict, type Budget, type CostRange, type Estimate, type ModelEstimate } from './estimate.js';
import { NO_MAX_TOKENS_FIX } from '../pricing/cost.js';

/**
 * The human `llmq estimate` (and `llmq run --dry-run`, `dryRun`, which says so: a dry run that
 * looked like any other output left people unsure whether anything went out): per model, then the
 * total, within 80 columns.
 */
export function renderEstimate(
  e: Estimate,
  o: {
    db: string;
    paint?: Paint;
    budget?: Budget;
    dryRun?: boolean;
    /** `run --via batch --dry-run`: priced at the batch price first, timed by the Batch API's window rather than a rate limit. */
    inBatches?: boolean;
    /** `run --via auto --deadline D --dry-run`: D in ms; the cost depends on where the jobs end up, which the deadline decides. */
    autoDeadlineMs?: number;
    /** `--provider mock`: no limit, and the latency is --mock-latency's, not learned. */
    mock?: boolean;
    /** The run's --concurrency: what paces the offline mock. @default 8 */
    concurrency?: number;
  },
): string {
  const p = o.paint ?? NO_PAINT;
  const jobs = `${int(e.jobs)} ${e.jobs === 1 ? 'job' : 'jobs'}`;
  const lines = [
    o.dryRun
      ? `${p.bold('dry run')} ${p.dim(o.db)}: ${jobs} a run would send; nothing was sent`
      : `${p.bold('estimate')} ${p.dim(o.db)}: ${jobs} to send`,
  ];
  if (e.exhausted) lines.push(p.dim(`  ${int(e.exhausted)} more used all their attempts: a run fails them unsent`));
  // "0 jobs to send" of a queue whose jobs are all in a batch read as a queue with nothing left
  if (e.held)
    lines.push(
      p.dim(
        `  ${int(e.held)} more ${e.held === 1 ? 'is' : 'are'} held by a live run, a run stopped here, or a batch at the provider: a run leaves them be`,
      ),
    );
  // status counts them done: without this the two disagree with no word why
  if (e.mockAnswered) {
    const them =
      e.mockAnswered === e.jobs
        ? e.jobs === 1
          ? 'it was'
          : 'all of them were'
        : `${int(e.mockAnswered)} of them ${e.mockAnswered === 1 ? 'was' : 'were'}`;
    lines.push(p.dim(`  ${them} answered by the offline mock: done in llmq status, sent again by a run with a real provider`));
  }
  // "0 jobs to send" of a queue of failed jobs read as nothing left to do
  if (e.failed)
    lines.push(
      p.dim(
        `  ${int(e.failed)} more ${e.failed === 1 ? 'has' : 'have'} failed: a run sends none of them (llmq retry-failed puts them back)`,
      ),
    );
  if (e.tooLong) lines.push(...wrap(tooLongText(e), 76).map((line) => `  ${p.yellow(line)}`));
  if (e.jobs === 0) return lines.join('\n') + '\n';
  // values wrap under themselves rather than lose their end: within 80 columns, whatever the terminal
  const row = (label: string, value: string, paint: (s: string) => string = (s) => s) =>
    lines.push(...wrap(value, 67).map((line, i) => `    ${(i === 0 ? label : '').padEnd(9)}${paint(line)}`));
  for (const m of e.models) {
    lines.push(
      `  ${p.bold(oneLine(m.model, 50))}  ${count(m.jobs, 'job')}${m.tooLong ? `, ${int(m.tooLong)} too long (left out below)` : ''}`,
    );
    row(
      'prompt',
      `${compact(m.promptTokens)} tokens${m.promptCorrection ? ` (counted; answers showed ${signedTokens(Math.abs(m.promptCorrection)).replace('+', '')} ${m.promptCorrection > 0 ? 'more' : 'fewer'} a request)` : ' (counted)'}`,
    );
    row('answers', answersText(m));
    if (m.cost) row('cost', o.inBatches ? batchCostText(m.cost, m.batchCost, m.uncapped) : costText(m.cost, m.batchCost, m.uncapped));
    else row('cost', 'unknown: no price for this model; give one with --price IN,OUT', p.yellow);
    if (m.price) row('price', `$${m.price.input}/$${m.price.output} per million tokens, ${m.price.source}`, p.dim);
    row('time', o.inBatches ? BATCH_WINDOW : o.mock && m.paceSeconds === null ? 'no limit: the offline mock' : paceText(m));
    if (m.latencyMs !== null && !o.inBatches)
      row('', o.mock ? `answers take ${int(m.latencyMs)} ms (--mock-latency)` : `answers took ${int(m.latencyMs)} ms`);
  }
  const total = e.cost
    ? (o.inBatches ? batchCostText : costText)(e.cost, e.batchCost, e.uncapped)
    : `${p.yellow('unknown')} (no price for ${e.unpriced.join(', ')})`;
  lines.push(...wrap(total, 71).map((line, i) => `  ${i === 0 ? p.bold('total') : '     '}  ${line}`));
  const first = e.mockAnswered ? 'a first run with a real provider' : 'a first run';
  // with no limit known for a model, its time is what the concurrency allows: a floor, said as one
  const unlimited = e.models.filter((m) => m.paceSeconds === null).map((m) => m.model);
  const time = o.inBatches
    ? BATCH_WINDOW
    : e.seconds === null
      ? `time unknown: no limit or latency known yet (--rpm, --tpm, or ${first})`
      : o.mock && unlimited.length === e.models.length
        ? `${aboutTime(e.seconds)} (the offline mock's answers, ${int(o.concurrency ?? 8)} at a time)`
        : unlimited.length > 0
          ? `${aboutTime(e.seconds)} if nothing limits the rate (no limit known for ${unlimited.join(', ')})`
          : aboutTime(e.seconds);
  for (const line of wrap(time, 71)) lines.push(`         ${line}`);
  if (o.autoDeadlineMs !== undefined) {
    // neither price alone is what --via auto costs: the batches' share is only known as they answer
    const batchesEnd = duration((o.autoDeadlineMs * 0.75) / 1000);
    const auto =
      `--via auto: batches for the first ${batchesEnd} (three quarters of --deadline ${duration(o.autoDeadlineMs / 1000)}), at the ` +
      'batch price; what is unanswered then goes online, at the online price, at the time above';
    for (const line of wrap(auto, 71)) lines.push(`         ${p.dim(line)}`);
  }
  if (o.budget) {
    const text = budgetText(e, o.budget);
    lines.push(...wrap(text.line, 71).map((line, i) => `  ${i === 0 ? p.bold('budget') : '      '} ${text.ok ? line : p.yellow(line)}`));
  }
  return lines.join('\n') + '\n';
}

/**
 * Jobs longer than their model takes: a document of millions of tokens priced as if sent made the
 * estimate's cost absurd without a word, and the run then met a refusal for each.
 */
function tooLongText(e: Estimate): string {
  const windows = e.models.filter((m) => m.tooLong > 0).map((m) => `${m.model}: ${int(m.contextWindow!)}`);
  const one = e.tooLong === 1;
  const them = one ? 'it' : 'them';
  const named = e.tooLongItems.map(({ id, tokens }) => {
    const shown = printable(id);
    return `${/\s/.test(shown) ? JSON.stringify(shown) : shown} (${int(tokens)})`;
  });
  const which = named.length ? `${e.tooLong > named.length ? ' The first: ' : ' '}${listed(named)}.` : '';
  // a prompt over the window alone is not helped by a lower max_tokens
  const lower = e.tooLongPrompts < e.tooLong ? ', lower max_tokens,' : '';
  return (
    `${count(e.tooLong, 'job')} ${one ? 'asks' : 'ask'} more tokens than ${e.models.length > 1 ? 'their model' : 'the model'} takes ` +
    `in one request (${windows.join(', ')}, the prompt and max_tokens together): the provider refuses ${them} unbilled, and ` +
    `the figures below leave ${them} out. Split or shorten ${one ? 'the document' : 'those documents'}${lower} or ` +
    `enqueue ${them} for a model of a larger context.${which}`
  );
}

function budgetText(e: Estimate, b: Budget): { line: string; ok: boolean } {
  const v = budgetVerdict(e, b);
  // what is left is shown with the digits that tell it from the amount it is compared with
  const shown = (x: number, against?: number) => (against === undefined ? usd(x) : apart(x, against)[0]);
  const given = (against?: number) =>
    b.committed > 0 ? `${b.flag} ${usd(b.usd)} (${shown(v.left, against)} left of it)` : `${b.flag} ${shown(b.usd, against)}`;
  if (v.verdict === 'uncapped')
    return {
      line: `${given()}: ${count(e.uncapped, 'job')} ${e.uncapped === 1 ? 'sets' : 'set'} no max_tokens, so nothing bounds their cost and a run under ${b.flag} refuses them. ${NO_MAX_TOKENS_FIX}`,
      ok: false,
    };
  if (v.verdict === 'covers') return { line: `${given()} covers the worst case: the run will not stop for it`, ok: true };
  if (v.verdict === 'unknown') return { line: `${given()}: no price for ${e.unpriced.join(', ')}, so nothing can be said`, ok: false };
  // 'may-stop' has a worst case: a job with none is 'uncapped'
  const worst = e.cost?.worst ?? null;
  if (v.verdict === 'may-stop' && worst !== null)
    return {
      line: `${given(worst)} is below the worst case (${apart(v.left, worst)[1]}): the run stops early (exit 3) if answers run long`,
      ok: false,
    };
  const c = e.cost!;
  // between the range's ends it may or may not be enough: "below the expected cost" read as a sure stop
  if (v.verdict === 'within') {
    return {
      line: `${given()} is within the expected cost (${apart(v.left, c.low)[1]} to ${apart(v.left, c.high)[1]}): the run may stop early (exit 3), the rest left pending`,
      ok: false,
    };
  }
  return {
    line: `${given(c.low)} is below the expected cost (${apart(v.left, c.low)[1]} at least): the run would stop early (exit 3), the rest left pending`,
    ok: false,
  };
}

/**
 * `usd` of two amounts compared, with digits enough to tell them apart and the same digits for
 * both: "$1.62 left ... below the expected cost ($1.62 at least)" read as a contradiction for 1.622,
 * and "$0.00108 left ... ($0.001080 at least)" as two ways of writing one amount.
 */
function apart(a: number, b: number): [string, string] {
  if (usd(a) !== usd(b) || a === b) return [usd(a), usd(b)];
  for (let digits = 3; digits <= 12; digits++) {
    if (a.toFixed(digits) !== b.toFixed(digits)) return [`$${a.toFixed(digits)}`, `$${b.toFixed(digits)}`];
  }
  return [usd(a), usd(b)];
}

function aboutTime(seconds: number): string {
  return seconds < 1 ? 'under a second' : `about ${duration(seconds)}`;
}

function answersText(m: ModelEstimate): string {
  const c = m.completion;
  // a job without max_tokens has no ceiling: "up to 0 tokens" read as answers that cost nothing
  if (c.basis === 'max_tokens' && m.uncapped > 0)
    return `unbounded: ${count(m.uncapped, 'job')} ${m.uncapped === 1 ? 'sets' : 'set'} no max_tokens (no real answer yet)`;
  if (c.basis === 'max_tokens') return `up to ${compact(c.ceiling)} tokens (max_tokens; no real answer yet)`;
  const range = compact(c.low) === compact(c.high) ? compact(c.low) : `${compact(c.low)} to ${compact(c.high)}`;
  return `${range} tokens (mean ${Math.round(c.mean!)}, p90 ${c.p90} of ${int(c.answered)} answered)`;
}

/** A batch's time is the provider's: no rate limit paces it. */
const BATCH_WINDOW = "in batches: each answered within the Batch API's 24-hour window, often much sooner";

/** In batches: the batch price first with its worst case, then the online price for comparison. */
function batchCostText(c: CostRange, batch: CostRange | null, uncapped: number): string {
  return batch
    ? [`batch ${range(batch)}`, worstText(batch, uncapped), `online ${range(c)}`].join(' · ')
    : ['no batch price', `online ${range(c)}`, worstText(c, uncapped)].join(' · ');
}

/** "$0.14 to $0.17 · batch $0.07 to $0.09 · worst $0.52" ("worst unbounded" when a job sets no max_tokens) */
function costText(c: CostRange, batch: CostRange | null, uncapped: number): string {
  return [range(c), batch ? `batch ${range(batch)}` : 'no batch price', worstText(c, uncapped)].join(' · ');
}

function range(r: CostRange): string {
  return usd(r.low) === usd(r.high) ? usd(r.low) : `${usd(r.low)} to ${usd(r.high)}`;
}

function worstText(c: CostRange, uncapped: number): string {
  return uncapped > 0 || c.worst === null ? `worst unbounded (${count(uncapped, 'job')} without max_tokens)` : `worst ${usd(c.worst)}`;
}

function paceText(m: ModelEstimate): string {
  const l = m.limits;
  const from = l.learned ? (l.learned.source === 'headers' ? 'learned from headers' : 'learned from 429s') : '';
  const shown = [
    l.rpm !== null ? { text: `${int(Math.round(l.rpm))} rpm`, learned: l.learnedLimits.rpm } : null,
    l.tpm !== null ? { text: `${int(Math.round(l.tpm))} tpm`, learned: l.learnedLimits.tpm } : null,
  ].filter((x) => x !== null);
  // one learned and one the user's flag: the source goes with its own figure ("300 rpm, 1,000,000 tpm learned from headers")
  const mixed = shown.some((x) => x.learned) && shown.some((x) => !x.learned);
  const limits = mixed
    ? shown.map((x) => (x.learned ? `${x.text} ${from}` : x.text)).join(', ')
    : `${shown.map((x) => x.text).join(', ')}${from ? `, ${from}` : ''}`;
  // as the total says it (`aboutTime`): 0.4 s was "0s" here and "under a second" there
  if (m.paceSeconds !== null) return `${m.paceSeconds < 1 ? 'under a second' : duration(m.paceSeconds)} at ${limits}`;
  // limits are kept per endpoint: say where they are rather than let "none" stand
  const elsewhere = l.learnedElsewhere[0];
  return elsewhere === undefined ? 'no limit known' : `no limit known here; learned at ${elsewhere}: add --base-url ${elsewhere}`;
}

/** A correction of tokens a request: `+5,312.7`, `-161.4`. */
export function signedTokens(n: number): string {
  return `${n > 0 ? '+' : ''}${n.toLocaleString('en-US', { minimumFractionDigits: 1, maximumFractionDigits: 1 })}`;
}
