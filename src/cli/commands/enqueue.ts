import { Option, type Command } from 'commander';
import { dbOption, anyInt, fieldName, byteSize, collect, intAtLeast, modelName, numberBetween, textOrFile } from '../options.js';
import { EXIT, UsageError } from '../../errors.js';
import { count, int, printable, quotedName } from '../../report/format.js';
import { RejectionLog } from '../rejection-log.js';
import {
  DEFAULT_MAX_TOKENS,
  DEFAULT_MODEL,
  DEFAULT_PROMPT,
  batchLinesText,
  lostToDefaults,
  movedByDefaultsText,
  orphanedAnswersText,
  reasoningRoomWarning,
  requestChanges,
  type RequestFlagsGiven,
} from './enqueue-requests.js';
// loaded by main already: no cost at start
import { onReaderGone, whileReaderPresent } from '../reader-gone.js';
import { shellWord } from '../../shell-word.js';
import { dbArgument, forgetCommand } from '../again.js';
import { signalCounter } from '../../second-signal.js';
import type { ChalkInstance } from 'chalk';
import type { EnqueueSummary, KeptEarlier } from '../../ingest/enqueue.js';
import type { FromAnotherFile } from '../../store/types.js';
import { MAX_GONE_LOOKED_AT, type GoneFiles } from '../../ingest/gone-files.js';
import type { MovedLines } from '../../ingest/moved-lines.js';
import type { Source } from '../../ingest/sources.js';
import type { Template } from '../../ingest/template.js';
import type { StatusLine } from '../progress/status-line.js';
import { DEFAULT_MAX_DOC_BYTES, isOverMaxDocBytes, MAX_REJECTED_IDS, sizeFlag, where } from '../../ingest/types.js';
import { likelyMeant } from '../../ingest/fields-it-has.js';
import { findApiKey } from '../../provider/endpoint.js';
import { readSchemaFile, strictModeProblems, type SchemaFormat } from '../../ingest/schema-file.js';

interface EnqueueFlags {
  db?: string;
  prompt: string;
  system?: string;
  model: string;
  maxTokens: number;
  temperature?: number;
  schema?: SchemaFormat;
  priority: number;
  glob?: string[];
  hidden?: boolean;
  idField: string;
  textField: string;
  maxDocBytes: number;
  json?: boolean;
}

export function registerEnqueue(program: Command): Command {
  return program
    .command('enqueue')
    .description('Add documents to the queue: one job per distinct request, rendered now and keyed by its hash.')
    .argument('<source...>', 'folders, text files, .jsonl/.ndjson files, or - for JSONL on stdin')
    .addOption(dbOption())
    .addOption(
      new Option('--prompt <text|@file>', 'the user message template; {{text}} {{id}} {{path}} {{meta.FIELD}} are filled in')
        .argParser(textOrFile)
        .default(DEFAULT_PROMPT, 'summarize {{text}}'),
    )
    .addOption(new Option('--system <text|@file>', 'a system message template, sent first').argParser(textOrFile))
    .addOption(new Option('--model <name>', 'the model to ask').argParser(modelName).default(DEFAULT_MODEL))
    .addOption(new Option('--max-tokens <n>', 'the longest answer, in tokens').argParser(intAtLeast(1)).default(DEFAULT_MAX_TOKENS))
    .addOption(new Option('--temperature <t>', "sampling temperature, 0 to 2 (default: the provider's)").argParser(numberBetween(0, 2)))
    .addOption(
      new Option(
        '--schema <file>',
        'a JSON Schema the answers must be JSON of (structured outputs); answers that are not are tried again',
      ).argParser(readSchemaFile),
    )
    .addOption(new Option('--priority <n>', 'lower runs first').argParser(anyInt).default(0))
    .addOption(
      new Option('--glob <pattern>', 'only files in folders matching this (repeatable); *.md matches at any depth').argParser(collect),
    )
    .addOption(new Option('--hidden', 'include files and folders whose name starts with "."'))
    .addOption(
      new Option('--id-field <name>', 'JSONL field holding the item id; lines without one get file:line')
        .default('id')
        .argParser(fieldName),
    )
    .addOption(new Option('--text-field <name>', 'JSONL field holding the document text').default('text').argParser(fieldName))
    .addOption(
      new Option('--max-doc-bytes <size>', 'reject larger documents (a file, or a JSONL line)')
        .argParser(byteSize)
        .default(DEFAULT_MAX_DOC_BYTES, '1MiB'),
    )
    .addOption(new Option('--json', 'print the summary as one JSON object on stdout'))
    .addHelpText(
      'after',
      `
Examples:
  $ llmq enqueue docs/
  $ llmq enqueue docs/ --glob '*.md' --glob 'notes/**/*.txt' --prompt @prompts/summary.txt
  $ llmq enqueue reviews.jsonl --text-field body --prompt "Sentiment of this review (positive/negative): {{text}}"
  $ llmq enqueue tickets/ --schema ticket.schema.json --prompt @extract.txt   # answers as JSON
  $ llmq enqueue batch_input.jsonl          # OpenAI Batch API lines: each body is sent as it is
  $ zcat big.jsonl.gz | llmq enqueue - --model gpt-4o --max-tokens 256 --priority -1

Item ids: the path relative to the folder, the JSONL id field (or file:line), or custom_id.
Enqueueing the same input again adds nothing; a changed document moves its item to a new job.
With --priority, the jobs already queued that wait (or failed, for retry-failed) take the new
priority too (a job other items need as well only moves forward).
Every rejected document is printed on stderr with its file, line and reason; the rest is enqueued.
Past the first ten lines of a file rejected for one reason, the others are named at the end as ranges.

Exit codes: 0 everything enqueued, 2 some input was rejected, 1 bad usage,
130 stopped by Ctrl-C (what was read is stored; a second Ctrl-C quits at once).`,
    )
    .action(async (sources: string[], flags: EnqueueFlags, cmd: Command) => {
      // asked for: jobs of the input queued already, waiting or failed, take it too; the default leaves them as they are
      const setsPriority = cmd.getOptionValueSource('priority') === 'cli';
      const given = (name: string) => ![undefined, 'default'].includes(cmd.getOptionValueSource(name));
      const requestFlags = {
        prompt: given('prompt'),
        system: given('system'),
        model: given('model'),
        maxTokens: given('maxTokens'),
        temperature: given('temperature'),
        schema: given('schema'),
      };
      const summary = await runEnqueue(sources, flags, setsPriority, requestFlags);
      if (summary.stopped) process.exitCode = EXIT.SIGNAL;
      else if (summary.rejected > 0) process.exitCode = EXIT.PARTIAL;
    });
}

async function runEnqueue(
  sources: string[],
  flags: EnqueueFlags,
  setsPriority: boolean,
  requestFlags: RequestFlagsGiven,
): Promise<EnqueueSummary> {
  const [
    { openStore, redactLocation, resolveDbLocation },
    { enqueue },
    { resolveSources, isJsonArrayFile },
    { parseTemplate },
    { colorsFor, warn },
    { statusLine },
    { refuseUnfinishedCopy },
  ] = await Promise.all([
    import('../../store/open-store.js'),
    import('../../ingest/enqueue.js'),
    import('../../ingest/sources.js'),
    import('../../ingest/template.js'),
    import('../output.js'),
    import('../progress/status-line.js'),
    import('../../report/open-existing.js'),
  ]);
  const prompt = parseTemplate(flags.prompt, '--prompt');
  const system = flags.system === undefined ? null : parseTemplate(flags.system, '--system');
  if (!prompt.usesText && !system?.usesText) {
    // `{text}` (one brace, as in Python's format) is text to the template, sent as it stands
    const oneBrace = [flags.prompt, flags.system ?? ''].some((t) => /(^|[^{])\{text\}/.test(t));
    warn(
      'the prompt has no {{text}}, so the documents are not sent and documents that render the same request share one job. ' +
        (oneBrace ? 'It has {text}: fields take two braces, {{text}}.' : 'Add {{text}} to --prompt or --system.'),
    );
  }
  const room = reasoningRoomWarning(flags.model, flags.maxTokens);
  if (room) warn(room);
  if (flags.schema?.json_schema.strict) {
    const problems = strictModeProblems(flags.schema.json_schema.schema);
    if (problems.length > 0)
      warn(
        `--schema: OpenAI's strict mode refuses this schema (${problems.join('; ')}), and would answer each request with a 400. ` +
          'A local server may take it. For OpenAI, give every object "additionalProperties": false and every property in "required" ' +
          '(an optional field: a type of ["string", "null"]); or give the file as {"name": ..., "strict": false, "schema": {...}}.',
      );
  }
  const location = resolveDbLocation(flags.db);
  const c = colorsFor(process.stderr);
  // A mistyped source is refused before the queue is opened: opening creates it, and an empty queue
  // left behind would make the next `status` say "empty" instead of "there is no queue here".
  const resolved = await resolveSources(sources, sources.includes('-'));
  refuseMetaWithoutFields(resolved, [prompt, system]);
  refuseMetaOfIdOrText([prompt, system], flags);
  for (const s of resolved) {
    // a table named as a file is one text document like any other file: rows are not records
    if (s.kind === 'file' && /\.(csv|tsv)$/i.test(s.file)) {
      warn(
        `${s.path} is read as one text document: only .jsonl and .ndjson files are read a record per line. ` +
          `For one document per row, convert it first, e.g. with Miller: mlr --i${/\.tsv$/i.test(s.file) ? 'tsv' : 'csv'} --ojsonl cat ${shellWord(s.path)} > rows.jsonl`,
      );
    }
    if (s.kind === 'file' && (await isJsonArrayFile(s))) {
      warn(
        `${s.path} holds a JSON array, and is read as one text document: only .jsonl and .ndjson files are read a record per line. ` +
          `For one document per record, convert it first: jq -c '.[]' ${shellWord(s.path)} > records.jsonl`,
      );
    }
  }
  // enqueued into, a partial copy would look whole once the rest came
  const store = await refuseUnfinishedCopy(await openStore(location), location);
  // messages go nowhere once stderr's reader is gone; the enqueue then stops as on Ctrl-C (stopOnSignals)
  const stderr = whileReaderPresent(process.stderr);
  // on a terminal, how far the read is: ten million documents take minutes; not while the user types
  // the input on that terminal, whose echo the line would erase
  const typed = sources.includes('-') && process.stdin.isTTY;
  const line = statusLine(stderr, !typed);
  const stop = stopOnSignals(c, stderr, line);
  // `-` at a terminal waits for the user to type: said, or the enqueue looks hung (a pipe was meant, most likely)
  if (typed) {
    stderr.write(
      c.dim(
        'reading JSONL from the terminal: one document a line, Ctrl-D ends the input (pipe a file in instead: llmq enqueue - < docs.jsonl)\n',
      ),
    );
  }
  let summary: EnqueueSummary;
  // documents rejected for their size: the one rejection a flag undoes, said once at the end
  let tooBig = 0;
  // the largest refused document whose size is known, and how many were not (a pipe read to the limit)
  let largest = 0;
  let unsized = 0;
  // a file's many lines of one reason (a wrong --text-field) are named together at the end
  const rejections = new RejectionLog();
  const started = Date.now();
  try {
    summary = await enqueue(store, {
      signal: stop.signal,
      sources,
      request: {
        prompt,
        system,
        model: flags.model,
        maxTokens: flags.maxTokens,
        temperature: flags.temperature,
        responseFormat: flags.schema,
        priority: flags.priority,
        setsPriority,
      },
      globs: flags.glob,
      hidden: flags.hidden,
      idField: flags.idField,
      textField: flags.textField,
      maxDocBytes: flags.maxDocBytes,
      stdin: sources.includes('-') ? process.stdin : undefined,
      onReject: (r) => {
        if (isOverMaxDocBytes(r.reason)) {
          tooBig++;
          if (r.bytes === undefined) unsized++;
          else largest = Math.max(largest, r.bytes);
        }
        const now = rejections.add(r);
        if (!now) return;
        line.done();
        stderr.write(`${c.yellow('rejected')} ${printable(now.where)}: ${printable(now.reason)}\n`);
      },
      backpressure: () => drained(process.stderr),
      onSkip: (s) => {
        line.done();
        stderr.write(`skipped ${printable(s.path)}: ${s.skipped}\n`);
      },
      onProgress: (p) => {
        if (p.stage === 'reading') {
          const seconds = (Date.now() - started) / 1000;
          return line.update(() => `reading: ${int(p.documents)} documents (${int(p.documents / seconds)}/s)`);
        }
        // SQLite builds them on this thread, where no handler runs until the build ends: a Ctrl-C
        // then ends the process at once, what was read stored, and the next command finishes them
        if (p.resumable) stop.release();
        line.now(`indexing ${int(p.documents)} documents` + (p.resumable ? ' (Ctrl-C quits; the next command finishes it)' : ''));
      },
    });
  } finally {
    line.done();
    for (const r of rejections.gathered()) stderr.write(`${c.yellow('rejected')} ${printable(r.where)}: ${printable(r.reason)}\n`);
    stop.release();
    // a stop leaves a read of stdin pending, which would keep the process alive
    if (sources.includes('-')) process.stdin.destroy();
    await store.close();
  }
  if (flags.json) {
    // firstMoved holds two whole requests: what it tells is said on stderr
    const { batches: _batches, firstMoved: _firstMoved, ...shown } = summary;
    process.stdout.write(JSON.stringify({ db: redactLocation(location), ...shown }) + '\n');
  } else {
    stderr.write(describe(summary, redactLocation(location), c, flags.priority) + '\n');
  }
  if (summary.documents === 0 && summary.skipped === 0 && !summary.stopped) warn(nothingRead(sources, flags.glob));
  if (tooBig > 0) {
    warn(
      `${count(tooBig, 'document')} ${tooBig === 1 ? 'was' : 'were'} over --max-doc-bytes (${int(flags.maxDocBytes)} bytes): to take ${tooBig === 1 ? 'it' : 'them'}, ` +
        // stdin is read once: the same input has to be piped in again
        `enqueue again${sources.includes('-') ? ', piping the same input in,' : ''} with a larger --max-doc-bytes (${largerLimit(largest, unsized, tooBig, flags.maxDocBytes)}); documents already queued are not added again. ` +
        'Check what a long document costs first: llmq estimate.',
    );
  }
  const missing = summary.withoutIdField;
  if (missing) {
    const has = missing.has.length === 0 ? 'no fields' : missing.has.map((n) => quotedName(n)).join(', ');
    const field = quotedName(flags.idField);
    const first = printable(where(missing.path, missing.line));
    const one = missing.count === 1;
    const their = one ? 'its id is' : 'their ids are';
    // the field there with null: its value was left out, not its name misspelt
    const lacked =
      missing.nullIds === 0
        ? `had no ${field} field`
        : missing.nullIds === missing.count
          ? `had a null ${field}`
          : `had no ${field} field or a null one`;
    const mend =
      missing.nullIds === missing.count
        ? `If ${one ? 'it was' : 'they were'} meant to have one, write ${one ? 'it' : 'them'} in`
        : `If the field's name is misspelt there${missing.nullIds ? ' or its value left out' : ''}, mend ${one ? 'it' : 'them'}`;
    const others = missing.withIdField
      ? ` though ${count(missing.withIdField, 'other line')} ${missing.withIdField === 1 ? 'has' : 'have'} one`
      : '';
    warn(
      flags.idField === 'id'
        ? // the default field, which other lines have: a line without it is likely a slip in its name there
          `${count(missing.count, 'line')} ${lacked}${others} ` +
            `(the first: ${first}, which has ${has}${meantField(flags.idField, missing.has)}), so ${their} file:line, ` +
            `not the one ${one ? 'it was' : 'they were'} meant to have. ${mend}, ` +
            `take the file:line ${one ? 'item' : 'items'} out (${forgetCommand([first], dbArgument(flags.db))}${one ? '' : ' ...'}) ` +
            'and enqueue again.'
        : `${count(missing.count, 'line')} ${lacked} (the first: ${first}, ` +
            `which has ${has}), so ${their} file:line. ` +
            // every one null: the field's name is right, its values missing
            (missing.nullIds === missing.count
              ? `${mend}, then llmq forget --source ${shellWord(missing.path)}${dbArgument(flags.db)} and enqueue it again`
              : `If the name given to --id-field is mistyped${meantIdField(flags.idField, missing.has)}: ` +
                `llmq forget --source ${shellWord(missing.path)}${dbArgument(flags.db)}, then enqueue it again with the right one`) +
            ' (answers already paid for are kept and found again).',
    );
  }
  const rounded = summary.roundedNumbers;
  if (rounded) {
    const field = quotedName(rounded.field);
    warn(
      `${count(rounded.count, 'line')} held an integer past 2^53 outside the id field (the first: ${printable(where(rounded.path, rounded.line))}, ` +
        `${field}, read as ${rounded.read}): JSON numbers that large lose their last digits when read, so what is stored ` +
        `(export's meta, {{meta.${printable(rounded.field)}}} in a prompt) holds the rounded number. To keep every digit, ` +
        `write such numbers as strings in the file (${field}: "...") and enqueue it again.`,
    );
  }
  const kept = summary.keptEarlier;
  if (kept) warn(keptEarlierText(kept, dbArgument(flags.db)));
  if (summary.goneFiles) warn(goneFilesText(summary.goneFiles, dbArgument(flags.db)));
  if (summary.movedLines) warn(movedLinesText(summary.movedLines, dbArgument(flags.db), flags.idField));
  const elsewhere = summary.fromAnotherFile;
  if (elsewhere) {
    const { id, was, now } = elsewhere.first;
    warn(
      `${nowComesFrom(elsewhere)}: one id for two documents? ` +
        'The item now stands for the new document: export shows its answer, not the old one. ' +
        (/:\d+$/.test(now)
          ? // a JSONL line's id is its record's: a folder does not come into it
            'To keep both, give the records ids of their own (their id field, or another with --id-field).'
          : `To keep both, give them ids of their own: enqueue the folder above both, so ids include their folder.${eachFolderApart(id, was, now, dbArgument(flags.db))}`) +
        (prompt.usesPath || system?.usesPath
          ? ' If it is the same file named from another folder: {{path}} in the template is the path as named from the current folder, ' +
            'so the request changed with it; enqueue from the folder of the first enqueue to find the earlier jobs again.'
          : ''),
    );
  }
  // a folder renamed, or named from elsewhere, is what it is for; a copy enqueued as well reads as
  // new items, which it is not
  if (summary.sourceRenamed)
    warn(
      `${nowComesFrom(summary.sourceRenamed)}: the same document, so the same item, not sent again; export and forget --source name its new place.`,
    );
  for (const o of summary.sameFilesOtherIds) {
    const q = (x: string) => quotedName(x);
    // a file named alone, or a folder's files
    const which =
      o.root === o.path
        ? `${printable(o.path)} was in this queue already, as item ${q(o.otherId)} of ${printable(o.otherRoot)}, and is now item ${q(o.id)} too. `
        : `${printable(o.root)} holds files this queue had already as items of ${printable(o.otherRoot)}: ` +
          `${printable(o.path)} was item ${q(o.otherId)}, and is now item ${q(o.id)} too. `;
    warn(
      which +
        "An item's id is its path inside the folder enqueued, so each such file is now two items, exported twice (and sent again where it changed). " +
        `To update the earlier items instead, enqueue ${printable(o.otherRoot)} (its unchanged files stay as they are); ` +
        'llmq forget removes items by id.',
    );
  }
  if (summary.keptRaised) {
    stderr.write(
      `${count(summary.keptRaised, 'document')} ${summary.keptRaised === 1 ? 'stays' : 'stay'} at the higher max_tokens that retry-failed --max-tokens gave ` +
        `${summary.keptRaised === 1 ? 'it' : 'them'}: at the max_tokens asked now, ${summary.keptRaised === 1 ? 'its answer was' : 'their answers were'} cut off (and paid for).\n`,
    );
  }
  if (summary.joinedFailed) {
    const n = summary.joinedFailed;
    warn(
      `${count(n, 'document')} joined ${n === 1 ? 'a request that had' : 'requests that had'} failed, and ${n === 1 ? 'stays' : 'stay'} failed with ${n === 1 ? 'it' : 'them'}: ` +
        `a run sends no failed job. llmq status${dbArgument(flags.db)} says why ${n === 1 ? 'it' : 'they'} failed; llmq retry-failed${dbArgument(flags.db)} sends failed jobs again.`,
    );
  }
  const ignored = batchLinesText(summary.batchLines, requestFlags, summary.documents - summary.rejected > summary.batchLines);
  if (ignored) warn(ignored);
  const lost = summary.firstMoved ? lostToDefaults(summary.firstMoved, requestFlags) : [];
  if (lost.length) {
    const again = `llmq enqueue ${sources.map(shellWord).join(' ')}${dbArgument(flags.db)}`;
    warn(movedByDefaultsText({ ...summary, firstMoved: summary.firstMoved! }, lost, again));
  } else if (summary.orphanedAnswers) {
    const first = summary.firstMoved;
    warn(
      orphanedAnswersText(
        summary.orphanedAnswers,
        first && { id: first.id, changes: requestChanges(first, { prompt, system }) },
        summary.newJobs,
      ),
    );
  }
  if (summary.stopped) {
    stderr.write(
      `${c.yellow('stopped')} before the end of the input: what was read is stored. Enqueue the same input again to add the rest (documents already queued are not added again).\n`,
    );
  } else if (!flags.json && summary.newJobs > 0) {
    // the next step, for whoever enqueues for the first time: what it costs, then what sends it
    const again = dbArgument(flags.db);
    stderr.write(c.dim(`next: llmq estimate${again} (what it would cost and take), then ${runHint(again, process.env)}`) + '\n');
  }
  return summary;
}

/**
 * The run to suggest after an enqueue. With no API key and no endpoint in the environment a plain
 * `llmq run` goes to OpenAI with no key and stops at its first 401: the hint says what it needs (a
 * key, or the address of a server of one's own), and how to try the queue offline meanwhile.
 */
export function runHint(again: string, env: NodeJS.ProcessEnv): string {
  let keyed: boolean;
  try {
    keyed = findApiKey(env) !== undefined;
  } catch {
    keyed = true; // set, if badly: run says what is wrong with it
  }
  if (keyed || env.LLMQ_BASE_URL?.trim() || env.OPENAI_BASE_URL?.trim()) return `llmq run${again}`;
  // a server of one's own (a local model) may need no key: what points the run at it is said too
  return `llmq run${again} once LLMQ_API_KEY is set, or with --base-url URL for a server of your own (llmq run --provider mock${again} tries it offline)`;
}

/** The one field of those a line `has` that `idField` is a slip of (`likelyMeant`), if any. */
function slipOf(idField: string, has: readonly string[]): string | undefined {
  return likelyMeant(idField, Object.fromEntries(has.map((name) => [name, true])));
}

/** `; "ID" looks like "id" misspelt` when one of the line's fields is a slip of the id field's name, else ''. */
function meantField(idField: string, has: readonly string[]): string {
  const meant = slipOf(idField, has);
  return meant === undefined ? '' : `; ${quotedName(meant)} looks like ${quotedName(idField)} misspelt`;
}

/** ` (did you mean --id-field X?)` when the fields the line has hold one the flag's name is a slip for. */
function meantIdField(idField: string, has: readonly string[]): string {
  const meant = slipOf(idField, has);
  return meant === undefined ? '' : ` (did you mean --id-field ${shellWord(meant)}?)`;
}

/**
 * `{{meta.FIELD}}` is filled from a JSONL line's fields; a folder's files and a text file have none,
 * so with only such sources every document would be rejected, one line each: say it once instead.
 */
function refuseMetaWithoutFields(sources: readonly Source[], templates: ReadonlyArray<Template | null>): void {
  const meta = [...new Set(templates.flatMap((t) => t?.metaPlaceholders ?? []))];
  if (meta.length === 0 || sources.some((s) => s.kind === 'jsonl' || s.kind === 'stdin')) return;
  throw new UsageError(
    `${meta.join(', ')} ${meta.length === 1 ? 'is' : 'are'} filled from the fields of a JSONL line, and these sources are folders or text files, ` +
      'whose documents have no fields. Use {{text}}, {{id}} or {{path}} for files, or enqueue a .jsonl file.',
  );
}

/**
 * The id and text fields of a JSONL line are the item's id and text, not meta: `{{meta.id}}` would
 * reject every line with "no id field" while each has one.
 */
function refuseMetaOfIdOrText(templates: ReadonlyArray<Template | null>, flags: Pick<EnqueueFlags, 'idField' | 'textField'>): void {
  for (const placeholder of templates.flatMap((t) => t?.metaPlaceholders ?? [])) {
    const field = placeholder.slice('{{meta.'.length, -'}}'.length);
    for (const [own, flag, use] of [
      [flags.idField, '--id-field', '{{id}}'],
      [flags.textField, '--text-field', '{{text}}'],
    ] as const) {
      if (field !== own && !field.startsWith(`${own}.`)) continue;
      throw new UsageError(
        `${placeholder} is never filled: "${own}" is each line's ${use === '{{id}}' ? 'item id' : 'text'} (${flag}), not one of its meta fields. Use ${use}.`,
      );
    }
  }
}

/**
 * The first Ctrl-C (or SIGTERM, SIGHUP) stops reading: the batch read so far is stored and a bulk
 * load finished, so the queue is ready for \`run\`; a second one ends the process at once (the load
 * is then finished by the next command), as does the first once a SQLite bulk load builds its
 * indexes (the caller releases these handlers then).
 */
function stopOnSignals(c: ChalkInstance, stderr: NodeJS.WriteStream, line: StatusLine): { signal: AbortSignal; release(): void } {
  const stop = new AbortController();
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
  const counted = signalCounter();
  // The exit status is the enqueue's (130 once it `stopped`), not the signal's: a stop that comes
  // after the input is all read stops nothing, and everything was enqueued.
  const onSignal = (signal: NodeJS.Signals): void => {
    // an echo of the first (npx, timeout) is no second Ctrl-C
    if (counted(signal) > 1) {
      // Die of the signal, as a program without handlers does (exit status 128 + its number, 130 for
      // Ctrl-C): an exit can hang behind a read that never returns (a FIFO no one writes to holds a
      // thread in open(), and Node's exit waits for its threads).
      // (every listener off, bin/llmq.js's too, which would exit instead)
      for (const s of signals) process.removeAllListeners(s);
      process.kill(process.pid, signal);
      return;
    }
    if (stop.signal.aborted) return; // an echo of the first, or the reader already went away
    stop.abort();
    line.done();
    // the second signal quits at once, whichever it is: a supervisor's second SIGTERM as a second Ctrl-C
    const again = signal === 'SIGINT' ? 'Ctrl-C again' : `another ${signal}`;
    stderr.write(`${c.yellow('stopping:')} storing what was read; ${again} to quit at once\n`);
  };
  for (const s of signals) process.on(s, onSignal);
  // A reader of stderr that went away (a closed terminal, \`2>&1 | head\`) is a stop too, not an exit
  // that would lose the batch read so far.
  const giveBack = onReaderGone(() => stop.abort());
  let released = false;
  return {
    signal: stop.signal,
    release: () => {
      if (released) return;
      released = true;
      for (const s of signals) process.off(s, onSignal);
      giveBack();
    },
  };
}

/**
 * Resolves once the stream has room again (or can take nothing more), so reading waits for a slow
 * reader of stderr instead of queueing every rejection line in memory.
 */
function drained(stream: NodeJS.WriteStream): Promise<void> | undefined {
  if (!stream.writableNeedDrain || stream.destroyed) return undefined;
  return new Promise((resolve) => {
    const done = () => {
      stream.off('drain', done).off('close', done).off('error', done);
      resolve();
    };
    stream.on('drain', done).on('close', done).on('error', done);
  });
}

/** Why an enqueue read nothing, and what to try: most often a --glob written from the wrong place. */
function nothingRead(sources: readonly string[], globs: readonly string[] | undefined): string {
  if (globs?.length) {
    const shown = globs.map((g) => `'${g}'`).join(', ');
    return `no file matched --glob ${shown}. A pattern with a / matches the path inside each folder given (docs/sub/a.md is 'sub/*.md' when enqueueing docs/); one without matches file names at any depth ('*.md').`;
  }
  return `nothing was read from ${sources.join(' ')}: no documents there (empty files, blank lines, or folders without files).`;
}

function describe(s: EnqueueSummary, db: string, c: ChalkInstance, priority: number): string {
  const rejected = s.rejected > 0 ? c.yellow(`${int(s.rejected)} rejected`) : '0 rejected';
  const secs = (s.elapsedMs / 1000).toFixed(s.elapsedMs < 10_000 ? 2 : 0);
  return (
    `${c.bold(`read ${count(s.documents, 'document')}`)} into ${db} in ${secs}s: ` +
    `${c.green(count(s.newJobs, 'new job'))}, ${count(s.newItems, 'new item')}, ` +
    `${int(s.unchanged)} already queued, ${int(s.updated)} updated${s.dropped ? ` (${count(s.dropped, 'unanswered old job')} dropped)` : ''}, ` +
    (s.reprioritized ? `${count(s.reprioritized, 'job')} now at priority ${priority}, ` : '') +
    rejected +
    (s.skipped ? `, ${int(s.skipped)} skipped` : '') +
    // exit 2 says "some input was rejected": when it was all of it, a script must not read that as "the rest is in"
    (s.rejected > 0 && s.rejected === s.documents ? `. ${c.yellow('Nothing was enqueued')}: every document was rejected (above)` : '')
  );
}

/** Past this, no model takes a document in one request (a million tokens is about 4 MB of text). */
const LARGEST_SENSIBLE_DOC = 64 * 2 ** 20;

/**
 * The --max-doc-bytes that takes the refused documents: the largest one's size in whole MiB (KiB
 * under a MiB), or 4x the limit, and more, for a size not known. None past LARGEST_SENSIBLE_DOC (a
 * stray archive): such a document is to be left out or split.
 */
function largerLimit(largest: number, unsized: number, refused: number, max: number): string {
  if (largest > LARGEST_SENSIBLE_DOC)
    return `up to 64MiB; the largest is ${int(largest)} bytes, more than a model takes in one request: split it or leave it out`;
  const unit = largest >= 2 ** 20 ? 2 ** 20 : 2 ** 10;
  const fits = Math.ceil(largest / unit) * unit;
  if (unsized === 0) return `${sizeFlag(fits)} takes ${refused === 1 ? 'it' : 'them all'}`;
  return `say ${sizeFlag(Math.max(fits, max * 4))}, or more: what was read from a pipe stopped at the limit, its size not known`;
}

/** Ids the gone-files warning names in its `llmq forget`. */
const GONE_IDS_IN_TEXT = 5;

/**
 * The `llmq forget` of `count` items whose first ids are `ids` (enqueue --json's `field.ids`): the
 * first GONE_IDS_IN_TEXT of them, and where the rest are listed.
 */
function forgetListed(ids: readonly string[], count: number, db: string, field: string): string {
  const shown = ids.slice(0, GONE_IDS_IN_TEXT);
  if (count <= shown.length) return forgetCommand(shown, db);
  const listed = count <= ids.length ? 'them all' : `the first ${int(ids.length)}`;
  return `${forgetCommand(shown, db)} ... (the first ${shown.length} of ${int(count)}; enqueue --json lists ${listed} in ${field}.ids)`;
}

/**
 * Items of files deleted from a folder since an earlier enqueue stay in the queue: enqueue never
 * removes an item, so `llmq run` would send a deleted file's document and export give its answer.
 */
export function goneFilesText(gone: GoneFiles, db: string): string {
  const { count: n, states, first } = gone;
  const one = n === 1;
  const waiting = (states.pending ?? 0) + (states.running ?? 0);
  const what = [
    waiting > 0 && `${int(waiting)} not answered yet (llmq run still sends ${waiting === 1 ? 'its document' : 'their documents'})`,
    states.done && `${int(states.done)} answered (export still gives ${states.done === 1 ? 'its answer' : 'their answers'})`,
    states.failed && `${int(states.failed)} failed (llmq retry-failed would send ${states.failed === 1 ? 'it' : 'them'} again)`,
  ].filter(Boolean);
  const forget = forgetListed(gone.ids, n, db, 'goneFiles');
  const folder = first.folder === '.' ? 'the current folder' : `${printable(first.folder)}/`;
  const others = gone.folders > 1 ? ` and ${count(gone.folders - 1, 'other folder')}` : '';
  const path = first.folder === '.' ? first.id : `${first.folder}/${first.id}`;
  return (
    `${one ? 'a file' : `${int(n)} files`} enqueued before from ${folder}${others} ${one ? 'is' : 'are'} not there now ` +
    `(${one ? '' : 'the first: '}${printable(path)}, id ${quotedName(first.id)})` +
    `${gone.partial ? ` (of the first ${int(MAX_GONE_LOOKED_AT)} items not read this time)` : ''}, ` +
    `and ${one ? 'its item stays' : 'their items stay'} in the queue: ${what.join(', ')}. ` +
    `If ${one ? 'it was' : 'they were'} deleted or renamed, take ${one ? 'the item' : 'those items'} out of the queue: ${forget}. ` +
    `(If another machine or folder enqueued ${one ? 'it' : 'them'} into this queue under the same folder name, ${one ? 'it is' : 'they are'} not gone: leave ${one ? 'it' : 'them'}.)`
  );
}

/**
 * Items named by their line in a JSONL file whose line is no line without an id now: the lines
 * moved (one added or taken out above), and each document is under its new `file:N` as well.
 */
export function movedLinesText(moved: MovedLines, db: string, idField: string): string {
  const n = moved.count;
  const one = n === 1;
  const forget = forgetListed(moved.ids, n, db, 'movedLines');
  const first = moved.ids[0]!;
  const file = printable(first.slice(0, first.lastIndexOf(':')));
  const others = moved.files > 1 ? ` and ${count(moved.files - 1, 'other file')}` : '';
  const field = quotedName(idField);
  const named =
    moved.ids
      .slice(0, 2)
      .map((id) => printable(id))
      .join(', ') + (n > 2 ? ', ...' : '');
  return (
    `${one ? 'an item' : `${moved.partial ? 'at least ' : ''}${int(n)} items`} of ${file}${others} named by ${one ? 'its' : 'their'} line number (${one ? 'a line' : 'lines'} without an ${field}: ${named}) ` +
    `${one ? 'was' : 'were'} not read again: lines were added or taken out above, or given an ${field}. ` +
    `${one ? 'It keeps its' : 'Each keeps its'} earlier document, which most likely has a new line number now as well ` +
    `(export gives it twice; llmq run sends what only the old item holds). ` +
    `Take ${one ? 'it' : 'them'} out: ${forget}. Lines with an ${field} field keep their items wherever they move.`
  );
}

/**
 * Rejected documents whose items were enqueued before keep their earlier documents: a file mended
 * badly (a field renamed, a text emptied) leaves the old text queued, or its old answer exported,
 * and the rejection alone does not say so.
 */
export function keptEarlierText(kept: KeptEarlier, db: string): string {
  const { count: n, states, first } = kept;
  const one = n === 1;
  const waiting = (states.pending ?? 0) + (states.running ?? 0);
  const what = [
    waiting > 0 && `${int(waiting)} not answered yet (llmq run sends the earlier document)`,
    states.done && `${int(states.done)} answered (export gives the answer to the earlier document)`,
    states.failed && `${int(states.failed)} failed (llmq retry-failed would send the earlier document)`,
  ].filter(Boolean);
  const forget = n <= kept.ids.length ? forgetCommand(kept.ids, db) : `llmq forget${db} ID...`;
  return (
    `the ${one ? 'document of an item' : `documents of ${int(n)} items`} enqueued before ${one ? 'was' : 'were'} rejected this time ` +
    `(${one ? '' : 'the first: '}${printable(where(first.path, first.line))}, id ${quotedName(first.id)})` +
    `${kept.partial ? ` (of the first ${int(MAX_REJECTED_IDS)} rejected with an id)` : ''}, so ${one ? 'it keeps its' : 'they keep their'} ` +
    `earlier ${one ? 'document' : 'documents'}: ${what.join(', ')}. Mend ${one ? 'it' : 'them'} and enqueue again, ` +
    `or take ${one ? 'the item' : 'those items'} out of the queue: ${forget}.`
  );
}

/**
 * Two sibling folders enqueued apart (each with its own model or prompt) give their same-named
 * files one id: the way to keep them apart and their own flags is the parent with --glob, after
 * forgetting the items of both (what was answered is kept, and found again by the same requests).
 * From the item's id and its two documents' paths (`readme.md`, `x/en/readme.md`, `x/fr/readme.md`).
 */
function eachFolderApart(id: string, was: string, now: string, db: string): string {
  const folderOf = (path: string) => (path.endsWith(`/${id}`) ? path.slice(0, -id.length - 1) : null);
  const [a, b] = [folderOf(was), folderOf(now)];
  if (a === null || b === null) return '';
  const parentOf = (folder: string) => (folder.includes('/') ? folder.slice(0, folder.lastIndexOf('/')) : '.');
  const nameOf = (folder: string) => folder.slice(folder.lastIndexOf('/') + 1);
  if (parentOf(a) !== parentOf(b) || [a, b].some((f) => ['', '.', '..'].includes(nameOf(f)))) return '';
  const parent = shellWord(parentOf(a));
  const forget = (f: string) => `llmq forget --source ${shellWord(f)}${db}`;
  const enqueue = (f: string) => `llmq enqueue ${parent} --glob ${shellWord(`${nameOf(f)}/**`)}${db}`;
  return (
    ` With a model or prompt for each: ${forget(a)} and ${forget(b)} (answers already paid for are kept and found again), ` +
    `then ${enqueue(a)} and ${enqueue(b)}, each with its own flags.`
  );
}

/** `item "a.txt" now comes from in2/a.txt, not in/a.txt (and 2 more)`: the first of items whose source changed, and how many. */
function nowComesFrom({ count, first }: FromAnotherFile): string {
  const more = count > 1 ? ` (and ${int(count - 1)} more)` : '';
  return `item ${quotedName(first.id)} now comes from ${printable(first.now)}, not ${printable(first.was)}${more}`;
}
