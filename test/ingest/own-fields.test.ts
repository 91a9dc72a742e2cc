import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { MissingValueError, parseTemplate } from '../../src/ingest/template.js';
import { canonicalJson } from '../../src/request.js';
import { items, request, run, tempStore } from './helpers.js';
import { all } from '../helpers/store-reads.js';

const doc = (meta: Record<string, unknown> | null) => ({ text: 'T', id: 'i', path: 'p', meta });
const render = (source: string, meta: Record<string, unknown> | null) => parseTemplate(source).render(doc(meta));

describe("fields are the document's own, never inherited", () => {
  it.each(['constructor', '__proto__', 'toString', 'hasOwnProperty', 'tags.length', 'tags.map', 'name.length', 'name.constructor'])(
    '{{meta.%s}} is a missing field, not a built-in of Object, Array or String',
    (field) => {
      const meta = { tags: ['x'], name: 'n' };
      expect(() => render(`{{meta.${field}}}`, meta)).toThrow(MissingValueError);
      expect(() => render(`{{meta.${field}}}`, meta)).toThrow(
        `the template needs {{meta.${field}}} but the document has no "${field}" field`,
      );
      expect(() => parseTemplate(`{{meta.${field}}}`).renderJson(doc(meta))).toThrow(MissingValueError);
    },
  );

  it('follows a dotted path through own fields of objects and arrays; a key with a dot, as written, comes first', () => {
    const meta = { a: { b: { c: 'deep' } }, tags: ['x', { y: 2 }], 'a.b': 'dotted key', n: 0, f: false };
    expect(render('{{meta.a.b.c}}|{{meta.tags.0}}|{{meta.tags.1.y}}|{{meta.a.b}}', meta)).toBe('deep|x|2|dotted key');
    expect(render('{{meta.a}} {{meta.tags}} {{meta.n}} {{meta.f}}', meta)).toBe('{"b":{"c":"deep"}} ["x",{"y":2}] 0 false');
    for (const missing of ['a.x', 'a.b.c.d', 'tags.2', 'tags.01', 'tags.-1', 'n.x']) {
      expect(() => render(`{{meta.${missing}}}`, meta)).toThrow(`has no "${missing}" field`);
    }
  });

  it('rejects each line that lacks the field when the template names a built-in, and keeps the rest of the file', async () => {
    const store = tempStore();
    const input = '{"id":"a","text":"x","lang":"en"}\n{"id":"b","text":"y","constructor":"own field"}\n';
    const s = await run(store, ['-'], { stdin: Readable.from([input]), request: request('{{meta.constructor}}: {{text}}') });
    expect(s.rejections).toEqual([
      {
        path: '-',
        line: 1,
        id: 'a',
        reason: 'the template needs {{meta.constructor}} but the document has no "constructor" field (its other fields: "lang")',
      },
    ]);
    expect(items(store).map((i) => i.id)).toEqual(['b']);
  });

  it('keeps a "__proto__" field as meta instead of letting it become the prototype', async () => {
    const store = tempStore();
    const input = '{"id":"a","text":"x","__proto__":{"lang":"fr"}}\n';
    const s = await run(store, ['-'], { stdin: Readable.from([input]), request: request('{{meta.lang}} {{text}}') });
    expect(s.rejections).toEqual([
      {
        path: '-',
        line: 1,
        id: 'a',
        reason: 'the template needs {{meta.lang}} but the document has no "lang" field (its other fields: "__proto__")',
      },
    ]);
    const kept = tempStore();
    expect(await run(kept, ['-'], { stdin: Readable.from([input]), request: request('{{meta.__proto__.lang}}: {{text}}') })).toMatchObject({
      rejected: 0,
      newItems: 1,
    });
    expect(items(kept)[0]!.meta).toBe('{"__proto__":{"lang":"fr"}}');
    expect(JSON.parse((await all(kept.copier.dumpJobs()))[0]!.request).messages[0].content).toBe('fr: x');
  });

  it("takes --text-field and --id-field from the line's own fields only", async () => {
    const store = tempStore();
    const s = await run(store, ['-'], { stdin: Readable.from(['{"id":"a","text":"x"}\n']), textField: 'constructor', idField: 'toString' });
    expect(s.rejections).toEqual([
      { path: '-', line: 1, id: '-:1', reason: 'no "constructor" field (it has "id", "text": check the name given to --text-field)' },
    ]);
    const ok = await run(store, ['-'], {
      stdin: Readable.from(['{"toString":"id-1","constructor":"the text"}\n']),
      textField: 'constructor',
      idField: 'toString',
    });
    expect(ok.rejected).toBe(0);
    expect(items(store).map((i) => i.id)).toEqual(['id-1']);
  });

  it('keeps a "__proto__" key of an OpenAI Batch body in the canonical request (and so in its hash)', () => {
    const body = JSON.parse('{"model":"m","messages":[],"__proto__":{"x":1}}');
    expect(canonicalJson(body)).toBe('{"__proto__":{"x":1},"messages":[],"model":"m"}');
  });
});
