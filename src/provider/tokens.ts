import { createRequire } from 'node:module';

/**
 * The BPE tables take ~65 MB once loaded, so they load on first use: a run without --tpm against a
 * provider that reports usage never needs them.
 */
let count: ((text: string, options?: { disallowedSpecial?: Set<string> }) => number) | null = null;
// A document may contain `<|endoftext|>` and the like: to us it is text, and the tokenizer must
// count it, not throw (which would stop the run over one document).
const TEXT_ONLY = { disallowedSpecial: new Set<string>() };
/**
 * The longest run of non-space characters counted whole. The BPE's merges take time quadratic in
 * a word's length (a 400 KB base64 blob took 90 s, the run's heartbeats stopped meanwhile and its
 * leases ran out); longer runs are counted in pieces this long, each off by at most a token.
 */
const LONGEST_WORD = 1000;
const LONG_WORD_PIECES = new RegExp(`(\\S{${LONGEST_WORD}})`);

/**
 * The longest text counted whole, in characters (UTF-16 code units): about a second of the event loop. A longer one (a document enqueued
 * with a larger --max-doc-bytes: 10 MB took 7 s, and over 100 s with the tokenizer's merge cache, the
 * run's heartbeats stopped meanwhile) is counted from SAMPLES slices spread over it, scaled to its
 * length: within a few percent for text of one kind, and no model's context holds such a prompt whole.
 */
const LONGEST_COUNTED = 1 << 20;
const SAMPLES = 16;

function countTokens(text: string): number {
  if (text.length <= LONGEST_COUNTED) return countWhole(text);
  const stride = Math.floor(text.length / SAMPLES);
  const sample = Math.floor(LONGEST_COUNTED / SAMPLES);
  let tokens = 0;
  for (let i = 0; i < SAMPLES; i++) tokens += countWhole(text.slice(i * stride, i * stride + sample));
  return Math.ceil((tokens * text.length) / (sample * SAMPLES));
}

function countWhole(text: string): number {
  const c = count ?? loadTokenizer();
  if (!hasLongWord(text)) return c(text, TEXT_ONLY);
  let total = 0;
  for (const piece of text.split(LONG_WORD_PIECES)) if (piece) total += c(piece, TEXT_ONLY);
  return total;
}

/**
 * Whether `text` has a run of more than LONGEST_WORD non-space characters (`\S`, whose spaces are
 * JavaScript's `\s`). A loop over the text, not a regex: `/\S{1001}/` restarts at every
 * character and took a third as long as the count itself (100,000 prompts: 540 ms, this 170 ms).
 */
function hasLongWord(text: string): boolean {
  if (text.length <= LONGEST_WORD) return false;
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    if (isSpace(text.charCodeAt(i))) run = 0;
    else if (++run > LONGEST_WORD) return true;
  }
  return false;
}

/** The characters of JavaScript's `\s`: ASCII's, Unicode's space separators, line and paragraph separators, and the BOM. */
function isSpace(c: number): boolean {
  if (c < 0x80) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  return (
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/**
 * Load the tables now (about 0.4 s of the event loop, once per process) rather than on first use:
 * for a caller whose first use would fall inside a timed request.
 */
export function loadTokenizer(): NonNullable<typeof count> {
  if (count === null) {
    const tokenizer = createRequire(import.meta.url)('gpt-tokenizer') as typeof import('gpt-tokenizer');
    // Without its merge cache: the cache evicts its oldest entry with each new word once full (100,000
    // words), and its Map then slows with every eviction. Words seldom repeated (base64, hex, numbers,
    // code) took 20 s for 4 MB with it, 2.6 s without; prose takes the same time either way.
    tokenizer.setMergeCacheSize(0);
    count = tokenizer.countTokens;
  }
  return count;
}

/** Whether the tokenizer's tables are loaded: counting then costs no load. */
export function tokenizerLoaded(): boolean {
  return count !== null;
}

let loading: Promise<void> | null = null;

/**
 * Load the tables on a timer of their own, once: a run that learns a token limit mid-run (from an
 * answer's headers) would otherwise load them inside the turn that read the answers, and hold
 * their commit the 0.2-0.4 s the load takes, answers paid for and not stored. A timer comes after
 * that turn's group commit (setImmediate).
 */
export function loadTokenizerSoon(): Promise<void> {
  loading ??= new Promise((resolve) =>
    setTimeout(() => {
      // a load that fails is left to the caller's next use, which falls back to a rough count
      try {
        loadTokenizer();
      } catch {}
      resolve();
    }, 0),
  );
  return loading;
}

/**
 * Token estimates with a real tokenizer (o200k_base, the GPT-4o/4.1/5 encoding). The scheduler's TPM
 * limiter, the mock provider and the test fake all count the same way, so a limit the fake enforces
 * is the limit the scheduler plans for.
 */

interface MessageLike {
  readonly content?: unknown;
}

interface RequestLike {
  readonly messages?: readonly MessageLike[] | unknown;
  readonly max_tokens?: unknown;
  readonly max_completion_tokens?: unknown;
  readonly n?: unknown;
  readonly response_format?: unknown;
  readonly tools?: unknown;
}

/** The text of a message's content: a string, or the `text` of each part of a multi-part content. */
export function messageText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    let text = '';
    for (const part of content) {
      if (part !== null && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string') {
        text += (text ? '\n' : '') + (part as { text: string }).text;
      }
    }
    return text;
  }
  return '';
}

/**
 * Prompt tokens: the tokens of every message's text content (no per-message framing overhead), and
 * of the answer's schema (`response_format`) and the tools the request defines: the model reads
 * those too, and they are billed as input (a schema of 400 tokens on a prompt of 300 more than doubles it).
 */
export function estimatePromptTokens(request: RequestLike): number {
  if (!Array.isArray(request.messages)) return 0;
  let total = messageTokens(request);
  const schema = (request.response_format as { json_schema?: { schema?: unknown } } | null | undefined)?.json_schema?.schema;
  if (schema !== null && typeof schema === 'object') total += definitionTokens(schema);
  if (Array.isArray(request.tools) && request.tools.length > 0) total += definitionTokens(request.tools);
  return total;
}

/** The tokens of every message's text content alone. */
export function messageTokens(request: RequestLike): number {
  if (!Array.isArray(request.messages)) return 0;
  let total = 0;
  for (const m of request.messages as MessageLike[]) {
    const text = messageText(m?.content);
    if (text) total += countTokens(text);
  }
  return total;
}

/** Tokens of a schema or tool definitions, by their JSON: one queue's requests share a few, counted once each. */
const definitionCounts = new Map<string, number>();

function definitionTokens(definition: object): number {
  const json = JSON.stringify(definition);
  let n = definitionCounts.get(json);
  if (n === undefined) {
    n = countTokens(json);
    if (definitionCounts.size >= 256) definitionCounts.clear();
    definitionCounts.set(json, n);
  }
  return n;
}

/** The completion budget the request reserves: `max_tokens`, else `max_completion_tokens`, else 0. */
export function requestedCompletionTokens(request: RequestLike): number {
  const n = typeof request.max_tokens === 'number' ? request.max_tokens : request.max_completion_tokens;
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
}

/**
 * The completion tokens a request may use in all, `max_tokens` for each of its `n` choices (an
 * OpenAI Batch line may ask for several): what a tokens-per-minute limit counts, and the most it is
 * billed. 0 without a max_tokens.
 */
export function budgetedCompletionTokens(request: RequestLike): number {
  const n = request.n;
  const choices = typeof n === 'number' && Number.isInteger(n) && n > 1 ? n : 1;
  return requestedCompletionTokens(request) * choices;
}

/** A request's weight against a tokens-per-minute budget: prompt tokens plus the completion budget of all its choices. */
export function estimateRequestTokens(request: RequestLike): number {
  return estimatePromptTokens(request) + budgetedCompletionTokens(request);
}

/** Tokens of a plain text (e.g. a completion, when the server sent no `usage`). */
export function countTextTokens(text: string): number {
  return text ? countTokens(text) : 0;
}
