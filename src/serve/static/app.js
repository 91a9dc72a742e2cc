// The llmq dashboard page. Plain browser JavaScript, no build step. Everything shown comes from the
// server as data and goes into the page as text (textContent), never as HTML.
'use strict';

const $ = (id) => document.getElementById(id);
const state = { report: null, history: [], chart: null, config: null };
const TOKEN_KEY = 'llmq-token';

function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (k === 'onclick') node.addEventListener('click', v);
    else if (k === 'class') node.className = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c instanceof Node ? c : String(c ?? ''));
  return node;
}

const int = new Intl.NumberFormat('en-US');
const fmt = (n) => (n === null || n === undefined ? '–' : int.format(Math.round(n)));
// As llmq status writes money (src/report/format.ts): under a dollar three significant digits, at
// least cents, so a tenth of a cent is not $0.0000.
function usd(n) {
  if (n === null || n === undefined) return 'unknown';
  const a = Math.round(Math.abs(n) * 1e9) / 1e9;
  if (a === 0) return '$0.00';
  const sign = n < 0 ? '-' : '';
  if (a >= 1000) return `${sign}$${int.format(Math.round(a))}`;
  if (a >= 1) return `${sign}$${a.toFixed(2)}`;
  const decimals = Math.min(12, Math.max(2, 2 - Math.floor(Math.log10(a))));
  return `${sign}$${a.toFixed(decimals).replace(/(\.\d\d\d*?)0+$/, '$1')}`;
}
function duration(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '–';
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
}
const ago = (ms) => duration((state.report.now - ms) / 1000);

function fillRows(tableId, rows) {
  const body = $(tableId).tBodies[0];
  body.replaceChildren(...rows);
}

function renderProgress(r) {
  for (const s of ['pending', 'running', 'done', 'failed']) $(`count-${s}`).textContent = fmt(r.counts[s]);
  $('count-total').textContent = `${fmt(r.total)} / ${fmt(r.items)}`;
  $('rate').textContent = r.jobsPerSecond === null ? 'idle' : `${r.jobsPerSecond.toFixed(1)} jobs/s`;
  $('eta').textContent = r.etaSeconds === null ? '–' : duration(r.etaSeconds);
  const pct = (n) => (r.total ? `${(100 * n) / r.total}%` : '0%');
  $('bar-done').style.width = pct(r.counts.done);
  $('bar-failed').style.width = pct(r.counts.failed);
  $('bar-running').style.width = pct(r.counts.running);
  const oldest = r.oldestPending ? `; oldest pending waited ${duration(r.oldestPending.ageSeconds)}` : '';
  // waiting for a retry: pending ones not yet due, and those a live run holds in its backoff (as status says them)
  $('percent').textContent =
    `${r.percentDone}% done; ${fmt(r.retrying + r.backingOff)} waiting for a retry; ${fmt(r.sharedItems)} items share a job${oldest}`;
  $('db').textContent = r.db;
}

function renderCost(r) {
  fillRows(
    'cost',
    r.cost.byModel.map((m) =>
      el(
        'tr',
        {},
        el('td', {}, m.model),
        // a model whose jobs were all dropped (forget) keeps its cost: said so, as status does
        el('td', { class: 'num' }, m.jobs === 0 && m.dropped > 0 ? `${fmt(m.dropped)} dropped` : fmt(m.jobs)),
        el('td', { class: 'num' }, fmt(m.done)),
        el('td', { class: 'num' }, fmt(m.prompt)),
        el('td', { class: 'num' }, fmt(m.completion)),
        el('td', { class: 'num' }, usd(m.usd)),
      ),
    ),
  );
  // a model without a price makes the whole unknown, never $0.00, as status says it
  const priced = r.cost.knownUsd > 0 ? `; ${usd(r.cost.knownUsd)} of it priced` : '';
  const unpriced = r.cost.unpriced.length ? ` (no price for ${r.cost.unpriced.join(', ')}: llmq serve --price in,out${priced})` : '';
  const left = r.cost.remainingUsd > 0 ? `; about ${usd(r.cost.remainingUsd)} more if the rest are like those done` : '';
  const maybe = r.cost.mayBeBilled;
  const billed = maybe.tries > 0 ? `; ${mayBeBilledText(maybe)} (no usable answer came)` : '';
  $('cost-total').textContent =
    `${fmt(r.tokens.prompt)} prompt + ${fmt(r.tokens.completion)} completion tokens; ` +
    `spent ${r.cost.usd === null ? 'unknown' : usd(r.cost.usd)}${unpriced}${left}${billed}`;
  // the runs that had a budget, as status's runs lines say them
  const budgeted = r.cost.byRun.filter((run) => run.budgetUsd !== null || run.budgetTotalUsd !== null).slice(0, 3);
  $('cost-runs').textContent = budgeted.map(budgetText).join('; ');
}

// "may be billed: 8 tries, up to $0.0424", as status says it (mayBeBilledText in src/report/status-text.ts).
function mayBeBilledText(m) {
  const head = `may be billed: ${m.unpricedTries > 0 ? 'about ' : ''}${fmt(m.tries)} ${m.tries === 1 ? 'try' : 'tries'}`;
  if (m.unpricedTries <= 0) return `${head}, up to ${usd(m.usd)}`;
  if (m.unpricedTries >= m.tries) return `${head}, cost not known`;
  return `${head}, up to ${usd(m.usd)} for ${fmt(m.tries - m.unpricedTries)} of them`;
}

// "run 1a2b3c4d spent $0.0449 of its $1.00 budget, 2 in flight, up to $0.12", as status's runs lines say it
function budgetText(run) {
  // nothing priced is not $0: its answers cost what their model costs
  const unknown = run.spentUsd === 0 && run.unpricedTries > 0;
  const of = run.budgetUsd !== null ? ` of its ${usd(run.budgetUsd)} budget` : '';
  const parts = [unknown ? `run ${run.runId.slice(0, 8)} cost unknown` : `run ${run.runId.slice(0, 8)} spent ${usd(run.spentUsd)}${of}`];
  if (unknown && run.budgetUsd !== null) parts.push(`budget ${usd(run.budgetUsd)}`);
  if (run.budgetTotalUsd !== null) parts.push(`queue budget ${usd(run.budgetTotalUsd)}`);
  if (run.live && run.inFlight > 0) parts.push(`${fmt(run.inFlight)} in flight, up to ${usd(run.reservedUsd)}`);
  if (run.unpricedTries > 0) parts.push(`${fmt(run.unpricedTries)} answers without a price`);
  if (run.died) parts.push('died');
  return parts.join(', ');
}

function renderLimits(r) {
  fillRows(
    'limits',
    r.limits.map((l) =>
      el(
        'tr',
        {},
        el('td', {}, l.baseUrl),
        el('td', {}, l.model),
        el('td', { class: 'num' }, fmt(l.rpm)),
        el('td', { class: 'num' }, fmt(l.tpm)),
        el('td', {}, l.source),
        el('td', {}, duration(l.ageSeconds)),
      ),
    ),
  );
}

function renderFailures(r) {
  const readOnly = state.config?.readOnly;
  fillRows(
    'failures',
    r.failures.map((f) => {
      const items = el('div');
      const show = el('a', { onclick: () => showFailedItems(f.error, items) }, 'items');
      const retry = readOnly
        ? ''
        : el('button', { type: 'button', class: 'retry-reason', onclick: () => retryFailed(f.error, f.count) }, 'Retry');
      return el('tr', {}, el('td', { class: 'num' }, fmt(f.count)), el('td', {}, f.error, items), el('td', {}, show, ' ', retry));
    }),
  );
}

// A rejected document that was an item enqueued before: that item keeps what it had (as status-text.ts's keptItemNote).
const keptItemNote = (x) =>
  x.keptItem === undefined ? '' : `; the item ${quotedName(x.keptItem)} keeps its earlier document (and answer, if any)`;

// A name in quotes, its control characters as \u escapes, as status writes it (quotedName in src/report/format.ts): the form show and forget take.
function quotedName(s) {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it escapes
  return `"${s.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)}"`;
}

// What the last enqueue of each input rejected, as `llmq status` shows it: found here later by file
// and line, where the enqueue printed it once among its other lines.
const REJECTED_SHOWN = 50;
function renderRejected(r) {
  const rejected = r.rejected ?? [];
  $('rejected-section').hidden = rejected.length === 0;
  const total = rejected.reduce((n, x) => n + x.rejected, 0);
  const name = (source) => (source === '-' ? 'stdin' : source);
  const inputs = rejected.length === 1 ? name(rejected[0].source) : `${fmt(rejected.length)} inputs`;
  $('rejected-summary').textContent =
    `${fmt(total)} ${total === 1 ? 'document' : 'documents'} of ${inputs}${rejected.length > 1 ? ', the input enqueued last first' : ''}. ` +
    `Fix ${total === 1 ? 'it' : 'them'}, then enqueue the same input again: what is fixed goes in.`;
  const shown = rejected.flatMap((x) => x.first).slice(0, REJECTED_SHOWN);
  fillRows(
    'rejected',
    shown.map((x) =>
      el('tr', {}, el('td', {}, x.line === undefined ? x.path : `${x.path}:${x.line}`), el('td', {}, x.reason + keptItemNote(x))),
    ),
  );
  $('rejected-more').textContent =
    total > shown.length ? `and ${fmt(total - shown.length)} more (llmq status --json lists the first 20 of each input)` : '';
}

function runState(run) {
  const now = state.report.now;
  if (run.gone) return 'died (its process is gone)';
  if (!run.live) return 'not responding';
  if (run.pidGoneHere) return 'stopped? (its process is gone)';
  if (run.stoppedHere) return 'stopped (Ctrl-Z): it keeps its jobs until continued';
  // live, neither gone nor stopped here, and still not sending: quiet past what status notes
  if (!run.sending) return `no heartbeat for ${duration((now - run.heartbeatAt) / 1000)}: stopped, or its database locked?`;
  const p = run.paused;
  if (p?.reason === 'outage') {
    const down = p.downSince ? `provider down ${duration((now - p.downSince) / 1000)}` : 'provider down';
    return `paused: ${down}, next try in ${duration(Math.max(0, p.until - now) / 1000)}`;
  }
  if (p) return `paused: rate limited, resuming in ${duration(Math.max(0, p.until - now) / 1000)}`;
  return 'running';
}

function renderRuns(r) {
  const rows = [];
  for (const run of r.activeRuns) {
    rows.push(
      el(
        'tr',
        {},
        el('td', {}, run.id.slice(0, 8)),
        el('td', {}, `${run.host} / ${run.pid}`),
        el('td', {}, duration(run.wallSeconds)),
        el('td', {}, `${ago(run.heartbeatAt)} ago`),
        el('td', { class: 'num' }, fmt(run.done)),
        el('td', { class: 'num' }, fmt(run.failed)),
        el('td', { class: 'num' }, run.sending ? run.recentJobsPerSecond.toFixed(1) : '–'),
        el('td', { class: 'num' }, run.inFlight === null || !run.sending ? '–' : `${run.inFlight} / ${run.concurrency}`),
        el('td', {}, runState(run)),
      ),
    );
    for (const lane of run.sending ? run.lanes : []) {
      const pause = lane.pausedUntil && lane.pausedUntil > r.now ? `, paused ${duration((lane.pausedUntil - r.now) / 1000)}` : '';
      rows.push(
        el(
          'tr',
          { class: 'lane' },
          el('td', {}),
          el(
            'td',
            { colspan: '8' },
            `lane ${lane.model}: ${lane.requestsPerSecond.toFixed(1)} req/s, ${lane.inFlight} in flight, pacing at ` +
              `${lane.rpm ?? '∞'} rpm / ${lane.tpm ?? '∞'} tpm, ${lane.rateLimited} rate-limited${pause}`,
          ),
        ),
      );
    }
  }
  fillRows('runs', rows);
  const last = r.lastRun;
  // a run that died counts to its last heartbeat (as status says it)
  const died = last?.exitReason === 'died';
  // its own figures alone would read as the queue's when other runs worked beside it
  const beside = r.lastRunBeside;
  const together = beside
    ? ` Beside it ${beside.runs.length === 1 ? '1 other run' : `${beside.runs.length} other runs`}; together ${beside.atLeast ? 'at least ' : ''}${fmt(beside.done)} done, ${fmt(beside.failed)} failed.`
    : '';
  $('last-run').textContent = r.activeRuns.length
    ? ''
    : last
      ? `No run is active. The last one (${last.host}) ${lastEnded(last)}: ${last.exitReason ?? 'unknown'}, ${died ? 'at least ' : ''}${fmt(last.done)} done, ${fmt(last.failed)} failed${rateLimitedOf(last)}.${together}`
      : 'No run yet: llmq run';
}

// When the last run ended; for one that died, when it was last heard (its end is when its jobs were taken back).
function lastEnded(run) {
  if (run.exitReason === 'died') return `was last heard ${ago(run.heartbeatAt)} ago`;
  return `ended ${run.endedAt ? ago(run.endedAt) + ' ago' : '?'}`;
}

// The 429s a run met, the strays (the pace kept) apart, as status says them.
function rateLimitedOf(run) {
  if (!run.rateLimited) return '';
  return `, ${fmt(run.rateLimited)} rate-limited${run.strayRateLimited ? ` (${fmt(run.strayRateLimited)} stray)` : ''}`;
}

// The batch lane's submissions, as `llmq status` lists them: the live ones, then the last few that ended.
function renderBatches(r) {
  const b = r.batches ?? { live: 0, rows: [] };
  $('batches-section').hidden = b.rows.length === 0;
  $('batches-live').textContent = `${b.live} live`;
  fillRows(
    'batches',
    b.rows.map((row) => {
      const id = row.providerBatchId ?? `(${row.id.slice(0, 8)}, not created yet)`;
      // a live batch whose run died here: the offline mock's went with its process
      const diedMock = row.runDied && row.baseUrl === 'mock';
      const state =
        row.state === 'abandoned' || diedMock
          ? row.providerBatchId
            ? 'gone with its process (mock)'
            : 'not sent'
          : (row.providerStatus ?? row.state) +
            (row.runDied
              ? ' (its run died: the next batch run takes it over)'
              : row.runEnded
                ? ' (no run is collecting it: the next batch run takes it over)'
                : '');
      const ended = row.state === 'ended' || row.state === 'abandoned';
      // a live batch: what the provider said it answered so far
      const uncollected = row.runDied || row.runEnded;
      const done = ended
        ? fmt(row.done)
        : row.progress
          ? `${fmt(row.progress.completed)} ${uncollected ? 'when last polled' : 'so far'}`
          : '–';
      const failed = ended ? fmt(row.failed) : row.progress ? fmt(row.progress.failed) : '–';
      return el(
        'tr',
        {},
        el('td', {}, id),
        el('td', {}, state),
        el('td', { class: 'num' }, fmt(row.jobs)),
        el('td', { class: 'num' }, done),
        el('td', { class: 'num' }, failed),
        el('td', { class: 'num' }, ended ? fmt(row.requeued) : '–'),
        el('td', {}, duration(row.ageSeconds)),
      );
    }),
  );
}

function renderAlerts(r) {
  const alerts = r.alerts ?? [];
  $('alerts').replaceChildren(...alerts.map((a) => el('span', { class: 'alert', title: a.detail ?? '' }, a.message)));
}

// Each section is redrawn only when its own data changed: redrawing a table under the pointer
// would swallow a click on its buttons and close the item lists a user opened.
const drawn = new Map();
function section(name, data, draw) {
  const key = JSON.stringify(data);
  if (drawn.get(name) === key) return;
  drawn.set(name, key);
  draw();
}

function render() {
  const r = state.report;
  if (!r) return;
  renderProgress(r);
  section('cost', [r.cost, r.tokens], () => renderCost(r));
  section(
    'limits',
    r.limits.map((l) => [l.baseUrl, l.model, l.rpm, l.tpm, Math.round(l.ageSeconds / 60)]),
    () => renderLimits(r),
  );
  section('failures', r.failures, () => renderFailures(r));
  section('rejected', r.rejected ?? [], () => renderRejected(r));
  section('runs', [r.activeRuns, r.lastRun, Math.floor(r.now / 1000)], () => renderRuns(r));
  section('alerts', r.alerts ?? [], () => renderAlerts(r));
  section('batches', r.batches ?? null, () => renderBatches(r));
}

// Throughput chart: jobs/s on the left axis, tokens/s on the right.
function chartData() {
  const h = state.history;
  return [h.map((p) => p.t), h.map((p) => p.jobsPerSecond), h.map((p) => p.tokensPerSecond)];
}
function drawChart() {
  if (!window.uPlot) return;
  const width = Math.max(300, $('chart').clientWidth || 900);
  if (!state.chart) {
    state.chart = new uPlot(
      {
        width,
        height: 200,
        // With one point (a page opened on a queue just read), uPlot spans 1,000 days of seconds from it
        // (Feb 2027 to Aug 2029): the last minute instead.
        scales: {
          x: { time: true, range: (u, min, max) => (u.data[0].length === 1 ? [u.data[0][0] - 60, u.data[0][0] + 1] : [min, max]) },
        },
        series: [
          {},
          { label: 'jobs/s', stroke: '#2e9d5b', width: 2, scale: 'jobs' },
          { label: 'tokens/s', stroke: '#3b7dd8', scale: 'tokens' },
        ],
        axes: [{}, { scale: 'jobs', label: 'jobs/s' }, { scale: 'tokens', side: 1, label: 'tokens/s', grid: { show: false } }],
      },
      chartData(),
      $('chart'),
    );
  } else {
    state.chart.setData(chartData());
  }
}

async function call(path, options = {}) {
  const res = await fetch(path, options);
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
  return body;
}

/** Failures the provider gave for the request as it was sent (as src/report/refused.ts's refusedAsSent): sent again, they fail the same way. */
const refusedAsSent = (error) => /^HTTP 4\d\d:/.test(error) && !/^HTTP 40[1289]:/.test(error);

/** In a failure's reason: its answer was cut off at max_tokens (as src/provider/finish.ts's CUT_OFF_TEXT). */
const CUT_OFF_TEXT = 'cut off at max_tokens';

/**
 * What Retry all puts back: every failed job but those cut off at max_tokens, which it leaves (as a
 * plain `llmq retry-failed` does). The failures listed are the most common reasons: with others not
 * listed, some of those may be cut off too, so `count` is then at most that (`exact` false).
 */
function retryAllCounts(r) {
  const failed = r?.counts.failed ?? 0;
  const failures = r?.failures ?? [];
  const cutOff = failures.filter((f) => f.error.includes(CUT_OFF_TEXT)).reduce((a, f) => a + f.count, 0);
  const listed = failures.reduce((a, f) => a + f.count, 0);
  return { count: failed - cutOff, cutOff, exact: listed >= failed };
}

/** What a Retry asks before it acts (it acted on one click): what goes back, and what the CLI would warn of. */
function retryQuestion(error, count, all) {
  const jobs = `${all && !all.exact ? 'up to ' : ''}${fmt(count)} failed job${count === 1 ? '' : 's'}`;
  if (error !== undefined && refusedAsSent(error))
    return `The provider refused these ${jobs} as they were sent. Sent again unchanged, they most likely fail the same way, and may be billed. Put them back to pending anyway?`;
  if (error?.startsWith('not sent: '))
    return `A run failed these ${jobs} before sending them, and fails them the same way until what the reason says is changed. Put them back to pending anyway?`;
  const refused =
    error === undefined ? (state.report?.failures ?? []).filter((f) => refusedAsSent(f.error)).reduce((a, f) => a + f.count, 0) : 0;
  const note = refused > 0 ? ` ${fmt(refused)} of them the provider refused as they were sent: they most likely fail the same way.` : '';
  return `Put ${jobs} back to pending? A running llmq run sends them again (or start one).${note}${all?.cutOff ? ` ${cutOffLeft(all.cutOff)}` : ''}`;
}

/** Said of the failed jobs cut off at max_tokens that Retry all leaves. */
function cutOffLeft(n) {
  return `It leaves ${fmt(n)} cut off at max_tokens failed: sent as they were, they would most likely be cut off again (llmq retry-failed --max-tokens N asks them with more room).`;
}

/** Retry all: the failed jobs but those cut off at max_tokens, counted as the action counts them. */
function retryAll() {
  const all = retryAllCounts(state.report);
  if (all.count === 0 && all.cutOff > 0) {
    $('action-result').textContent = `Nothing to put back. ${cutOffLeft(all.cutOff)}`;
    return;
  }
  return retryFailed(undefined, all.count, all);
}

async function retryFailed(error, count, all) {
  const token = $('token').value.trim();
  const result = $('action-result');
  if (!token) {
    result.textContent = 'Paste the action token llmq serve printed into the box at the top first.';
    $('token').focus();
    return;
  }
  if (count === 0) {
    result.textContent = 'No failed job to put back.';
    return;
  }
  if (!window.confirm(retryQuestion(error, count, all))) {
    result.textContent = 'Nothing was put back.';
    return;
  }
  try {
    const body = JSON.stringify(error === undefined ? {} : { error });
    const r = await call('/api/retry-failed', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-llmq-token': token },
      body,
    });
    const left =
      r.leftCutOff > 0
        ? ` Left ${fmt(r.leftCutOff)} cut off at max_tokens failed: sent as they were, they would most likely be cut off again (llmq retry-failed --max-tokens N asks them with more room).`
        : '';
    result.textContent = `Put ${r.requeued} failed job${r.requeued === 1 ? '' : 's'} back to pending; a running llmq run picks them up (or start one).${left}`;
  } catch (e) {
    result.textContent = `Retry refused: ${e.message}`;
  }
}

async function showFailedItems(error, into) {
  const { items } = await call(`/api/failed-items?error=${encodeURIComponent(error)}`);
  into.replaceChildren(
    el('div', { class: 'muted' }, items.length >= 50 ? 'first 50:' : ''),
    ...items.map((i) => el('div', {}, el('a', { onclick: () => showItem(i.id) }, i.id), ` (${i.attempts} attempts)`)),
  );
}

function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

async function showItem(id) {
  $('item-id').value = id;
  const box = $('item');
  let item;
  try {
    item = await call(`/api/item?id=${encodeURIComponent(id)}`);
  } catch (e) {
    box.replaceChildren(el('p', { class: 'muted' }, e.message));
    return;
  }
  const j = item.job;
  const attempts = el(
    'table',
    {},
    el(
      'thead',
      {},
      el('tr', {}, ...['#', 'run', 'started', 'latency', 'status', 'outcome', 'error', 'tokens'].map((h) => el('th', {}, h))),
    ),
    el(
      'tbody',
      {},
      ...item.attempts.map((a) =>
        el(
          'tr',
          {},
          el('td', {}, a.attempt),
          el('td', {}, a.runId.slice(0, 8)),
          el('td', {}, new Date(a.startedAt).toLocaleString()),
          el('td', { class: 'num' }, `${a.latencyMs} ms`),
          el('td', {}, a.status ?? 'network'),
          el('td', {}, a.outcome),
          el('td', {}, a.error ?? ''),
          el('td', {}, a.usage ? `${a.usage.promptTokens} + ${a.usage.completionTokens}` : ''),
        ),
      ),
    ),
  );
  box.replaceChildren(
    el(
      'p',
      {},
      `${item.id} from ${item.source}: `,
      el('strong', { id: 'item-state' }, j.state),
      `, ${j.attempts} attempt(s), model ${j.model}, job ${j.key.slice(0, 12)}`,
    ),
    j.error ? el('p', {}, `error: ${j.error}`) : '',
    el('h3', {}, 'Request'),
    el('pre', {}, pretty(j.request)),
    el('h3', {}, 'Attempts'),
    attempts,
    el('h3', {}, 'Answer'),
    el('pre', { id: 'item-answer' }, j.output ?? '(none yet)'),
  );
}

function footer(m) {
  $('footer').textContent = `updated ${new Date(state.report.now).toLocaleTimeString()} · the queue was read in ${Math.round(m.readMs)} ms`;
}

function connect() {
  const conn = $('connection');
  const events = new EventSource('/events');
  events.addEventListener('open', () => {
    conn.textContent = 'live';
    conn.className = 'pill live';
  });
  events.addEventListener('error', () => {
    conn.textContent = 'reconnecting…';
    conn.className = 'pill down';
  });
  events.addEventListener('snapshot', (e) => {
    const m = JSON.parse(e.data);
    state.report = m.report;
    state.history = m.history;
    render();
    drawChart();
    footer(m);
  });
  events.addEventListener('patch', (e) => {
    const m = JSON.parse(e.data);
    if (!state.report) return;
    Object.assign(state.report, m.changes);
    if (m.points.length > 0) {
      state.history.push(...m.points);
      if (state.history.length > 1800) state.history.splice(0, state.history.length - 1800);
      drawChart();
    }
    render();
    footer(m);
  });
  events.addEventListener('unreadable', (e) => {
    $('footer').textContent = `the queue could not be read: ${JSON.parse(e.data).message}`;
  });
}

async function start() {
  state.config = await call('/api/config');
  if (state.config.readOnly) document.body.classList.add('read-only');
  // The token lives in this tab only (sessionStorage), never in the URL.
  const token = $('token');
  token.value = sessionStorage.getItem(TOKEN_KEY) ?? '';
  token.addEventListener('input', () => sessionStorage.setItem(TOKEN_KEY, token.value.trim()));
  $('token-form').addEventListener('submit', (e) => e.preventDefault());
  $('retry-all').addEventListener('click', retryAll);
  $('search').addEventListener('submit', (e) => {
    e.preventDefault();
    const id = $('item-id').value.trim();
    if (id) showItem(id);
  });
  window.addEventListener('resize', () => state.chart?.setSize({ width: $('chart').clientWidth, height: 200 }));
  connect();
}

start();
