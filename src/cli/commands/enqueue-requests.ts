import type { MovedItem } from '../../store/types.js';
import type { Template } from '../../ingest/template.js';
import { reasonsBeforeAnswering } from '../../ingest/completion-limit.js';
import { requestedCompletionTokens } from '../../provider/tokens.js';
import { count, int, listed, printable, quotedName } from '../../report/format.js';

/*
 * What an enqueue's request flags did to the items it read, said when it is news: defaults that
 * replaced what items had, answers left without an item and why, flags a batch line's body ignores.
 */

export const DEFAULT_PROMPT = 'Summarize the following document in 3 to 5 sentences. Keep names, numbers and dates exact.\n\n{{text}}';
export const DEFAULT_MODEL = 'gpt-4o-mini';
export const DEFAULT_MAX_TOKENS = 512;

/**
 * Below this limit a reasoning model's thinking (often 1,000 to 2,000 tokens for a short task, all
 * counted against max_completion_tokens and billed) may leave no room for the answer.
 */
export const REASONING_ROOM_TOKENS = 2048;

/**
 * A warning when `model` reasons before it answers (render.ts, `completionLimitField`) and
 * `maxTokens` leaves it little room: answers then come back cut off or empty, and are paid for.
 */
export function reasoningRoomWarning(model: string, maxTokens: number): string | null {
  if (!reasonsBeforeAnswering(model) || maxTokens >= REASONING_ROOM_TOKENS) return null;
  return (
    `${printable(model)} reasons before it answers, and its reasoning counts against --max-tokens ${int(maxTokens)} ` +
    `(sent as max_completion_tokens): answers may come back cut off or empty, and are billed all the same. ` +
    `Give it room, e.g. --max-tokens 4000; llmq run --limit 10 shows what a few answers take.`
  );
}

/** Which of the request's flags this enqueue was given (the others took their defaults). */
export interface RequestFlagsGiven {
  readonly prompt: boolean;
  readonly system: boolean;
  readonly model: boolean;
  readonly maxTokens: boolean;
  readonly temperature: boolean;
  readonly schema: boolean;
}

/** What one of a moved item's settings was, and the flag that gives it back. */
export interface LostSetting {
  /** `its model gpt-4o`, `a prompt of its own (its message began "Classify: ...")`. */
  readonly what: string;
  /** `--model gpt-4o`, or `--prompt` when only the user knows the template. */
  readonly flag: string;
}

interface Body {
  readonly model?: unknown;
  readonly messages?: ReadonlyArray<{ readonly role?: unknown; readonly content?: unknown }>;
  readonly max_tokens?: unknown;
  readonly max_completion_tokens?: unknown;
  readonly temperature?: unknown;
  readonly response_format?: { readonly json_schema?: { readonly name?: unknown } };
}

/** Which name the request gives its completion limit, when it gives one. */
function completionLimitName(body: Body): string | undefined {
  return body.max_tokens !== undefined ? 'max_tokens' : body.max_completion_tokens !== undefined ? 'max_completion_tokens' : undefined;
}

/**
 * What this enqueue's defaults took from the first item it moved: an item enqueued earlier with
 * `--prompt` and now again without it gets the default prompt, a new job, and is sent (and paid for)
 * again by the next run, its old answer orphaned. Only settings this enqueue did not give, and only
 * where the new request is the default's (a batch line's own body is never "the default").
 */
export function lostToDefaults(moved: MovedItem, given: RequestFlagsGiven): LostSetting[] {
  const was = parseBody(moved.was);
  const now = parseBody(moved.now);
  if (!was || !now) return [];
  const lost: LostSetting[] = [];
  if (!given.prompt) {
    const head = DEFAULT_PROMPT.slice(0, DEFAULT_PROMPT.indexOf('{{text}}'));
    const before = message(was, 'user', 'last');
    if (message(now, 'user', 'last')?.startsWith(head) && before !== undefined && !before.startsWith(head)) {
      lost.push({ what: `a prompt of its own (its message began ${quoteStart(before)})`, flag: '--prompt' });
    }
  }
  const system = message(was, 'system', 'first');
  if (!given.system && system !== undefined && message(now, 'system', 'first') === undefined) {
    lost.push({ what: `a system message (it began ${quoteStart(system)})`, flag: '--system' });
  }
  if (!given.model && now.model === DEFAULT_MODEL && typeof was.model === 'string' && was.model !== now.model) {
    lost.push({ what: `the model ${printable(was.model)}`, flag: `--model ${printable(was.model)}` });
  }
  const wasLimit = requestedCompletionTokens(was);
  if (!given.maxTokens && requestedCompletionTokens(now) === DEFAULT_MAX_TOKENS && wasLimit > 0 && wasLimit !== DEFAULT_MAX_TOKENS) {
    lost.push({ what: `${completionLimitName(was)} ${wasLimit}`, flag: `--max-tokens ${wasLimit}` });
  }
  if (!given.temperature && now.temperature === undefined && typeof was.temperature === 'number') {
    lost.push({ what: `temperature ${was.temperature}`, flag: `--temperature ${was.temperature}` });
  }
  const schema = was.response_format?.json_schema?.name;
  if (!given.schema && now.response_format === undefined && typeof schema === 'string') {
    lost.push({ what: `a schema for its answers (${printable(schema)})`, flag: '--schema' });
  }
  return lost;
}

function parseBody(request: string): Body | null {
  try {
    const body = JSON.parse(request) as unknown;
    return body !== null && typeof body === 'object' && !Array.isArray(body) ? (body as Body) : null;
  } catch {
    return null;
  }
}

/** The text of the first or last message of `role`, when it is a string. */
function message(body: Body, role: string, which: 'first' | 'last'): string | undefined {
  const all = Array.isArray(body.messages) ? body.messages.filter((m) => m?.role === role) : [];
  const content = (which === 'first' ? all[0] : all.at(-1))?.content;
  return typeof content === 'string' ? content : undefined;
}

/** `"Classify the sentiment of..."`: enough of a message to recognise the template it came from. */
function quoteStart(text: string): string {
  const max = 60;
  const quoted = JSON.stringify(text.length > max ? `${text.slice(0, max)}...` : text);
  // JSON leaves these as they are; a terminal would not
  return quoted.replace(/[\u007f-\u009f\u2028\u2029]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * The warning when this enqueue's defaults changed what items had (`lostToDefaults`): what the first
 * had, what the next run will do, and the command that gives the items their jobs (and answers) back.
 */
export function movedByDefaultsText(
  summary: { readonly updated: number; readonly orphanedAnswers: number; readonly firstMoved: MovedItem },
  lost: readonly LostSetting[],
  again: string,
): string {
  const flags = lost.map((l) => l.flag.split(' ')[0]!);
  const gaveNo = listed(flags, 'or');
  const had = lost.map((l) => l.what);
  const hadText = listed(had);
  const n = summary.orphanedAnswers;
  return (
    `${count(summary.updated, 'item')} moved to new jobs, and this enqueue's defaults made the change: it gave no ${gaveNo}, and the first, ` +
    `${quotedName(summary.firstMoved.id)}, had ${hadText}. llmq run sends the new requests unless they are answered already` +
    (n ? `; ${count(n, 'answer')} already paid for no longer ${n === 1 ? 'belongs' : 'belong'} to any item (kept in the queue)` : '') +
    `. If that was not meant, enqueue again with what they had: ${again} ${lost.map((l) => (l.flag === '--prompt' || l.flag === '--system' ? `${l.flag} '...'` : l.flag === '--schema' ? '--schema FILE' : l.flag)).join(' ')}` +
    ` (the items then go back to their earlier jobs${n ? ' and answers' : ''}, and the new ones, unsent, are dropped).`
  );
}

/**
 * What changed in a moved item's request besides its document: `the prompt`, `the model (a -> b)`
 * ... Empty when only the document did (the templates render the old request too); null when the
 * requests are not the templates' (a batch line's own body) or cannot be read.
 */
export function requestChanges(
  moved: MovedItem,
  templates: { readonly prompt: Template; readonly system: Template | null },
): string[] | null {
  const was = parseBody(moved.was);
  const now = parseBody(moved.now);
  if (!was || !now) return null;
  const wasUser = message(was, 'user', 'last');
  const nowUser = message(now, 'user', 'last');
  if (wasUser === undefined || nowUser === undefined || !templates.prompt.couldRender(nowUser)) return null;
  const changes: string[] = [];
  if (!templates.prompt.couldRender(wasUser)) changes.push('the prompt');
  const wasSystem = message(was, 'system', 'first');
  if (templates.system ? wasSystem === undefined || !templates.system.couldRender(wasSystem) : wasSystem !== undefined) {
    changes.push('the system message');
  }
  const setting = (name: string, a: unknown, b: unknown) => {
    if (a !== b)
      changes.push(`${name} ${a === undefined ? 'none' : printable(String(a))} -> ${b === undefined ? 'none' : printable(String(b))}`);
  };
  setting('the model', was.model, now.model);
  // a model that refuses max_tokens is sent max_completion_tokens (render.ts): the same limit, renamed
  const wasName = completionLimitName(was);
  const nowName = completionLimitName(now);
  if (wasName !== undefined && nowName !== undefined && wasName !== nowName) changes.push(`${wasName} -> ${nowName}`);
  setting(nowName ?? wasName ?? 'max_tokens', was.max_tokens ?? was.max_completion_tokens, now.max_tokens ?? now.max_completion_tokens);
  setting('temperature', was.temperature, now.temperature);
  // --schema: its name when that changed, else that the schema did (taken for the documents, it was not theirs)
  const wasFormat = was.response_format === undefined ? undefined : JSON.stringify(was.response_format);
  const nowFormat = now.response_format === undefined ? undefined : JSON.stringify(now.response_format);
  if (wasFormat !== nowFormat) {
    const name = (body: Body) => {
      const n = body.response_format?.json_schema?.name;
      return typeof n === 'string' ? printable(n) : body.response_format === undefined ? 'none' : 'given';
    };
    const [a, b] = [name(was), name(now)];
    changes.push(a === b ? 'the schema (--schema)' : `the schema ${a} -> ${b}`);
  }
  return changes;
}

/**
 * Answered jobs left without items (`orphanedAnswers`), when this enqueue's own defaults did not
 * make the change (`movedByDefaultsText` says that): a changed document is the ordinary case and
 * needs no remedy; a changed prompt or option may have been a mistake, and says how to go back.
 */
export function orphanedAnswersText(
  n: number,
  first: { readonly id: string; readonly changes: string[] | null } | null,
  newJobs = 1,
): string {
  const one = n === 1;
  const firstId = first ? quotedName(first.id) : null;
  if (first?.changes?.length === 0) {
    // documents back to a text answered before: their items point at those answers again, and nothing is new to send
    const next =
      newJobs === 0
        ? `and ${one ? 'its item points' : 'their items point'} at ${one ? 'an answer' : 'answers'} the queue had for the new text: nothing to send`
        : `and llmq run sends the new ${one ? 'one' : 'ones'}`;
    return (
      `${count(n, 'job')} answered or in flight no longer ${one ? 'belongs' : 'belong'} to any item: ` +
      `${one ? 'the document of its item' : 'the documents of their items'} changed (the first item moved: ${firstId}), ` +
      `${next}. The earlier ${one ? 'answer is' : 'answers are'} kept in the queue, which status counts apart.`
    );
  }
  const why = first?.changes?.length
    ? `the first item moved, ${firstId}: ${first.changes.join(', ')}`
    : 'a changed document, or another prompt, model or option than the enqueue that made them';
  return (
    // a job being answered counts too: its answer is kept when it comes
    `${count(n, 'job')} answered or in flight no longer ${one ? 'belongs' : 'belong'} to any item: ${one ? 'its items' : 'their items'} now have another request ` +
    `(${why}), which llmq run sends unless it is answered already. ` +
    'The answers are kept in the queue. If the change was not meant, enqueue again with the earlier prompt, model and options: ' +
    'the items then point back at their answers, and the new jobs, unsent, are dropped.'
  );
}

/** Request flags given that OpenAI Batch API lines ignore (their bodies are sent as they are); null when none was given. */
export function batchLinesText(lines: number, given: RequestFlagsGiven, otherDocuments: boolean): string | null {
  const names = {
    prompt: '--prompt',
    system: '--system',
    model: '--model',
    maxTokens: '--max-tokens',
    temperature: '--temperature',
    schema: '--schema',
  };
  const flags = (Object.keys(names) as Array<keyof RequestFlagsGiven>).filter((k) => given[k]).map((k) => names[k]);
  if (lines === 0 || flags.length === 0) return null;
  const one = lines === 1;
  return (
    `${count(lines, 'line')} ${one ? 'was an OpenAI Batch API line' : 'were OpenAI Batch API lines'} (custom_id and body): each body is sent as it is, ` +
    `so ${listed(flags)} did not apply to ${one ? 'it' : 'them'}` +
    (otherDocuments ? ' (only to the other documents).' : '. Change the bodies to change what is sent.')
  );
}
