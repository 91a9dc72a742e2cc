import { Option, type Command } from 'commander';
import { withoutFractionNoise } from '../../pricing/usd-value.js';
import { dbOption, durationIn } from '../options.js';
import { EXIT } from '../../errors.js';
import { MOCK_BASE_URL } from '../../mock-base-url.js';
import type { BatchesReport } from '../../report/batches-text.js';
import type { StatusReport } from '../../report/status.js';
import { priceOptions, reportPriceTable, type PriceFlags } from './price-options.js';

interface StatusFlags extends PriceFlags {
  db?: string;
  json?: boolean;
  watch?: number | true;
}

export function registerStatus(program: Command): Command {
  const cmd = program
    .command('status')
    .description('Show the queue: counts by state, tokens, cost, failures by reason, throughput and ETA.')
    .addOption(dbOption())
    .option('--json', 'print one JSON object (one per refresh with --watch)')
    .addOption(
      new Option('--watch [seconds]', 'refresh every few seconds until Ctrl-C (default 2)').argParser(durationIn('seconds', { above: 0 })),
    );
  for (const o of priceOptions()) cmd.addOption(o);
  return cmd
    .addHelpText(
      'after',
      `
Examples:
  $ llmq status
  $ llmq status --watch 5
  $ llmq status --json | jq .counts
  $ llmq status --price 0.15,0.60        # USD per million input,output tokens`,
    )
    .action(statusCommand);
}

async function statusCommand(flags: StatusFlags): Promise<void> {
  const [
    { resolveDbLocation, redactLocation },
    { openExistingStore },
    { buildStatusReport, runsGoneHere },
    { buildBatchesReport, readBatchRows },
    text,
  ] = await Promise.all([
    import('../../store/open-store.js'),
    import('../../report/open-existing.js'),
    import('../../report/status.js'),
    import('../../report/batches-text.js'),
    // the text and its colors only for a reader: --json is what scripts poll
    flags.json ? null : textRenderer(flags.db),
  ]);
  const location = resolveDbLocation(flags.db);
  const store = await openExistingStore(location);
  const out = process.stdout;
  const render = async (): Promise<string> => {
    const now = Date.now();
    const snapshot = await store.status();
    const prices = await reportPriceTable(flags, snapshot.lastRun);
    const here = runsGoneHere(snapshot.activeRuns, now);
    const report = buildStatusReport(snapshot, { now, prices, db: redactLocation(location), here });
    const batches = buildBatchesReport(await readBatchRows(store.batches), now, { active: snapshot.activeRuns, dead: here.dead });
    return text ? text(report, batches) : JSON.stringify({ ...report, batches }, withoutFractionNoise) + '\n';
  };
  try {
    if (flags.watch === undefined) {
      out.write(await render());
      return;
    }
    await watch(render, (flags.watch === true ? 2 : flags.watch) * 1000, out, Boolean(out.isTTY) && !flags.json);
  } finally {
    await store.close();
  }
}

/** Live batches `status` lists one by one; `llmq batches` lists them all. */
const LIVE_BATCHES_SHOWN = 10;

/** The status as text for stdout, in color on a terminal. */
async function textRenderer(dbFlag: string | undefined): Promise<(report: StatusReport, batches: BatchesReport) => string> {
  const [
    { renderStatus },
    { isLive, renderBatches },
    { colorsFor },
    { collectCommand, dbArgument, estimateArgumentsOfRun, runArgumentsOfRun },
  ] = await Promise.all([
    import('../../report/status-text.js'),
    import('../../report/batches-text.js'),
    import('../output.js'),
    import('../again.js'),
  ]);
  const paint = colorsFor(process.stdout);
  const again = dbArgument(dbFlag);
  // a run proposed after a mock run must not send to OpenAI: it goes where the last run went, and the
  // estimate proposed beside it is of that run (another endpoint's has no limit known, so no time)
  const nextOfRun = (options: Parameters<typeof runArgumentsOfRun>[0]) => ({
    run: runArgumentsOfRun(options),
    estimate: estimateArgumentsOfRun(options),
  });
  return (report, batches) =>
    renderStatus(
      report,
      paint,
      again,
      nextOfRun(
        report.lastRun
          ? {
              provider: report.lastRun.provider,
              via: report.lastRun.via,
              ...report.lastRun.spendFlags,
              ...report.lastRun.limitFlags,
              ...report.lastRun.mockFlags,
              endpoint: report.lastRun.endpoint,
              redis: report.lastRun.redis,
              budgetReached: report.lastRun.budgetReached,
              budgetTooSmall: report.lastRun.budgetTooSmall,
              wrongEndpoint: report.lastRun.wrongEndpoint,
            }
          : null,
      ),
      {
        live: batches.live,
        // a mock batch lives in its run's process: gone with it, never taken over (its jobs go back to any run)
        holders: new Map(
          batches.rows.filter((b) => isLive(b) && b.baseUrl !== MOCK_BASE_URL).map((b) => [b.runId, collectCommand(b.baseUrl) + again]),
        ),
        uncollected: batches.uncollected.map((u) => ({
          baseUrl: u.baseUrl,
          jobs: u.jobs,
          command: collectCommand(u.baseUrl) + again,
        })),
      },
    ) + renderBatches(batches, paint, LIVE_BATCHES_SHOWN);
}

/**
 * The lines of `text` that fit a screen of `rows` (counting lines the terminal wraps), and the rows
 * they take, so that the next redraw starts at their top. A report taller than the screen cannot be
 * redrawn in place (the cursor does not go above the screen's top): each redraw left a copy in the
 * scrollback. Its end is cut, and the last row says so.
 */
export function fitScreen(text: string, columns: number, rows: number, stripAnsi: (s: string) => string): { text: string; rows: number } {
  const lines = text.split('\n').slice(0, -1);
  const rowsOf = (l: string) => Math.max(1, Math.ceil(stripAnsi(l).length / columns));
  const total = lines.reduce((a, l) => a + rowsOf(l), 0);
  if (total < rows) return { text, rows: total };
  const kept: string[] = [];
  let used = 0;
  // the last row of the screen stays free, or the terminal scrolls; one more for the note
  for (const l of lines) {
    if (used + rowsOf(l) > rows - 2) break;
    kept.push(l);
    used += rowsOf(l);
  }
  const note = `… ${lines.length - kept.length} more lines: a taller terminal shows them, or llmq status without --watch`;
  return { text: `${kept.length ? `${kept.join('\n')}\n` : ''}${note.slice(0, columns - 1)}\n`, rows: used + 1 };
}

/** Redraw until SIGINT, SIGTERM or SIGHUP: in place on a terminal, a new block each time otherwise. */
async function watch(render: () => Promise<string>, everyMs: number, out: NodeJS.WriteStream, inPlace: boolean): Promise<void> {
  const [{ stripAnsi }, { moveCursor, clearScreenDown }] = await Promise.all([import('../../report/format.js'), import('node:readline')]);
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  process.once('SIGHUP', onSignal);
  let drawn = 0;
  try {
    while (!stop.signal.aborted) {
      const text = await render();
      if (inPlace) {
        if (drawn) {
          moveCursor(out, 0, -drawn);
          clearScreenDown(out);
        }
        const shown = fitScreen(text, out.columns || 80, out.rows || 24, stripAnsi);
        drawn = shown.rows;
        out.write(shown.text);
      } else {
        out.write(drawn++ && !text.startsWith('{') ? '\n' + text : text);
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, everyMs);
        stop.signal.addEventListener(
          'abort',
          () => {
            clearTimeout(t);
            resolve();
          },
          { once: true },
        );
      });
    }
    // stopped by a signal, as every llmq command a signal stops: 130
    process.exitCode = EXIT.SIGNAL;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    process.off('SIGHUP', onSignal);
  }
}
