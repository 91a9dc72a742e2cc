import { describe, expect, it } from 'vitest';
import { brokenLineId } from '../../src/ingest/broken-line-id.js';

const idOf = (line: string) => brokenLineId(line, 'id', 'in.jsonl', 3);

describe('brokenLineId', () => {
  it('reads a numeric id only where it ends: a line cut inside it, or a number run on into junk, names no other item', () => {
    expect(idOf('{"id": 12')).toBe('in.jsonl:3'); // maybe 123
    expect(idOf('{"id": 12x, "text": "a"')).toBe('in.jsonl:3');
    expect(idOf('{"id": 1e')).toBe('in.jsonl:3');
    expect(idOf('{"id": 007, "text": "a"')).toBe('in.jsonl:3'); // no JSON number
    expect(idOf('{"id": 12 , "text": ')).toBe('12');
    expect(idOf('{"id": 1.5, "text": ')).toBe('1.5');
    expect(idOf('{"id": 12345678901234567890, "text": ')).toBe('12345678901234567890');
    expect(idOf('{"id": 7} junk')).toBe('7');
  });

  it('reads a top-level id, not one nested or inside a string, past values of any kind', () => {
    expect(idOf('{"a": {"id": "inner"}, "text": ')).toBe('in.jsonl:3');
    expect(idOf('{"a": "\\"id\\": \\"in a string\\"", "text": ')).toBe('in.jsonl:3');
    expect(idOf('{"a": [[{"}": 1}]], "\\u0069d": "escaped", "text": ')).toBe('escaped');
    expect(idOf('{"custom_id": "c", "body": {')).toBe('c');
    expect(idOf('{"id": "a')).toBe('in.jsonl:3');
  });
});
