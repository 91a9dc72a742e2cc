import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { UsageError } from '../errors.js';
import { jsonComplaint } from '../json-complaint.js';
import { schemaProblem } from '../provider/structured-output.js';

/** `response_format` as `--schema` writes it into each request: OpenAI's structured outputs, strict. */
export interface SchemaFormat {
  readonly type: 'json_schema';
  readonly json_schema: { readonly name: string; readonly schema: object; readonly strict: boolean };
}

/**
 * The `response_format` of `--schema FILE`: a JSON Schema, or OpenAI's `{"name", "schema", "strict"}`
 * around one (as its docs and SDKs write it). Strict unless the file says otherwise: the provider then
 * answers nothing but JSON of the schema (and refuses a schema strict mode cannot take, which stops
 * the run at its first requests and names --schema). Its name is the file's when it gives none.
 */
export function readSchemaFile(file: string): SchemaFormat {
  let text: string;
  try {
    // a byte-order mark (some Windows editors write one) is no part of the JSON
    text = readFileSync(file, 'utf8').replace(/^\uFEFF/, '');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new UsageError(`--schema: cannot read ${file} (${code}). Give the path of a JSON Schema file.`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (error) {
    throw new UsageError(`--schema: ${file} is not JSON${jsonComplaint(text, error)}. Give a JSON Schema file.`);
  }
  // a whole response_format pasted ({"type": "json_schema", "json_schema": {...}}): its json_schema
  const pasted = isObject(parsed) && parsed.type === 'json_schema' && isObject(parsed.json_schema) ? parsed.json_schema : parsed;
  const outer = isObject(pasted) ? pasted : {};
  // OpenAI's {name, schema, strict}, its name optional: a schema has no "schema" keyword
  const wrapped = isObject(outer.schema) && !('properties' in outer) && !('type' in outer);
  const schema = wrapped ? outer.schema : pasted;
  const problem = schemaProblem(schema);
  if (problem !== null) throw new UsageError(`--schema: ${file} is not a JSON Schema: ${problem}.`);
  // {} or {"hello": "world"} compile, and any answer would pass them
  if (!SAYS_SOMETHING.some((keyword) => keyword in (schema as object)))
    throw new UsageError(
      `--schema: ${file} says nothing of the answers (no ${SAYS_SOMETHING.slice(0, 3).join(', ')}...): give a JSON Schema such as {"type": "object", "properties": {...}, "required": [...]}.`,
    );
  const name = (wrapped && typeof outer.name === 'string' ? outer.name : basename(file).replace(/\.(schema\.)?json$/i, ''))
    .replace(/[^a-zA-Z0-9_-]/g, '_')
    .slice(0, 64);
  const strict = wrapped && typeof outer.strict === 'boolean' ? outer.strict : true;
  return { type: 'json_schema', json_schema: { name: name || 'answer', schema: schema as object, strict } };
}

/**
 * What OpenAI's strict structured outputs refuse in a schema, the first few: an object that does not
 * say `"additionalProperties": false`, or leaves a property out of `required`. OpenAI answers every
 * request of such a schema with a 400 (the run stops at its first requests); a local server may take
 * it. Nested schemas are followed through properties, items, $defs, anyOf and the like.
 */
export function strictModeProblems(schema: object, most = 3): string[] {
  const problems: string[] = [];
  const visit = (node: unknown, at: string): void => {
    if (problems.length >= most || node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) {
      for (const [i, x] of node.entries()) visit(x, `${at}/${i}`);
      return;
    }
    const n = node as Record<string, unknown>;
    const properties = isObject(n.properties) ? n.properties : null;
    if (n.type === 'object' || properties) {
      const where = at === '' ? 'the schema' : at;
      if (n.additionalProperties !== false) problems.push(`${where} has no "additionalProperties": false`);
      const required = Array.isArray(n.required) ? n.required : [];
      const left = Object.keys(properties ?? {}).filter((p) => !required.includes(p));
      if (left.length > 0) problems.push(`${where}'s "required" leaves out ${left.map((p) => JSON.stringify(p)).join(', ')}`);
    }
    for (const key of ['properties', '$defs', 'definitions']) {
      const map = n[key];
      if (isObject(map))
        for (const [name, sub] of Object.entries(map)) visit(sub, `${at}/${key}/${name.replace(/~/g, '~0').replace(/\//g, '~1')}`);
    }
    for (const key of ['items', 'anyOf', 'oneOf', 'allOf', 'prefixItems']) if (key in n) visit(n[key], `${at}/${key}`);
  };
  visit(schema, '');
  return problems.slice(0, most);
}

/** Keywords of which a schema for answers has at least one at its root. */
const SAYS_SOMETHING = ['type', 'properties', '$ref', 'anyOf', 'oneOf', 'allOf', 'enum', 'const'];

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}
