import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { answerKind } from '../src/provider/finish.js';
import { SqliteStore } from '../src/store/sqlite/store.js';
import { runCli } from './helpers/cli.js';
import { completionBody } from './helpers/fake-openai-replies.js';
import { startFake } from './helpers/start-fake.js';
import { seedJobs } from './helpers/seed.js';
import { tempDir } from './helpers/tmp.js';

/** Which document a request is for: seedJobs writes "document N" into each prompt. */
const docOf = (body: string) => Number(/document (\d+)/.exec(body)?.[1]);

describe('answers that are not the whole answer', () => {
  it('an answer with no text that ended by itself is kept as done, and said: once as it comes, then in the summary and run:end', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 5);
    await store.close();
    // documents 1 and 3 come back empty (a gateway that drops the content), with finish_reason "stop"
    const fake = await startFake({
      respond: (req) => {
        const n = docOf(req.body);
        if (n !== 1 && n !== 3) return undefined;
        const body = completionBody(req, {}) as { choices: Array<{ message: Record<string, unknown> }> };
        body.choices[0]!.message = { role: 'assistant', content: '', refusal: null };
        return { kind: 'raw', status: 200, body };
      },
    });
    const run = await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'plain', '-c', '1']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr.match(/some answers are empty: no text, though they ended by themselves/g)).toHaveLength(1);
    expect(run.stderr).toMatch(/^ {2}2 answers empty \(no text\) \(kept as done; llmq export shows their output as ""\)$/m);
    expect(fake.requests).toHaveLength(5);
    const out = await runCli(['export', '--db', db]);
    const outputs = out.stdout
      .trim()
      .split('\n')
      .map((l) => (JSON.parse(l) as { output: string }).output);
    expect(outputs.filter((o) => o === '')).toHaveLength(2);
    // the same in --json, of a run on another queue of the same documents
    const other = join(tempDir(), 'q.db');
    const store2 = new SqliteStore(other);
    await seedJobs(store2, 5);
    await store2.close();
    const json = await runCli(['run', '--db', other, '--base-url', fake.url, '--json']);
    expect(JSON.parse(json.stdout.trim().split('\n').at(-1)!)).toMatchObject({
      event: 'run:end',
      done: 5,
      empty: 2,
      cutOff: 0,
      refused: 0,
    });
  });

  it('a run keeps answers cut off at max_tokens and refusals as done, says so once each and in its summary, and export marks each', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 9);
    await store.close();
    // documents 0, 3, 6 cut off; 1 and 4 refused; the rest whole
    const fake = await startFake({
      respond: (req) => {
        const n = docOf(req.body);
        const body = completionBody(req, {}) as { choices: Array<{ message: Record<string, unknown>; finish_reason: string }> };
        const choice = body.choices[0]!;
        if (n % 3 === 0 && (req.json?.max_tokens ?? 0) < 1024) choice.finish_reason = 'length';
        else if (n === 1 || n === 4) choice.message = { role: 'assistant', content: null, refusal: `no, not document ${n}` };
        else return undefined;
        return { kind: 'raw', status: 200, body };
      },
    });
    // one file per job heard: the hook's runs may overlap
    const heardDir = tempDir();
    const run = await runCli([
      'run',
      '--db',
      db,
      '--base-url',
      fake.url,
      '--progress',
      'plain',
      '-c',
      '2',
      '--on-job',
      `cat > "$(mktemp -p '${heardDir}')"`,
    ]);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr.match(/answers are being cut off at max_tokens/g)).toHaveLength(1);
    // what asks them again with room, reaching this queue: twice the 64 they had, at least 1,024
    expect(run.stderr.replace(/ \\\n/g, ' ').replace(/\s+/g, ' ')).toContain(
      `to ask the cut-off ones again with more room: llmq retry-failed --cut-off --max-tokens 1024 --db ${db} llmq run`,
    );
    expect(run.stderr.match(/the model declined some requests/g)).toHaveLength(1);
    expect(run.stderr).toMatch(
      /^ {2}3 answers cut off at max_tokens · 2 declined \(a refusal or the content filter\) \(kept as done; llmq export marks each: finish_reason\)$/m,
    );

    // the --on-job hook hears it with each answer
    const heard = readdirSync(heardDir).map((f) => JSON.parse(readFileSync(join(heardDir, f), 'utf8')) as { finishReason: string | null });
    expect(heard.map((h) => h.finishReason).sort()).toEqual([
      'length',
      'length',
      'length',
      'refusal',
      'refusal',
      'stop',
      'stop',
      'stop',
      'stop',
    ]);
    const json = await runCli(['run', '--db', db, '--base-url', fake.url, '--json']);
    // nothing left to send: the cut and refused answers are done, not sent again
    expect(fake.requests).toHaveLength(9);
    expect(JSON.parse(json.stdout.trim().split('\n').at(-1)!)).toMatchObject({ event: 'run:end', done: 0, cutOff: 0, refused: 0 });

    const out = await runCli(['export', '--db', db]);
    expect(out.code, out.stderr).toBe(0);
    const rows = out.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string; state: string; output: string; finish_reason: string | null });
    const finish = Object.fromEntries(rows.map((r) => [r.id, r.finish_reason]));
    expect(finish).toEqual({
      'doc-0': 'length',
      'doc-1': 'refusal',
      'doc-2': 'stop',
      'doc-3': 'length',
      'doc-4': 'refusal',
      'doc-5': 'stop',
      'doc-6': 'length',
      'doc-7': 'stop',
      'doc-8': 'stop',
    });
    expect(rows.find((r) => r.id === 'doc-1')).toMatchObject({ state: 'done', output: 'no, not document 1' });
    expect((await runCli(['show', 'doc-3', '--db', db])).stdout).toContain('(the provider cut this answer off at max_tokens');
    expect((await runCli(['show', 'doc-4', '--db', db])).stdout).toContain('(not an answer: the model declined, finish_reason "refusal")');
    expect((await runCli(['show', 'doc-5', '--db', db])).stdout).not.toMatch(/cut this answer off|not an answer/);
    expect(JSON.parse((await runCli(['show', 'doc-3', '--db', db, '--json'])).stdout).job.finishReason).toBe('length');
    const csv = await runCli(['export', '--db', db, '--format', 'csv']);
    const [head, first] = csv.stdout.split('\r\n');
    expect(head!.split(',').at(-1)).toBe('finish_reason');
    expect(first!.split(',').at(-1)).toBe('length');

    // as the warning says: only the cut-off answers are asked again, with room; the declined ones stay
    expect((await runCli(['retry-failed', '--db', db, '--cut-off'])).stderr).toContain('give it --max-tokens N too');
    const retry = await runCli(['retry-failed', '--db', db, '--cut-off', '--max-tokens', '1024']);
    expect(retry.code, retry.stderr).toBe(0);
    expect(retry.stderr).toContain(
      '3 answers cut off at max_tokens asked again for up to 1024 tokens (3 items moved); the cut-off answers are kept, no item needs them now.\n' +
        'Their documents are pending. Run llmq run',
    );
    expect((await runCli(['run', '--db', db, '--base-url', fake.url, '--progress', 'none'])).code).toBe(0);
    expect(
      fake.requests
        .slice(9)
        .map((r) => [docOf(r.body), r.json.max_tokens])
        .sort((a, b) => a[0]! - b[0]!),
    ).toEqual([
      [0, 1024],
      [3, 1024],
      [6, 1024],
    ]);
    const again = (await runCli(['export', '--db', db])).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { id: string; finish_reason: string });
    expect(again.filter((r) => r.finish_reason === 'length')).toEqual([]);
    expect(again).toHaveLength(9);
    // nothing cut off is left: said, not an error
    const none = await runCli(['retry-failed', '--db', db, '--cut-off', '--max-tokens', '2048']);
    expect(none.stderr).toBe('No failed jobs, and no answer cut off at max_tokens.\n');
  });

  it('the mock cuts answers at a small max_tokens, as a provider does, and the run says so: as its stand-ins, with no retry to a higher max_tokens', async () => {
    const db = join(tempDir(), 'q.db');
    const store = new SqliteStore(db);
    await seedJobs(store, 4, { model: 'mock-1', maxTokens: 2 });
    await store.close();
    const run = await runCli(['run', '--db', db, '--provider', 'mock', '--progress', 'plain']);
    expect(run.code, run.stderr).toBe(0);
    expect(run.stderr).toMatch(/^ {2}4 answers cut off at max_tokens \(kept as done/m);
    // a label's max_tokens of 5 was proposed as 1,024 for the real requests, because of the mock's text
    expect(run.stderr).toContain("warning: the offline mock's stand-in answers are cut off at max_tokens");
    expect(run.stderr).toContain(
      "the offline mock's stand-in answers are longer than a short max_tokens allows; a real model's may fit it",
    );
    expect(run.stderr).not.toContain('retry-failed --cut-off');
  });
});

describe('an empty answer', () => {
  it('is one that ended by itself (stop) with no text: not tool calls, a cut, or a body that says no finish', () => {
    expect(answerKind('stop', '')).toBe('empty');
    expect(answerKind('stop', 'text')).toBeNull();
    expect(answerKind('tool_calls', '')).toBeNull();
    expect(answerKind(null, '')).toBeNull();
    expect(answerKind('length', '')).toBe('cutOff');
    expect(answerKind('content_filter', '')).toBe('refused');
  });
});
