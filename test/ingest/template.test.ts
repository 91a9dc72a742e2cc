import { describe, expect, it } from 'vitest';
import { MissingValueError, parseTemplate } from '../../src/ingest/template.js';
import { UsageError } from '../../src/errors.js';

const doc = { text: 'The text.', id: 'notes/a.md', path: 'docs/notes/a.md', meta: { lang: 'en', stars: 4, tags: ['x'] } };

describe('prompt templates', () => {
  it.each([
    ['Summarize: {{text}}', 'Summarize: The text.'],
    ['{{id}} at {{path}}', 'notes/a.md at docs/notes/a.md'],
    ['{{ text }}|{{text}}', 'The text.|The text.'],
    ['lang={{meta.lang}} stars={{meta.stars}} tags={{meta.tags}}', 'lang=en stars=4 tags=["x"]'],
    ['no placeholders at all', 'no placeholders at all'],
    ['{{text}}', 'The text.'],
    ['braces { that } are not {placeholders}', 'braces { that } are not {placeholders}'],
  ])('%j renders as %j', (source, expected) => {
    expect(parseTemplate(source).render(doc)).toBe(expected);
    expect(parseTemplate(source).renderJson(doc)).toBe(JSON.stringify(expected));
  });

  it.each([
    ['escapes', 'Q: "{{text}}"\n\\', { ...doc, text: 'tab\there "quoted" \\ and \u0001' }],
    ['a surrogate pair split across literal and text', 'X\ud83d{{text}}', { ...doc, text: '\ude00 smile' }],
    ['a surrogate pair split across text and literal', '{{text}}\ude00', { ...doc, text: 'smile \ud83d' }],
    ['lone surrogates', '\udc00{{text}}\ud800', { ...doc, text: '\ud800x\udc00' }],
    ['an empty value', '[{{text}}]', { ...doc, text: '' }],
    ['nothing to escape', '{{text}}', { ...doc, text: 'plain words, digits 123, accents é, emoji-free' }],
    ['each escaped class alone', '{{text}}|{{id}}|{{path}}', { ...doc, text: 'a"b', id: 'c\\d', path: 'e\u001ff' }],
    ['lone surrogates inside a value', '[{{text}}]', { ...doc, text: 'a\ud800b\udc00c' }],
    ['what JSON.stringify leaves alone', '{{text}}', { ...doc, text: 'del \u007f, line sep \u2028, nbsp \u00a0, \u{1f600} pair' }],
  ])('renderJson is exactly JSON.stringify(render) with %s', (_name, source, values) => {
    const t = parseTemplate(source);
    expect(t.renderJson(values)).toBe(JSON.stringify(t.render(values)));
  });

  it('says whether the document text is used', () => {
    expect(parseTemplate('x {{text}}').usesText).toBe(true);
    expect(parseTemplate('x {{id}}').usesText).toBe(false);
    expect(parseTemplate('x').isConstant).toBe(true);
    expect(parseTemplate('x {{id}}').isConstant).toBe(false);
  });

  it('rejects unknown placeholders as a usage error naming every one and the flag', () => {
    const attempt = () => parseTemplate('Hi {{txt}} and {{ name }} and {{text}}', '--system');
    expect(attempt).toThrow(UsageError);
    expect(attempt).toThrow('Unknown placeholders {{txt}}, {{ name }} in --system. Use {{text}}, {{id}}, {{path}} or {{meta.FIELD}}.');
  });

  it('throws MissingValueError when a meta field is absent, so that document alone is rejected', () => {
    const t = parseTemplate('{{meta.author}}: {{text}}');
    expect(() => t.render(doc)).toThrow(MissingValueError);
    expect(() => t.render({ ...doc, meta: null })).toThrow('the template needs {{meta.author}} but the document has no "author" field');
    // a field that is there, but null: rejected too, and said so
    expect(() => t.render({ ...doc, meta: { author: null } })).toThrow(
      'the template needs {{meta.author}} but the document\'s "author" is null',
    );
  });

  it('couldRender: tells what a template renders (any text for each placeholder) from what it does not', () => {
    const t = parseTemplate('Summary of {{id}}:\n{{text}}\nEnd.');
    expect(t.couldRender(t.render(doc))).toBe(true);
    expect(t.couldRender('Summary of x:\n\nEnd.')).toBe(true); // empty values
    expect(t.couldRender('Summary of x:\nsome text')).toBe(false); // the end is missing
    expect(t.couldRender('Resume of x:\nsome text\nEnd.')).toBe(false);
    // literals in order: the middle one must come after the first
    expect(parseTemplate('A{{text}}B{{id}}C{{path}}D').couldRender('ACxBD')).toBe(false);
    expect(parseTemplate('A{{text}}B{{id}}C').couldRender('AxC')).toBe(false);
    expect(parseTemplate('A{{text}}B{{id}}C').couldRender('AxBByC')).toBe(true);
    // the first and last literal do not overlap in a short text
    expect(parseTemplate('ab{{text}}ba').couldRender('aba')).toBe(false);
    expect(parseTemplate('{{text}}').couldRender('anything')).toBe(true);
    expect(parseTemplate('fixed').couldRender('fixed')).toBe(true);
    expect(parseTemplate('fixed').couldRender('fixed!')).toBe(false);
    // linear in the text: a long document that does not match answers at once
    expect(parseTemplate('a{{text}}b{{id}}c{{path}}d').couldRender('a' + 'x'.repeat(2_000_000))).toBe(false);
  });
});
