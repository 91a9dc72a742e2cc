import { describe, expect, it } from 'vitest';
import { makeRenderer, requestBody, responseFormatJson, type RequestOptions } from '../../src/ingest/render.js';
import { parseTemplate } from '../../src/ingest/template.js';
import { canonicalJson, jobKey } from '../../src/request.js';
import { Readable } from 'node:stream';
import { readJsonl } from '../../src/ingest/jsonl.js';
import type { Document, Entry } from '../../src/ingest/types.js';

const docs: Document[] = [
  { id: 'a.md', path: 'docs/a.md', text: 'Plain text.', meta: null },
  {
    id: '7',
    path: 'in.jsonl',
    line: 3,
    text: 'Quotes " and \\ backslashes,\nnewlines\tand tabs, \u0000 control, emoji 🎉, lone \ud800 surrogate, </script>',
    meta: { lang: 'fr' },
  },
];

const variants: Array<Partial<RequestOptions> & { name: string }> = [
  { name: 'defaults' },
  { name: 'with system', system: parseTemplate('You are terse.') },
  { name: 'templated system', system: parseTemplate('Answer in {{meta.lang}} about {{id}}.') },
  { name: 'temperature', temperature: 0.7 },
  { name: 'temperature 0', temperature: 0 },
  { name: 'odd model name', model: 'org/model "v2"', maxTokens: 1 },
  { name: 'a reasoning model', model: 'gpt-5-mini', temperature: 1 },
  {
    name: 'a schema (--schema), with temperature',
    temperature: 0,
    responseFormat: {
      type: 'json_schema',
      json_schema: {
        strict: true,
        name: 'x',
        schema: { type: 'object', required: ['b', 'a'], properties: { b: { type: 'string' }, a: {} } },
      },
    },
  },
];

describe("--schema's schema in the request", () => {
  it('keeps the order of its fields as the file has them (a strict answer writes them in that order), the rest canonical', () => {
    const schema = {
      type: 'object',
      properties: { reasoning: { type: 'string' }, answer: { type: 'string' } },
      required: ['reasoning', 'answer'],
    };
    const o: RequestOptions = {
      prompt: parseTemplate('{{text}}'),
      system: null,
      model: 'm',
      maxTokens: 9,
      priority: 0,
      responseFormat: { type: 'json_schema', json_schema: { name: 'r', schema, strict: true } },
    };
    const request = makeRenderer(o)(docs[0]!).request;
    expect(request).toContain(`"schema":${JSON.stringify(schema)}`);
    expect(Object.keys(JSON.parse(request).response_format.json_schema.schema.properties)).toEqual(['reasoning', 'answer']);
    expect(JSON.parse(request)).toEqual(JSON.parse(canonicalJson(requestBody(docs[0]!, o))));
  });
});

describe('rendering a document into its request', () => {
  it.each(variants)('writes exactly canonicalJson(requestBody) ($name)', (v) => {
    const o: RequestOptions = {
      prompt: parseTemplate('Summarize {{id}} from {{path}}:\n{{text}}'),
      system: null,
      model: 'gpt-4o-mini',
      maxTokens: 512,
      priority: 3,
      ...v,
    };
    const render = makeRenderer(o);
    for (const doc of docs) {
      if (v.system && !v.system.isConstant && doc.meta === null) continue;
      const row = render(doc);
      // the schema of --schema keeps its own key order (responseFormatJson); all else is canonical
      const expected = canonicalJson(requestBody(doc, o)).replace(
        canonicalJson(o.responseFormat ?? null),
        o.responseFormat ? responseFormatJson(o.responseFormat) : 'null',
      );
      expect(row.request).toBe(expected);
      expect(row.key).toBe(jobKey(expected));
      expect(row).toMatchObject({ itemId: doc.id, model: o.model, priority: 3, meta: doc.meta });
      expect(JSON.parse(row.request).messages.at(-1)).toEqual({ role: 'user', content: o.prompt.render(doc) });
    }
  });

  it('writes a JSONL line whose text it takes as it is (no backslash in the line) exactly as canonicalJson would', async () => {
    const texts = [
      'Plain text.',
      'emoji 🎉 (a surrogate pair), U+2028 \u2028, a BOM \ufeff, </script>',
      '🎉',
      'quote " inside',
      'backslash \\ inside',
      'newline \n and tab \t',
      'nul \u0000',
      'lone \ud83c high',
      'lone \udf89 low',
      '\udf89 starts low',
      'ends high \ud83c',
    ];
    // Through the real reader, from bytes: a raw lone surrogate cannot reach a document (it is U+FFFD in UTF-8).
    const lines = texts.flatMap((text) => [JSON.stringify({ id: 'x', text, lang: 'fr' }), `{"id":"x","text":"${text}","lang":"fr"}`]);
    const docs: Document[] = [];
    const sink = {
      add: (e: Entry) => void ('text' in e && docs.push(e)),
      flush: async () => {},
    };
    const content = lines.join('\n');
    const physical = content.split('\n'); // a raw newline in a text splits its line
    await readJsonl(Readable.from([Buffer.from(content)]), 'in.jsonl', { maxDocBytes: 1 << 20, idField: 'id', textField: 'text' }, sink);
    expect(docs.filter((d) => d.textJsonSafe).length).toBeGreaterThan(4);
    expect(docs.filter((d) => !d.textJsonSafe).length).toBeGreaterThan(4);
    for (const prompt of ['{{text}}', 'Summarize:\n{{text}}', '{{text}} (in "{{meta.lang}}")', '\udf89{{text}}', '{{text}}\ud83c']) {
      const o: RequestOptions = { prompt: parseTemplate(prompt), system: null, model: 'm', maxTokens: 5, priority: 0 };
      const render = makeRenderer(o);
      for (const doc of docs) {
        expect(doc.textJsonSafe).toBe(!physical[doc.line! - 1]!.includes('\\'));
        expect(render(doc).request).toBe(canonicalJson(requestBody(doc, o)));
      }
    }
  });

  it('leaves temperature out when it is not given, and sends max_tokens', () => {
    const row = makeRenderer({ prompt: parseTemplate('{{text}}'), system: null, model: 'm', maxTokens: 9, priority: 0 })(docs[0]!);
    expect(JSON.parse(row.request)).toEqual({ model: 'm', max_tokens: 9, messages: [{ role: 'user', content: 'Plain text.' }] });
    expect(row.source).toBe('docs/a.md');
  });

  it("names the limit max_completion_tokens for OpenAI's reasoning models, which refuse max_tokens; max_tokens for every other", () => {
    const field = (model: string) =>
      Object.keys(
        JSON.parse(makeRenderer({ prompt: parseTemplate('{{text}}'), system: null, model, maxTokens: 9, priority: 0 })(docs[0]!).request),
      );
    for (const model of [
      'o1',
      'o1-mini',
      'o3',
      'o3-mini-2025-01-31',
      'o4-mini',
      'gpt-5',
      'gpt-5-mini',
      'gpt-5.1',
      'GPT-5-nano',
      'openai/o3',
      'ft:o4-mini-2025-04-16:org::abc',
      'gpt-5-chat-latest',
    ])
      expect(field(model), model).toEqual(['max_completion_tokens', 'messages', 'model']);
    for (const model of ['gpt-4o-mini', 'gpt-4.1', 'gpt-50x', 'llama3.1:8b', 'ollama/o1x', 'my-o1-deployment', 'org/gpt-5'])
      expect(field(model), model).toEqual(['max_tokens', 'messages', 'model']);
  });

  it('takes an OpenAI batch body as it is (key order does not matter) with its own model', () => {
    const body = { temperature: 0, model: 'gpt-4o', messages: [{ content: 'hi', role: 'user' }], max_tokens: 5 };
    const render = makeRenderer({ prompt: parseTemplate('ignored {{text}}'), system: null, model: 'other', maxTokens: 1, priority: 0 });
    const row = render({ id: 'c1', path: 'b.jsonl', line: 2, text: '', meta: null, body });
    expect(row.request).toBe('{"max_tokens":5,"messages":[{"content":"hi","role":"user"}],"model":"gpt-4o","temperature":0}');
    expect(row).toMatchObject({ model: 'gpt-4o', itemId: 'c1', source: 'b.jsonl:2' });
  });
});
