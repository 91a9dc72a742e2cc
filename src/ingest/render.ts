import { canonicalJson, jobKey } from '../request.js';
import { completionLimitField } from './completion-limit.js';
import type { SchemaFormat } from './schema-file.js';
import type { EnqueueRow } from '../store/types.js';
import type { Template } from './template.js';
import { where, type Document } from './types.js';

/** How documents become requests: the same for every document of one enqueue. */
export interface RequestOptions {
  /** The user message. */
  readonly prompt: Template;
  /** An optional system message, sent first. */
  readonly system: Template | null;
  readonly model: string;
  readonly maxTokens: number;
  /** Left out of the request (the provider's default) when undefined. */
  readonly temperature?: number;
  /** The JSON the answers must be (`--schema`): left out when undefined. */
  readonly responseFormat?: SchemaFormat;
  /** Lower runs first. */
  readonly priority: number;
  /** The priority was asked for (`--priority`): jobs already queued, waiting or failed, take it too (EnqueueRow.setsPriority). */
  readonly setsPriority?: boolean;
}

/** The request body a document renders to, as an object (what `canonicalJson` is applied to). */
export function requestBody(doc: Document, o: RequestOptions): Record<string, unknown> {
  if (doc.body) return doc.body;
  const messages = [];
  if (o.system) messages.push({ role: 'system', content: o.system.render(doc) });
  messages.push({ role: 'user', content: o.prompt.render(doc) });
  return {
    model: o.model,
    messages,
    [completionLimitField(o.model)]: o.maxTokens,
    response_format: o.responseFormat,
    temperature: o.temperature,
  };
}

/**
 * `--schema`'s response_format as the request holds it: its keys sorted as canonical JSON's are, but
 * the schema's own as the file has them. A strict structured output writes its fields in the order
 * the schema lists them, and a field meant to come first (`reasoning` before `answer`) must stay so.
 */
export function responseFormatJson(format: SchemaFormat): string {
  const { name, schema, strict } = format.json_schema;
  return `{"json_schema":{"name":${JSON.stringify(name)},"schema":${JSON.stringify(schema)},"strict":${strict}},"type":"json_schema"}`;
}

/**
 * A function from document to store row. The templated request is written straight into its
 * canonical form: the keys are known, so `canonicalJson(requestBody(doc))` is a fixed prefix, the
 * escaped message texts and a fixed suffix (a test holds the two byte-equal). This skips building
 * and key-sorting an object per document, the largest cost of enqueue after hashing and SQLite.
 * OpenAI Batch bodies are arbitrary, so they go through `canonicalJson`.
 *
 * Throws MissingValueError when a `{{meta.FIELD}}` placeholder has nothing to fill it.
 */
export function makeRenderer(o: RequestOptions): (doc: Document) => EnqueueRow {
  // Sorted keys: max_completion_tokens < max_tokens < messages < model < response_format < temperature; content < role.
  const head = `{"${completionLimitField(o.model)}":${JSON.stringify(o.maxTokens)},"messages":[`;
  const format = o.responseFormat === undefined ? '' : `,"response_format":${responseFormatJson(o.responseFormat)}`;
  const tail = `],"model":${JSON.stringify(o.model)}${format}${o.temperature === undefined ? '' : `,"temperature":${JSON.stringify(o.temperature)}`}}`;
  const system = o.system;
  const constSystem = system?.isConstant ? `{"content":${JSON.stringify(system.source)},"role":"system"},` : null;
  const prompt = o.prompt;
  return (doc) => {
    let request: string;
    let model = o.model;
    if (doc.body) {
      request = canonicalJson(doc.body);
      model = doc.body.model as string;
    } else {
      const sys = system === null ? '' : (constSystem ?? `{"content":${system.renderJson(doc)},"role":"system"},`);
      request = `${head}${sys}{"content":${prompt.renderJson(doc)},"role":"user"}${tail}`;
    }
    return {
      itemId: doc.id,
      source: where(doc.path, doc.line),
      meta: doc.meta,
      key: jobKey(request),
      request,
      model,
      priority: o.priority,
      ...(o.setsPriority ? { setsPriority: true } : {}),
      positional: doc.positional === true,
    };
  };
}
