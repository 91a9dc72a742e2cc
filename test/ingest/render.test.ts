import { describe, expect, it } from 'vitest';
import { makeRenderer, requestBody, type RequestOptions } from '../../src/ingest/render.js';
import { parseTemplate } from '../../src/ingest/template.js';
import { canonicalJson, jobKey } from '../../src/request.js';
import type { Document } from '../../src/ingest/types.js';

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
];

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
      const expected = canonicalJson(requestBody(doc, o));
      expect(row.request).toBe(expected);
      expect(row.key).toBe(jobKey(expected));
      expect(row).toMatchObject({ itemId: doc.id, model: o.model, priority: 3, meta: doc.meta });
      expect(JSON.parse(row.request).messages.at(-1)).toEqual({ role: 'user', content: o.prompt.render(doc) });
    }
  });

  it('leaves temperature out when it is not given, and sends max_tokens', () => {
    const row = makeRenderer({ prompt: parseTemplate('{{text}}'), system: null, model: 'm', maxTokens: 9, priority: 0 })(docs[0]!);
    expect(JSON.parse(row.request)).toEqual({ model: 'm', max_tokens: 9, messages: [{ role: 'user', content: 'Plain text.' }] });
    expect(row.source).toBe('docs/a.md');
  });

  it('takes an OpenAI batch body as it is (key order does not matter) with its own model', () => {
    const body = { temperature: 0, model: 'gpt-4o', messages: [{ content: 'hi', role: 'user' }], max_tokens: 5 };
    const render = makeRenderer({ prompt: parseTemplate('ignored {{text}}'), system: null, model: 'other', maxTokens: 1, priority: 0 });
    const row = render({ id: 'c1', path: 'b.jsonl', line: 2, text: '', meta: null, body });
    expect(row.request).toBe('{"max_tokens":5,"messages":[{"content":"hi","role":"user"}],"model":"gpt-4o","temperature":0}');
    expect(row).toMatchObject({ model: 'gpt-4o', itemId: 'c1', source: 'b.jsonl:2' });
  });
});
