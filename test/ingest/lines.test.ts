import { describe, expect, it } from 'vitest';
import { splitLines } from '../../src/ingest/lines.js';

async function split(chunks: Array<Buffer | string>, max = 1000): Promise<string[]> {
  const out: string[] = [];
  let flushes = 0;
  const last = await splitLines(
    (async function* () {
      yield* chunks;
    })(),
    max,
    {
      line: (text, no) => out.push(`${no}:${text}`),
      bad: (no, reason) => out.push(`${no}!${reason}`),
    },
    () => {
      flushes++;
    },
  );
  expect(flushes).toBeGreaterThan(0);
  if (out.length > 0) expect(last).toBe(Number(/^\d+/.exec(out.at(-1)!)![0]));
  return out;
}

const input = Buffer.concat([
  Buffer.from('first\r\nsecond line é\n\n'),
  Buffer.from([0x62, 0x61, 0x64, 0xff, 0x0a]), // "bad\xff\n"
  Buffer.from('x'.repeat(40) + '\n'), // too long for max=30
  Buffer.from('last 🎉 without newline'),
]);
const expected = [
  '1:first',
  '2:second line é',
  '3:',
  '4!invalid UTF-8 (save the file as UTF-8; Latin-1 or Windows-1252 text is converted by iconv -f WINDOWS-1252 -t UTF-8)',
  '5!line is 40 bytes, over --max-doc-bytes 30',
  '6:last 🎉 without newline',
];

describe('splitting a byte stream into lines', () => {
  it('numbers lines and reports bad ones, in one chunk', async () => {
    expect(await split([input], 30)).toEqual(expected);
  });

  it('gives the same lines however the stream is cut (every cut point, and byte by byte)', async () => {
    for (let cut = 1; cut < input.length; cut++) {
      expect(await split([input.subarray(0, cut), input.subarray(cut)], 30)).toEqual(expected);
    }
    expect(
      await split(
        [...input].map((b) => Buffer.from([b])),
        30,
      ),
    ).toEqual(expected);
  });

  it('drops an overlong line as it streams, without buffering it', async () => {
    const chunks = ['ok\nstart', ...Array.from({ length: 50 }, () => 'y'.repeat(100)), 'end\nafter\n'];
    expect(await split(chunks, 64)).toEqual(['1:ok', '2!line is 5,008 bytes, over --max-doc-bytes 64', '3:after']);
  });

  it('handles an empty stream and string chunks', async () => {
    expect(await split([])).toEqual([]);
    expect(await split(['a\n', 'b'])).toEqual(['1:a', '2:b']);
  });
});
