import { describe, expect, it } from 'vitest';
import { decodeUtf8 } from '../../src/ingest/decode.js';

describe('decodeUtf8', () => {
  it('gives what the strict UTF-8 decoder gives, ASCII (taken as Latin-1) or not, from any part of a buffer', () => {
    const strict = new TextDecoder('utf-8', { fatal: true });
    const expected = (bytes: Uint8Array): string | null => {
      try {
        return strict.decode(bytes);
      } catch {
        return null;
      }
    };
    const inputs = [
      '',
      'plain ASCII {"id":1,"text":"x"}',
      'controls \u0000\u0001\t\r\u001f and DEL \u007f',
      '\ufeffa BOM first (stripped)',
      'a BOM \ufeff later (kept)',
      'é, 🎉, \u2028',
    ].map((s) => Buffer.from(s));
    inputs.push(Buffer.from([0x61, 0x80, 0x62]), Buffer.from([0xff]), Buffer.from([0xc3]), Buffer.from([0xed, 0xa0, 0x80]));
    // pieces of one larger buffer: the ASCII path must read from the piece, not from the buffer's start
    const whole = Buffer.from('xyz{"id":"é"}\nplain line\n\ufeffbom\n');
    const at = (s: string) => whole.indexOf(s);
    const plain = whole.subarray(at('plain'), at('plain') + 'plain line'.length);
    inputs.push(whole.subarray(3, at('\n')), plain, whole.subarray(at('\n') + 1), whole.subarray(0, 3), whole.subarray(at('\ufeff')));
    for (const bytes of inputs) expect(decodeUtf8(bytes)).toBe(expected(bytes));
    expect(decodeUtf8(plain)).toBe('plain line');
  });
});
