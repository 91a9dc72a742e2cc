import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { prng } from '../helpers/random.js';

/**
 * Generates a folder and JSONL inputs mixing good documents with every kind of bad one, and says
 * what llmq must make of each: good ones become items (by id), bad ones are rejected (by where).
 * Everything comes from a seeded PRNG, so a failing seed reproduces.
 */

export interface Expected {
  /** Item ids that must be stored. */
  readonly good: string[];
  /** `file:line` or `file` (as llmq prints it) of every document that must be rejected. */
  readonly bad: string[];
}

export interface Generated extends Expected {
  /** Sources to name on the command line (relative to the folder they were made in). */
  readonly sources: string[];
  /** JSONL for stdin. */
  readonly stdin: Buffer;
}

const WORDS = ['alpha', 'beta', 'café', 'naïve', '日本語', 'данные', '🎉', 'x\ty', 'quote"d', 'back\\slash', '\u2028sep', 'e\u0301'];

export function generate(dir: string, seed: number, maxDocBytes: number): Generated {
  const rand = prng(seed);
  const int = (lo: number, hi: number) => lo + Math.floor(rand() * (hi - lo + 1));
  const pick = <T>(xs: readonly T[]): T => xs[int(0, xs.length - 1)]!;
  const text = () => Array.from({ length: int(1, 40) }, () => pick(WORDS)).join(' ');
  /** Random bytes with no newline and one `bad` byte, so they are never valid text by chance. */
  const bytes = (n: number, bad: number) => {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) {
      const x = int(0, 255);
      b[i] = x === 10 ? 32 : x;
    }
    b[int(0, n - 1)] = bad; // a NUL, or a byte UTF-8 never uses
    return b;
  };
  const deep = () => {
    const n = int(257, 5000);
    return rand() < 0.5 ? '['.repeat(n) + ']'.repeat(n) : '{"a":'.repeat(n) + '1' + '}'.repeat(n);
  };
  const good: string[] = [];
  const bad: string[] = [];
  let unique = 0;
  const oddId = () =>
    `${pick(['', 'x'.repeat(int(200, 2000)), 'line\nbreak', 'nul\u0000byte', '..', '../../etc/passwd', ' ', 'ünï©ødé-🎉', '\r', 'id'])}#${unique++}`;

  // A folder: every file one document, id = its path in the folder.
  const docs = join(dir, 'docs');
  mkdirSync(join(docs, 'sub.txt', 'deeper'), { recursive: true }); // a folder named like a file
  const goodFile = (rel: string, content: string | Buffer) => {
    writeFileSync(join(docs, rel), content);
    good.push(rel);
  };
  const badFile = (rel: string, content: string | Buffer) => {
    writeFileSync(join(docs, rel), content);
    bad.push(`docs/${rel}`);
  };
  const names = ['plain', 'ünï©ødé 日本 🎉', 'new\nline', 'tab\there', 'a..b', 'n'.repeat(200), 'sp ace', 'quote"s'];
  for (let i = 0; i < int(20, 40); i++) {
    const rel = `${i % 3 === 0 ? 'sub.txt/deeper/' : ''}${pick(names)}-${i}.${pick(['md', 'txt', 'json', ''])}`;
    const body = text();
    switch (int(0, 9)) {
      case 0:
        badFile(rel, bytes(int(1, 3000), pick([0x00, 0xff, 0xc0])));
        break;
      case 1:
        badFile(rel, Buffer.concat([Buffer.from('caf'), Buffer.from([0xe9]), Buffer.from(body)]));
        break; // Latin-1
      case 2:
        badFile(rel, 'y'.repeat(maxDocBytes + int(1, maxDocBytes)));
        break;
      case 3:
        badFile(rel, pick(['', ' \n\t\r\n ']));
        break;
      case 4:
        badFile(rel, Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(body, 'utf16le')]));
        break; // UTF-16 with BOM
      case 5:
        goodFile(rel, '\ufeff' + body);
        break; // UTF-8 BOM
      case 6:
        goodFile(rel, body.split(' ').join('\r\n'));
        break; // CRLF
      default:
        goodFile(rel, body);
    }
  }
  writeFileSync(join(docs, '.hidden.bin'), bytes(100, 0)); // hidden: skipped, never reported
  execFileSync('mkfifo', [join(docs, 'a-fifo')]);
  bad.push('docs/a-fifo');
  symlinkSync('loop-b', join(docs, 'loop-a'));
  symlinkSync('loop-a', join(docs, 'loop-b'));
  bad.push('docs/loop-a', 'docs/loop-b');
  symlinkSync('no-such-target', join(docs, 'dangling'));
  bad.push('docs/dangling');
  symlinkSync('/dev/zero', join(docs, 'zero-device'));
  bad.push('docs/zero-device');
  // No unreadable file: chmod 000 stops nothing for root, and the test machines run as root.

  // JSONL: one document per non-blank line.
  const jsonl = (name: string, count: number, eol: string, bom: boolean): Buffer => {
    const lines: Array<string | Buffer> = [];
    for (let line = 1; line <= count; line++) {
      const at = `${name}:${line}`;
      const keep = (l: string | Buffer, id: string) => {
        lines.push(l);
        good.push(id);
      };
      const drop = (l: string | Buffer) => {
        lines.push(l);
        bad.push(at);
      };
      switch (int(0, 15)) {
        case 0:
          drop(bytes(int(1, 500), pick([0xff, 0xc0])));
          break;
        case 1:
          drop(Buffer.concat([Buffer.from('{"text":"ok'), Buffer.from([0xe9]), Buffer.from('"}')]));
          break;
        case 2:
          drop(`{"text":"x","nested":${deep()}}`);
          break;
        case 3:
          drop(`{"text":"${'z'.repeat(maxDocBytes + int(1, 2 * maxDocBytes))}"}`);
          break;
        case 4:
          drop(pick(['{"text": "unterminated', '{text: "x"}', '[1,2]', '"str"', '42', 'null', '{"text":"a"} trailing']));
          break;
        case 5:
          drop(pick(['{"text":5}', '{"body":"no text field"}', '{"text":"  \\n "}', '{"id":"","text":"x"}', '{"id":{},"text":"x"}']));
          break;
        case 6:
          drop('{"custom_id":"c","body":{"messages":[]}}');
          break;
        case 7:
          lines.push(pick(['', '   ', '\t']));
          break; // blank: skipped, but still numbered
        case 8:
          keep(JSON.stringify({ text: text(), tag: 'no id' }), at);
          break;
        case 9: {
          const id = String(1_000_000 + unique++);
          keep(`{"id":${id},"text":${JSON.stringify(text())}}`, id);
          break;
        }
        default: {
          const id = oddId();
          if (id.startsWith('#')) drop(JSON.stringify({ id: '', text: text() }));
          // an id is a name to show and look up: one holding a NUL is refused
          else if (id.includes('\u0000')) drop(JSON.stringify({ id, text: text() }));
          else keep(JSON.stringify({ id, text: text(), meta: { n: line } }), id);
        }
      }
    }
    const out = Buffer.concat(
      lines.map((l, i) => Buffer.concat([i === 0 && bom ? Buffer.from('\ufeff') : Buffer.alloc(0), Buffer.from(l), Buffer.from(eol)])),
    );
    if (name !== '-') writeFileSync(join(dir, name), out);
    return out;
  };
  jsonl('plain.jsonl', int(30, 80), '\n', false);
  jsonl('crlf-bom.ndjson', int(30, 80), '\r\n', true);
  // UTF-16 with a BOM: the file is rejected once for its encoding, none of its lines is enqueued.
  const u16Lines = int(3, 8);
  writeFileSync(
    join(dir, 'utf16.jsonl'),
    Buffer.concat([
      Buffer.from([0xff, 0xfe]),
      Buffer.from(Array.from({ length: u16Lines }, (_, i) => JSON.stringify({ id: `u16-${i}`, text: 'hi' })).join('\n'), 'utf16le'),
    ]),
  );
  bad.push('utf16.jsonl');
  writeFileSync(join(dir, 'empty.jsonl'), '');
  const stdin = jsonl('-', int(20, 50), '\n', false);
  return { good, bad, stdin, sources: ['docs', 'plain.jsonl', 'crlf-bom.ndjson', 'utf16.jsonl', 'empty.jsonl', '-'] };
}
