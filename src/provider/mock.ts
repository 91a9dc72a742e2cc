import { createHash } from 'node:crypto';
import { countTextTokens, estimatePromptTokens, loadTokenizer, messageText, requestedCompletionTokens } from './tokens.js';
import { ProviderError, type CompletionResult, type Provider } from './types.js';

export interface MockProviderOptions {
  /** Mean simulated latency per request, in ms. @default 200 */
  readonly latencyMs?: number;
  /** Latency varies uniformly within ±jitter × latencyMs. @default 0.5 */
  readonly jitter?: number;
  /** Fraction of tries (0..1) answered with a retryable simulated HTTP 500. @default 0 */
  readonly failureRate?: number;
  /** Seed of the pseudo-random latency and failures: the same seed gives the same run. @default 1 */
  readonly seed?: number;
  /** Clock for the `created` field. @default Date.now */
  readonly now?: () => number;
}

/** A mock answer quotes the first this many words of the document... */
const SUMMARY_WORDS = 12;
/** ...and at most this many characters of them. */
const SUMMARY_CHARS = 200;

/**
 * The offline provider behind `--provider mock`: answers every request with a deterministic text that
 * says it is mock output, after a simulated latency, with realistic token usage. Nothing leaves the
 * machine.
 *
 * Randomness is a hash of (seed, request, try number), not a shared generator, so each request's
 * latency and failures are the same however requests interleave under concurrency.
 */
export class MockProvider implements Provider {
  readonly name = 'mock';
  readonly free = true;
  readonly unlimited = true;
  readonly #latencyMs: number;
  readonly #jitter: number;
  readonly #failureRate: number;
  readonly #seed: number;
  readonly #now: () => number;
  /** Failed tries per request hash; an entry lives only until that request succeeds. */
  readonly #failures = new Map<string, number>();

  constructor(options: MockProviderOptions = {}) {
    this.#latencyMs = options.latencyMs ?? 200;
    this.#jitter = Math.min(1, Math.max(0, options.jitter ?? 0.5));
    this.#failureRate = options.failureRate ?? 0;
    this.#seed = options.seed ?? 1;
    this.#now = options.now ?? Date.now;
    if (!(this.#latencyMs >= 0)) throw new RangeError(`Expected mock latencyMs to be 0 or more, got ${options.latencyMs}`);
    if (!(this.#failureRate >= 0 && this.#failureRate <= 1)) {
      throw new RangeError(`Expected mock failureRate to be from 0 to 1, got ${options.failureRate}`);
    }
    // Every answer counts tokens: loaded on the first, the tables held the event loop inside that
    // request's timed span (a 50 ms mock answer was recorded at 490 ms, and the answers behind it late).
    loadTokenizer();
  }

  async complete(requestJson: string, options: { readonly signal: AbortSignal }): Promise<CompletionResult> {
    const { signal } = options;
    signal.throwIfAborted();
    const hash = createHash('sha256').update(requestJson).digest('hex');
    const tries = this.#failures.get(hash) ?? 0;
    const latency = this.#latencyMs * (1 + this.#jitter * (2 * this.#random(hash, tries, 'latency') - 1));
    await sleep(Math.round(latency), signal);

    if (this.#failureRate > 0 && this.#random(hash, tries, 'failure') < this.#failureRate) {
      this.#failures.set(hash, tries + 1);
      throw new ProviderError({
        message: 'HTTP 500: simulated failure of the mock provider (--mock-failure-rate)',
        scope: 'retryable',
        reason: 'server',
        status: 500,
      });
    }
    this.#failures.delete(hash);

    let request: any;
    try {
      request = JSON.parse(requestJson);
    } catch {
      throw new ProviderError({
        message: 'HTTP 400: the request body is not JSON (mock)',
        scope: 'job',
        reason: 'bad_request',
        status: 400,
      });
    }
    const { output, completionTokens, cut } = withinMaxTokens(mockAnswer(request), requestedCompletionTokens(request ?? {}));
    const usage = { promptTokens: estimatePromptTokens(request ?? {}), completionTokens };
    const body = JSON.stringify({
      id: `chatcmpl-mock-${hash.slice(0, 24)}`,
      object: 'chat.completion',
      created: Math.floor(this.#now() / 1000),
      model: typeof request?.model === 'string' ? request.model : 'mock',
      system_fingerprint: 'llmq-mock',
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: output, refusal: null },
          logprobs: null,
          finish_reason: cut ? 'length' : 'stop',
        },
      ],
      usage: {
        prompt_tokens: usage.promptTokens,
        completion_tokens: usage.completionTokens,
        total_tokens: usage.promptTokens + usage.completionTokens,
      },
    });
    return { status: 200, output, body, usage, rateLimit: null, finishReason: cut ? 'length' : 'stop' };
  }

  /** A uniform number in [0, 1) fixed by the seed, the request, the try and the purpose. */
  #random(hash: string, tries: number, purpose: string): number {
    const h = createHash('sha256').update(`${this.#seed}:${hash}:${tries}:${purpose}`).digest();
    return h.readUIntBE(0, 6) / 2 ** 48;
  }
}

/**
 * `[mock] Summary of: <the first words of the document>…`, labelled so nobody mistakes it. The
 * document is taken to be the last paragraph block after the instruction when the prompt has one
 * (the default template puts the instruction first, then a blank line, then the text).
 */
export function mockAnswer(request: any): string {
  const summary = mockSummary(request);
  // a request asking for JSON gets JSON of its schema, the summary in its strings: --schema tried offline
  const format = request?.response_format;
  if (format?.type === 'json_object') return JSON.stringify({ summary });
  if (format?.type === 'json_schema') {
    const schema = format.json_schema?.schema;
    return JSON.stringify(sampleOf(schema, schema, summary, 0));
  }
  return summary;
}

/** The mock's summary: the label and the document's first words. */
function mockSummary(request: any): string {
  const messages: any[] = Array.isArray(request?.messages) ? request.messages : [];
  const user = [...messages].reverse().find((m) => m?.role === 'user') ?? messages[messages.length - 1];
  const text = messageText(user?.content);
  const blank = text.search(/\n\s*\n/);
  const body = blank > 0 && text.slice(blank).trim() ? text.slice(blank) : text;
  const words = body.split(/\s+/).filter(Boolean);
  const head = words.slice(0, SUMMARY_WORDS).join(' ');
  // a document of one long word (a base64 blob) is not repeated whole
  const shown = head.length > SUMMARY_CHARS ? head.slice(0, SUMMARY_CHARS) : head;
  return `[mock] Summary of: ${shown}${words.length > SUMMARY_WORDS || shown !== head ? ' …' : ''}`;
}

/**
 * A value of the schema: every property of an object (strict structured outputs require them all),
 * the first of an enum or of `anyOf`, arrays of their least items (one when none is said), numbers at
 * their minimum, strings the summary (cut to `maxLength`). `$ref`s into the schema are followed.
 */
function sampleOf(schema: any, root: any, text: string, depth: number): unknown {
  if (schema === null || typeof schema !== 'object' || depth > 16) return null;
  if (typeof schema.$ref === 'string' && schema.$ref.startsWith('#')) {
    const target = schema.$ref
      .slice(1)
      .split('/')
      .filter(Boolean)
      .reduce((node: any, part: string) => node?.[part.replace(/~1/g, '/').replace(/~0/g, '~')], root);
    return sampleOf(target, root, text, depth + 1);
  }
  if ('const' in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (Array.isArray(alternatives) && alternatives.length > 0) return sampleOf(alternatives[0], root, text, depth + 1);
  const type = Array.isArray(schema.type) ? (schema.type.find((t: unknown) => t !== 'null') ?? schema.type[0]) : schema.type;
  switch (type ?? (schema.properties ? 'object' : 'string')) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(schema.properties ?? {})) out[key] = sampleOf(value, root, text, depth + 1);
      return out;
    }
    case 'array':
      return Array.from({ length: Math.min(Math.max(schema.minItems ?? 1, 0), 3) }, () => sampleOf(schema.items, root, text, depth + 1));
    case 'integer':
      return Math.ceil(schema.minimum ?? (schema.exclusiveMinimum === undefined ? 0 : Math.floor(schema.exclusiveMinimum) + 1));
    case 'number':
      return schema.minimum ?? (schema.exclusiveMinimum === undefined ? 0 : schema.exclusiveMinimum + 1);
    case 'boolean':
      return false;
    case 'null':
      return null;
    default:
      return typeof schema.maxLength === 'number' ? text.slice(0, schema.maxLength) : text;
  }
}

/**
 * The answer cut to `maxTokens` (when the request sets it), as a provider stops at max_tokens with
 * finish_reason `length`: a --budget tried offline then holds as it would online.
 */
function withinMaxTokens(answer: string, maxTokens: number): { output: string; completionTokens: number; cut: boolean } {
  let output = answer;
  let completionTokens = countTextTokens(output);
  if (maxTokens <= 0 || completionTokens <= maxTokens) return { output, completionTokens, cut: false };
  while (completionTokens > maxTokens) {
    output = output.slice(0, Math.floor((output.length * maxTokens) / completionTokens) - 1);
    completionTokens = countTextTokens(output);
  }
  return { output, completionTokens, cut: true };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
