import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli.js';
import { tempDir } from './helpers/tmp.js';

// JSON.parse reads a 64-bit number (a snowflake user id, say) with other last digits. The id field is
// read from the text; any other field is stored as read, which the user must hear of before joining
// export's meta back to their data.
describe('a field holding an integer past 2^53', () => {
  it('is said once, with the first line, the field, what it reads as, and the fix', async () => {
    const dir = tempDir();
    const file = join(dir, 'tweets.jsonl');
    writeFileSync(file, '{"id":"a","text":"x","user_id":98765432109876543219}\n{"id":"b","text":"y","user_id":98765432109876543218}\n');
    const r = await runCli(['enqueue', file, '--db', join(dir, 'q.db')]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(
      `warning: 2 lines held an integer past 2^53 outside the id field (the first: ${file}:1, "user_id", read as 98765432109876540000): ` +
        'JSON numbers that large lose their last digits when read',
    );
    expect(r.stderr).toContain('write such numbers as strings in the file ("user_id": "...") and enqueue it again.');

    const json = await runCli(['enqueue', file, '--db', join(dir, 'q2.db'), '--json']);
    expect(JSON.parse(json.stdout).roundedNumbers).toEqual({ count: 2, path: file, line: 1, field: 'user_id', read: 98765432109876540000 });
  });
});
