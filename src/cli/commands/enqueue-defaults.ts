import type { MovedItem } from '../../store/types.js';
import { printable } from '../../report/format.js';

export const DEFAULT_PROMPT = 'Summarize the following document in 3 to 5 sentences. Keep names, numbers and dates exact.\n\n{{text}}';
export const DEFAULT_MODEL = 'gpt-4o-mini';
export const DEFAULT_MAX_TOKENS = 512;

/** Which of the request's flags this enqueue was given (the others took their defaults). */
export interface RequestFlagsGiven {
  readonly prompt: boolean;
  readonly system: boolean;
  readonly model: boolean;
  readonly maxTokens: boolean;
  readonly temperature: boolean;
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
  readonly temperature?: unknown;
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
  if (
    !given.maxTokens &&
    now.max_tokens === DEFAULT_MAX_TOKENS &&
    typeof was.max_tokens === 'number' &&
    was.max_tokens !== now.max_tokens
  ) {
    lost.push({ what: `max_tokens ${was.max_tokens}`, flag: `--max-tokens ${was.max_tokens}` });
  }
  if (!given.temperature && now.temperature === undefined && typeof was.temperature === 'number') {
    lost.push({ what: `temperature ${was.temperature}`, flag: `--temperature ${was.temperature}` });
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
  const gaveNo = flags.length === 1 ? flags[0] : `${flags.slice(0, -1).join(', ')} or ${flags.at(-1)}`;
  const had = lost.map((l) => l.what);
  const hadText = had.length === 1 ? had[0] : `${had.slice(0, -1).join(', ')} and ${had.at(-1)}`;
  const n = summary.orphanedAnswers;
  const items = summary.updated === 1 ? '1 item' : `${summary.updated.toLocaleString('en-US')} items`;
  return (
    `${items} moved to new jobs, and this enqueue's defaults made the change: it gave no ${gaveNo}, and the first, ` +
    `${JSON.stringify(printable(summary.firstMoved.id))}, had ${hadText}. llmq run sends the new requests unless they are answered already` +
    (n
      ? `; ${n === 1 ? '1 answer' : `${n.toLocaleString('en-US')} answers`} already paid for no longer belong to any item (kept in the queue)`
      : '') +
    `. If that was not meant, enqueue again with what they had: ${again} ${lost.map((l) => (l.flag === '--prompt' || l.flag === '--system' ? `${l.flag} '...'` : l.flag)).join(' ')}` +
    ` (the items then go back to their earlier jobs${n ? ' and answers' : ''}, and the new ones, unsent, are dropped).`
  );
}
