import { createRequire } from 'node:module';
import type { Ajv, ErrorObject, ValidateFunction } from 'ajv';
import { CUT_OFF_TEXT, incompleteKind, type FinishReason } from './finish.js';
import { requestedCompletionTokens } from './tokens.js';
import { ProviderError } from './types.js';
import { oneLine } from '../report/format.js';

/**
 * Answers to requests that ask for JSON (`response_format`: `json_schema` from `llmq enqueue
 * --schema`, or a Batch line's own, or `json_object`) are checked before they are stored: an answer
 * that is no JSON, or not of the schema, is a failed try (`bad_output`), tried again up to
 * --max-attempts, so that what `export` gives is JSON a program can read. The schema is the request's
 * own, so no store or job holds anything more.
 */

/** `response_format` as a request carries it, when it asks for JSON. */
type JsonFormat = { readonly type: 'json_object' } | { readonly type: 'json_schema'; readonly schema: object | null };

/** The JSON a request asks for, or null. Looks at the text first: most requests ask for none, and parsing each would cost. */
function jsonFormatOf(request: string): JsonFormat | null {
  if (!request.includes('"response_format"')) return null;
  let format: any;
  try {
    format = JSON.parse(request)?.response_format;
  } catch {
    return null;
  }
  if (format?.type === 'json_object') return { type: 'json_object' };
  if (format?.type !== 'json_schema') return null;
  const schema = format.json_schema?.schema;
  return { type: 'json_schema', schema: schema !== null && typeof schema === 'object' ? schema : null };
}

/**
 * An answer checked against what its request asks for: `output`, the text to store, or `failure`,
 * the failed try it is (`bad_output`).
 */
export type CheckedAnswer =
  | { readonly output: string; readonly failure: null }
  | { readonly output: null; readonly failure: ProviderError };

/**
 * The answer to store, or the failed try it is when it is not the JSON its request asks for. A JSON
 * answer wrapped in a Markdown code fence (```json ... ```, as local models write it whatever
 * response_format says) is stored without the fence, so that what `export` gives reads as JSON. Cut
 * off at max_tokens, or declined, the same request would end the same way, each try paid for: the job
 * fails at once, saying so. Otherwise it is tried again, up to --max-attempts.
 */
export function checkAnswer(request: string, output: string, finish: FinishReason | null, status: number): CheckedAnswer {
  const format = jsonFormatOf(request);
  if (format === null) return { output, failure: null };
  const read = readJsonAnswer(format, output);
  if (read.problem === null) return { output: read.json, failure: null };
  const ended = incompleteKind(finish);
  if (ended === null) {
    return {
      output: null,
      failure: new ProviderError({ message: read.problem, scope: 'retryable', reason: 'bad_output', status, answer: shown(output) }),
    };
  }
  const why =
    ended === 'cutOff'
      ? `the answer was ${CUT_OFF_TEXT} before its JSON was whole: llmq retry-failed --error "cut off" --max-tokens ${roomier(request)} sends it again with more room`
      : 'the model declined (a refusal, or the content filter)';
  return {
    output: null,
    failure: new ProviderError({ message: `${why} (${read.problem})`, scope: 'job', reason: 'bad_output', status, answer: shown(output) }),
  };
}

/** Twice the request's completion limit (at least 1,024): a --max-tokens to propose for answers it cut off. */
export function roomier(request: string): number {
  return roomierThan(requestedCompletionTokens(JSON.parse(request)));
}

/** Twice a completion limit (at least 1,024; 4,096 when none is known): a --max-tokens to propose for answers it cut off. */
function roomierThan(limit: number): number {
  return limit > 0 ? Math.max(1024, 2 * limit) : 4096;
}

/**
 * The --max-tokens to propose for an answer kept though cut off, online and in the batch lane: twice
 * the larger of its request's limit (null where the lane does not hold the request) and the tokens
 * it used. Cut off at a limit, it used all of it; cut off with none set, at the model's own, which
 * only the tokens say (4,096 was proposed there, fewer than it had).
 */
export function cutOffRoom(request: string | null, completionTokens: number): number {
  const limit = request === null ? 0 : requestedCompletionTokens(JSON.parse(request));
  return roomierThan(Math.max(limit, completionTokens));
}

/** What is wrong with an answer to a request that asks for JSON, or null when it is what was asked (or nothing was). */
export function outputProblem(request: string, output: string | null): string | null {
  const format = jsonFormatOf(request);
  if (format === null) return null;
  const { problem } = readJsonAnswer(format, output ?? '');
  return problem === null ? null : `${problem} (the answer: ${shown(output ?? '')})`;
}

/**
 * What is inside a whole answer that is one Markdown code fence (its language named or not), or
 * undefined. Sliced, not matched: a regex over a fence followed by a long run of spaces (a model
 * padding to max_tokens) backtracked for seconds, the event loop held all that time.
 */
function insideFence(text: string): string | undefined {
  const t = text.trim();
  if (t.length < 6 || !t.startsWith('```') || !t.endsWith('```')) return undefined;
  const lineEnd = t.indexOf('\n');
  if (lineEnd < 0 || lineEnd > t.length - 4 || !/^[\w-]*$/.test(t.slice(3, lineEnd).trim())) return undefined;
  return t.slice(lineEnd + 1, t.length - 3);
}

/** The JSON an answer holds (without a fence around it), or what is wrong with it. */
function readJsonAnswer(format: JsonFormat, text: string): { json: string; problem: null } | { json: null; problem: string } {
  let json = text;
  let read = parsed(text);
  const inside = read === null ? insideFence(text) : undefined;
  if (inside !== undefined) {
    json = inside.trim();
    read = parsed(json);
  }
  if (read === null) return { json: null, problem: 'the answer is not JSON, where response_format asks for it' };
  const value = read.value;
  if (format.type === 'json_object' || format.schema === null) {
    return isObject(value)
      ? { json, problem: null }
      : { json: null, problem: 'the answer is JSON but no object, where response_format asks for one' };
  }
  const validate = validatorFor(format.schema);
  // a schema this checker cannot read was taken by the provider: there is nothing to hold the answer to
  if (validate === null || validate(value)) return { json, problem: null };
  return {
    json: null,
    problem: `the answer does not match response_format's schema: ${errorsText(validate.errors ?? [])}`,
  };
}

/** `text` parsed as JSON, or null when it is not JSON. */
function parsed(text: string): { value: unknown } | null {
  try {
    return { value: JSON.parse(text) };
  } catch {
    return null;
  }
}

/** Compiled schemas by their JSON (a request's is canonical): one enqueue shares one; Batch lines may each bring theirs. */
const validators = new Map<string, ValidateFunction | null>();
const MAX_VALIDATORS = 256;
let checker: Ajv | null = null;

/**
 * The schema checker, loaded the first time a request asks for JSON (it costs tens of milliseconds
 * to load: every enqueue and run paid it). JSON Schema 2020-12, the dialect OpenAI's structured
 * outputs take; strict: false takes the keywords they add or leave, and `format` is not checked
 * (a date-time's shape is the model's to keep). Schemas are not kept by their `$id`: two Batch lines
 * with one `$id` and different schemas would clash.
 */
function schemaChecker(): Ajv {
  if (checker === null) {
    const Ajv2020 = createRequire(import.meta.url)('ajv/dist/2020').default as new (options: object) => Ajv;
    checker = new Ajv2020({ strict: false, allErrors: false, validateFormats: false, addUsedSchema: false });
  }
  return checker;
}

/** The schema as compiled: its own `$schema` (a dialect named, draft-07 or 2020-12) and `$id` left out. */
function compile(schema: object): ValidateFunction {
  const { $schema: _dialect, $id: _id, ...rest } = schema as Record<string, unknown>;
  return schemaChecker().compile(rest);
}

function validatorFor(schema: object): ValidateFunction | null {
  const key = JSON.stringify(schema);
  let validate = validators.get(key);
  if (validate === undefined) {
    try {
      validate = compile(schema);
    } catch {
      validate = null;
    }
    if (validators.size >= MAX_VALIDATORS) {
      // the checker keeps what it compiled too: a new one lets both go
      validators.clear();
      checker = null;
    }
    validators.set(key, validate);
  }
  return validate;
}

/** A schema's fault, said before anything is enqueued: null when it compiles. */
export function schemaProblem(schema: unknown): string | null {
  if (!isObject(schema)) return 'a JSON Schema is an object';
  try {
    compile(schema);
    return null;
  } catch (error) {
    // the schema checked against JSON Schema's own schema: said where in the file, not in Ajv's words
    const first = /^schema is invalid/.test((error as Error).message) ? schemaChecker().errors?.[0] : undefined;
    if (first) return schemaErrorText(first, schema);
    const missing = (error as { missingRef?: string }).missingRef;
    if (typeof missing === 'string')
      return `its $ref ${JSON.stringify(missing)} points at nothing in the file (definitions go under "$defs")`;
    return (error as Error).message;
  }
}

/** `/properties/urgency/type is "enumm", where it must be one of "array", "boolean", ...` */
function schemaErrorText(e: ErrorObject, schema: object): string {
  const where = e.instancePath === '' ? 'the schema' : e.instancePath;
  const value = e.instancePath
    .split('/')
    .slice(1)
    .map((part) => part.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce<unknown>((at, part) => (isObject(at) || Array.isArray(at) ? (at as Record<string, unknown>)[part] : undefined), schema);
  const is = `${where} is ${oneLine(JSON.stringify(value) ?? 'missing', 60)}`;
  if (e.keyword === 'enum') {
    const allowed = (e.params as { allowedValues: readonly unknown[] }).allowedValues;
    return `${is}, where it must be one of ${allowed.map((x) => JSON.stringify(x)).join(', ')}`;
  }
  if (e.keyword === 'type') {
    const type = String((e.params as { type: string }).type);
    return `${is}, where it must be ${/^[aeiou]/.test(type) ? 'an' : 'a'} ${type}`;
  }
  return `${is}: it ${e.message ?? 'is not as JSON Schema has it'}`;
}

function errorsText(errors: readonly ErrorObject[]): string {
  const first = errors[0];
  if (!first) return 'it does not match';
  const where = first.instancePath === '' ? 'the answer' : first.instancePath;
  const extra =
    first.keyword === 'additionalProperties'
      ? ` (${JSON.stringify((first.params as { additionalProperty: string }).additionalProperty)})`
      : '';
  return `${where} ${first.message ?? 'does not match'}${extra}`;
}

function shown(text: string): string {
  return text === '' ? 'empty' : oneLine(text, 80);
}

function isObject(value: unknown): value is object {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
