import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

// Lines without the id field get file:line ids: the rule for lines that have none. With a field named
// by --id-field and missing from every line, that rule hid a typo: the next enqueue with the right name
// made every document two items, exported twice.
describe('an --id-field the lines do not have', () => {
  it('is said, with the first line and the fields it has, and the fix', async () => {
    const dir = tempDir();
    const file = join(dir, 'docs.jsonl');
    writeFileSync(file, ['{"id":"a","text":"alpha"}', '{"doc_id":"b","text":"beta"}', '{"id":"c","text":"gamma"}'].join('\n') + '\n');
    const db = join(dir, 'q.db');
    const r = await runCli(['enqueue', file, '--db', db, '--id-field', 'doc_id']);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(
      `warning: 2 lines had no "doc_id" field (the first: ${file}:1, which has "id", "text"), so their ids are file:line.`,
    );
    expect(r.stderr).toContain(`llmq forget --source ${file} --db ${db}, then enqueue it again`);

    const json = await runCli(['enqueue', file, '--db', join(dir, 'q2.db'), '--id-field', 'doc_id', '--json']);
    expect(JSON.parse(json.stdout).withoutIdField).toEqual({
      count: 2,
      path: file,
      line: 1,
      has: ['id', 'text'],
      withIdField: 1,
      nullIds: 0,
    });
  });

  it('names the field the flag looks like a slip for', async () => {
    const dir = tempDir();
    const file = join(dir, 'docs.jsonl');
    writeFileSync(file, '{"ID":"a","text":"alpha"}\n{"docid":"b","text":"beta"}\n');
    const caps = await runCli(['enqueue', file, '--db', join(dir, 'q.db'), '--id-field', 'Id']);
    expect(caps.stderr).toContain('If the name given to --id-field is mistyped (did you mean --id-field ID?): llmq forget');
    const swapped = await runCli(['enqueue', file, '--db', join(dir, 'q2.db'), '--id-field', 'dcoid']);
    expect(swapped.stderr).toContain(`(the first: ${file}:1, which has "ID", "text")`);
    expect(swapped.stderr).toContain('If the name given to --id-field is mistyped: llmq forget');
  });

  it('says nothing for lines without the default id field: file:line is their id by design', async () => {
    const dir = tempDir();
    const file = join(dir, 'docs.jsonl');
    writeFileSync(file, '{"text":"alpha"}\n{"text":"beta"}\n');
    const r = await runCli(['enqueue', file, '--db', join(dir, 'q.db'), '--json']);
    expect(r.code).toBe(0);
    expect(r.stderr).not.toContain('warning');
    expect(JSON.parse(r.stdout).withoutIdField).toBeNull();
  });
});

describe('a line without the default "id" field among lines that have one', () => {
  it('is said, with the field it likely misspelt and how to take its file:line item out; a file with no ids at all is not', async () => {
    const dir = tempDir();
    const file = join(dir, 'p.jsonl');
    const db = join(dir, 'q.db');
    writeFileSync(file, '{"id":"doc01","text":"a"}\n{"ID":"doc02","text":"b"}\n{"id":"doc03","text":"c"}\n');
    const r = await runCli(['enqueue', file, '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(
      `warning: 1 line had no "id" field though 2 other lines have one (the first: ${file}:2, which has "ID", "text"; "ID" looks like "id" misspelt), ` +
        `so its id is file:line, not the one it was meant to have. If the field's name is misspelt there, mend it, take the file:line item out ` +
        `(llmq forget --db ${db} ${file}:2) and enqueue again.`,
    );
    const json = await runCli(['enqueue', file, '--db', join(dir, 'q2.db'), '--json']);
    expect(JSON.parse(json.stdout).withoutIdField).toEqual({
      count: 1,
      path: file,
      line: 2,
      has: ['ID', 'text'],
      withIdField: 2,
      nullIds: 0,
    });

    const plain = join(dir, 'plain.jsonl');
    writeFileSync(plain, '{"text":"a"}\n{"text":"b"}\n');
    const quiet = await runCli(['enqueue', plain, '--db', join(dir, 'q3.db'), '--json']);
    expect(JSON.parse(quiet.stdout).withoutIdField).toBeNull();
    expect(quiet.stderr).not.toContain('warning');
  });
});

describe('a line whose id is null', () => {
  it('gets a file:line id, said as a null id (not a missing field), among lines with ids and alone', async () => {
    const dir = tempDir();
    const file = join(dir, 'n.jsonl');
    const db = join(dir, 'q.db');
    writeFileSync(file, '{"id":"doc01","text":"a"}\n{"id":null,"text":"b"}\n{"text":"c"}\n');
    const r = await runCli(['enqueue', file, '--db', db]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(
      `warning: 2 lines had no "id" field or a null one though 1 other line has one (the first: ${file}:2, which has "id", "text"), ` +
        `so their ids are file:line, not the one they were meant to have. If the field's name is misspelt there or its value left out, mend them, ` +
        `take the file:line items out (llmq forget --db ${db} ${file}:2 ...) and enqueue again.`,
    );
    const json = await runCli(['enqueue', file, '--db', join(dir, 'q2.db'), '--json']);
    expect(JSON.parse(json.stdout).withoutIdField).toEqual({
      count: 2,
      path: file,
      line: 2,
      has: ['id', 'text'],
      withIdField: 1,
      nullIds: 1,
    });
    const shown = await runCli(['show', `${file}:2`, '--db', db]);
    expect(shown.code, shown.stderr).toBe(0);

    // every id null: the field is there, so its values were meant; said even with no line to compare
    const nulls = join(dir, 'all-null.jsonl');
    writeFileSync(nulls, '{"id":null,"text":"a"}\n');
    const alone = await runCli(['enqueue', nulls, '--db', join(dir, 'q3.db')]);
    expect(alone.code).toBe(0);
    expect(alone.stderr).toContain(
      `warning: 1 line had a null "id" (the first: ${nulls}:1, which has "id", "text"), so its id is file:line, not the one it was meant to have. ` +
        `If it was meant to have one, write it in, take the file:line item out`,
    );
    // with --id-field, every value null: its name is right, so no mistyped name is suggested
    const named = join(dir, 'named.jsonl');
    writeFileSync(named, '{"doc_id":null,"text":"a"}\n{"doc_id":null,"text":"b"}\n');
    const db4 = join(dir, 'q4.db');
    const flagged = await runCli(['enqueue', named, '--db', db4, '--id-field', 'doc_id']);
    expect(flagged.stderr).toContain(
      `warning: 2 lines had a null "doc_id" (the first: ${named}:1, which has "doc_id", "text"), so their ids are file:line. ` +
        `If they were meant to have one, write them in, then llmq forget --source ${named} --db ${db4} and enqueue it again (answers already paid for are kept and found again).`,
    );
    expect(flagged.stderr).not.toContain('mistyped');
  });
});
