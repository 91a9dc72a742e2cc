import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { likelyMeant } from '../../src/ingest/fields-it-has.js';
import { request, run, tempStore } from './helpers.js';

// A field name given in a template or a flag and missing from every document is most often a typo:
// the rejection names the field it was likely meant to be, when exactly one is that close.
describe('a field name that is a slip for one the document has', () => {
  const fields = { lang: 1, text: 2, id: 3, subject: 4, subject2: 5, Title: 6, title: 7 };

  it.each([
    ['lnag', 'lang'],
    ['Lang', 'lang'],
    ['lan', 'lang'],
    ['langs', 'lang'],
    ['lung', 'lang'],
    ['txet', 'text'],
    ['ID', 'id'],
  ])('%s is taken for %s', (name, meant) => {
    expect(likelyMeant(name, fields)).toBe(meant);
  });

  it.each([
    ['xyz', 'nothing near'],
    ['ib', 'too short to guess past a case'],
    ['subjects', 'one slip from subject and from subject2'],
    ['TITLE', 'Title and title both'],
    ['lang', 'the name itself'],
  ])('%s gets no guess (%s)', (name) => {
    expect(likelyMeant(name, name === 'lang' ? { lang: 1 } : fields)).toBeUndefined();
  });

  it('in {{meta.FIELD}}: the rejection says which field was meant', async () => {
    const store = tempStore();
    const input = '{"id":"a","text":"x","lang":"en"}\n{"id":"b","text":"y","lang":"fr","lnog":"?"}\n';
    const s = await run(store, ['-'], { stdin: Readable.from([input]), request: request('{{meta.lnag}}: {{text}}') });
    expect(s.rejections.map((r) => r.reason)).toEqual([
      'the template needs {{meta.lnag}} but the document has no "lnag" field (its other fields: "lang"; did you mean {{meta.lang}}?)',
      // two fields one slip away: no guess
      'the template needs {{meta.lnag}} but the document has no "lnag" field (its other fields: "lang", "lnog")',
    ]);
  });

  it('in --text-field: the rejection gives the flag as it was meant', async () => {
    const store = tempStore();
    const input = '{"id":"a","Text":"x"}\n{"id":"b","body":"y"}\n';
    const s = await run(store, ['-'], { stdin: Readable.from([input]), textField: 'text' });
    expect(s.rejections.map((r) => r.reason)).toEqual([
      'no "text" field (it has "id", "Text": did you mean --text-field Text?)',
      'no "text" field (it has "id", "body": name the text field with --text-field)',
    ]);
  });
});
