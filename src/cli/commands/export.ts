import { InvalidArgumentError, Option, type Command } from 'commander';
import { dbOption, outFile } from '../options.js';
import { join } from 'node:path';
import { LlmqError, UsageError } from '../../errors.js';
import { knownError } from '../../errors-known.js';
import { JOB_STATES, type ExportRow, type JobState, type Store } from '../../store/types.js';
import {
  columnsFor,
  emptyCounts,
  EXPORT_FORMATS,
  skippedTotal,
  writeText,
  type ExportCounts,
  type ExportFormat,
} from '../../report/export.js';
import { isReaderGoneError } from '../reader-gone.js';

interface ExportFlags {
  db?: string;
  format: ExportFormat;
  state?: JobState[];
  out?: string;
  outDir?: string;
  ext?: string;
}

/** `--state done,failed --state pending` -> ['done', 'failed', 'pending'], each checked. */
export function parseStates(value: string, previous: JobState[] | undefined): JobState[] {
  const out = [...(previous ?? [])];
  for (const s of value
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)) {
    if (!(JOB_STATES as readonly string[]).includes(s))
      throw new InvalidArgumentError(`Expected states from: ${JOB_STATES.join(', ')} (got '${s}').`);
    if (!out.includes(s as JobState)) out.push(s as JobState);
  }
  return out;
}

export function registerExport(program: Command): Command {
  return program
    .command('export')
    .description('Write every item with its answer, in input order: JSON Lines, CSV, OpenAI Batch output, or one file per item.')
    .addOption(dbOption())
    .addOption(
      new Option('--format <format>', 'jsonl, csv, or openai-batch (the OpenAI Batch API output format)')
        .choices(EXPORT_FORMATS)
        .default('jsonl', 'jsonl; csv for an --out ending in .csv'),
    )
    .option('--state <states>', `only items whose job is in these states (${JOB_STATES.join('|')}; repeat or comma-separate)`, parseStates)
    .addOption(new Option('--out <file>', 'write to this file (complete or not at all) instead of stdout; - is stdout').argParser(outFile))
    .option('--out-dir <dir>', 'write one answer file per item, its id as the path: sub/a.txt -> DIR/sub/a.txt.out')
    .option('--ext <ext>', 'extension added to each answer file with --out-dir', '.out')
    .addHelpText(
      'after',
      `
Formats:
  jsonl         {"id","key","state","output","error","attempts","model","usage",
                "cost_usd","latency_ms","finish_reason","source","meta"}
  csv           a header row, then the same fields (usage as prompt_tokens,
                completion_tokens; cost_usd, then finish_reason, last), RFC 4180
  openai-batch  {"id","custom_id","response":{"status_code","request_id",
                "body"},"error","cost_usd"}; done and failed items only unless
                --state asks for more

Examples:
  $ llmq export --out results.jsonl
  $ llmq export --format csv --state failed > failed.csv
  $ llmq export --format openai-batch --out batch_output.jsonl
  $ llmq export --out-dir answers/ --ext .md`,
    )
    .action(exportCommand);
}

async function exportCommand(flags: ExportFlags, cmd: Command): Promise<void> {
  if (flags.out && flags.outDir)
    throw new UsageError('Expected one of --out and --out-dir, got both. --out writes one file, --out-dir one file per item.');
  if (flags.outDir && cmd.getOptionValueSource('format') === 'cli') {
    throw new UsageError('--format does not apply to --out-dir, which writes each answer as its own file. Use one or the other.');
  }
  const [
    { resolveDbLocation },
    { openExistingStore },
    { exportToFile },
    { exportChunks },
    { answerExt },
    { stdoutSink },
    { info, warn },
    { count, int },
    { statusLine },
  ] = await Promise.all([
    import('../../store/open-store.js'),
    import('../../report/open-existing.js'),
    import('../../report/export-files.js'),
    import('../../report/export-blocks.js'),
    import('../../report/answer-paths.js'),
    import('../stdout-sink.js'),
    import('../output.js'),
    import('../../report/format.js'),
    import('../progress/status-line.js'),
  ]);
  if (flags.outDir)
    answerExt(flags.ext); // a bad --ext is refused before anything is read
  // --ext names --out-dir's files: alone it would be dropped without a word
  else if (cmd.getOptionValueSource('ext') === 'cli')
    throw new UsageError('--ext names the answer files of --out-dir: add --out-dir DIR, or leave --ext out.');
  // `--out results.csv` means CSV: JSON Lines under that name is a file nobody can open as it says
  if (flags.out && cmd.getOptionValueSource('format') !== 'cli' && /\.csv$/i.test(flags.out)) flags.format = 'csv';
  const location = resolveDbLocation(flags.db);
  const store = await openExistingStore(location);
  try {
    // An explicit --state filters in the store; otherwise every row is read so skipped ones are counted.
    const filter = { states: flags.state, ...columnsFor(flags.outDir ? 'files' : flags.format) };
    let counts = emptyCounts();
    // Worker threads read an SQLite file beside this one. PostgreSQL's export is the server's work
    // (each item's job looked up by key): two more readers made 100,000 rows 1.4 times slower.
    const sharedFile = store.kind === 'sqlite' && location !== ':memory:' ? location : null;
    // on a terminal that is not where the text goes: how far it is (ten million items take a minute)
    const wanted = Boolean(flags.out) || !process.stdout.isTTY;
    const line = statusLine(process.stderr, wanted);
    // the total is one status read, made only for a line that is drawn
    const items = wanted && process.stderr.isTTY ? (await store.status()).items : 0;
    async function* shown(chunks: ReturnType<typeof exportChunks>) {
      try {
        for await (const chunk of chunks) {
          line.update(() => `exporting: ${int(counts.written + skippedTotal(counts))} of ${int(items)} items`);
          yield chunk;
        }
      } finally {
        line.done();
      }
    }
    const text = () =>
      shown(exportChunks({ reader: store, location: sharedFile, filter }, { format: flags.format, states: flags.state }, counts));
    if (flags.outDir) {
      counts = await toDir(store.exportPages(filter), flags.outDir, flags);
    } else if (flags.out) {
      await exportToFile(text(), flags.out, { database: store.kind === 'sqlite' ? location : null });
      info(`wrote ${count(counts.written, 'item')} to ${flags.out}${formatNotNamed(flags.format, flags.out)}`);
    } else {
      const sink = stdoutSink();
      try {
        await writeText(text(), sink.stream);
        await sink.done();
      } catch (error) {
        // `llmq export | head` closes the pipe early: nothing is left to write to, and only reads
        // happened, so stopping here loses nothing. The export is cut off, though: 130, as a signal.
        if (isReaderGoneError(error)) {
          process.exitCode = 130;
          return;
        }
        throw knownError(error, { what: 'standard output', path: '' }) ?? error;
      }
    }
    const skipped = skippedTotal(counts);
    if (skipped) {
      const by = JOB_STATES.filter((s) => counts.skipped[s])
        .map((s) => `${counts.skipped[s]} ${s}`)
        .join(', ');
      info(`skipped ${count(skipped, 'item')} (${by}); --state ${JOB_STATES.filter((s) => counts.skipped[s]).join(',')} includes them`);
    }
    // in a file, the offline mock's stand-ins read as a model's answers (a schema's the most: well-formed JSON)
    if (counts.written > 0 && (!flags.state || flags.state.includes('done')) && (await mockAnswersStand(store)))
      warn(MOCK_ANSWERS_EXPORTED);
  } finally {
    await store.close();
  }
}

const MOCK_ANSWERS_EXPORTED =
  "answers of the offline mock are among these (llmq run --provider mock): stand-ins, not a model's, and any cost_usd of theirs " +
  "is at a price given, nothing billed. A run with a real provider sends their jobs again; export after it for the model's answers.";

/** A run of the offline mock answered jobs whose answers no real run has taken back yet. */
async function mockAnswersStand(store: Pick<Store, 'status'>): Promise<boolean> {
  const { mockAnswersStandAmong } = await import('../../store/mock-answers.js');
  return mockAnswersStandAmong((await store.status()).spend);
}

/** --out-dir: every item written or named, each one renamed for a collision said so. */
async function toDir(pages: AsyncIterable<readonly ExportRow[]>, outDir: string, flags: ExportFlags): Promise<ExportCounts> {
  const [{ exportToDir }, { info, warn }, { count, quotedName }] = await Promise.all([
    import('../../report/export-files.js'),
    import('../output.js'),
    import('../../report/format.js'),
  ]);
  let firstStale: string | null = null;
  // with --state asking for more than done items, some files hold an error or a state, not an answer
  const file = (flags.state ?? ['done']).every((s) => s === 'done') ? 'answer file' : 'file';
  const counts = await exportToDir(pages, outDir, {
    states: flags.state,
    ext: flags.ext,
    onMoved: (id, path) => info(`item ${quotedName(id)} went to ${join(outDir, path)}: the path its id asks for is another item's`),
    onUnwritten: (id, reason) => info(`could not write item ${quotedName(id)}: ${reason}`),
    onStale: (_id, path, state) => {
      firstStale ??= `${join(outDir, path)}: its item is ${state} now`;
    },
    onStopped: (signal, written) =>
      info(`stopped (${signal}): wrote ${count(written, file)} under ${outDir}, none half; export again to write them all`),
  });
  info(`wrote ${count(counts.written, file)} under ${outDir}`);
  if (counts.unmarked && counts.written > 0)
    warn(
      `${outDir} held other files before: its answers are among them, and an llmq enqueue of it (or of a folder around it) reads ` +
        `them as documents. An --out-dir of their own keeps them apart; llmq enqueue leaves a folder only llmq export wrote out.`,
    );
  if (counts.stale > 0)
    info(`removed ${count(counts.stale, 'file')} an earlier export left for a state its item is no longer in (the first, ${firstStale})`);
  if (counts.unwritten > 0) {
    throw new LlmqError(`${count(counts.unwritten, file)} could not be written (each is named above); the others are in ${outDir}.`);
  }
  return counts;
}

/**
 * What the file holds, when its name does not say it (`--out results.tsv` is JSON Lines unless
 * --format says otherwise): said after the fact, so nobody opens it as what its name claims.
 */
function formatNotNamed(format: string, out: string): string {
  if (format === 'csv') return /\.csv$/i.test(out) ? '' : ', as CSV';
  if (/\.(jsonl|ndjson)$/i.test(out)) return '';
  return format === 'jsonl' ? ', as JSON Lines (--format csv writes CSV)' : ', as JSON Lines (the OpenAI Batch output format)';
}
