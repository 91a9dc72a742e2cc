import { describe, expect, it } from 'vitest';
import { dbArgument, moneyArguments, redisArguments, runArguments, runArgumentsOfEndpoint, runArgumentsOfRun } from '../src/cli/again.js';

// The commands llmq suggests ("Try again: llmq retry-failed && llmq run") must reach the queue the
// user named with --db, pasted into a shell as printed, and never show a password.
describe('the --db a suggested command carries', () => {
  it('is nothing without --db (LLMQ_DB is still set in the shell, or the default applies)', () => {
    expect(dbArgument(undefined)).toBe('');
  });

  it('is the path as given, quoted for a POSIX shell only when it needs to be', () => {
    expect(dbArgument('q.db')).toBe(' --db q.db');
    expect(dbArgument('/data/runs/q-2026.db')).toBe(' --db /data/runs/q-2026.db');
    expect(dbArgument('my queue.db')).toBe(" --db 'my queue.db'");
    expect(dbArgument("bob's queue.db")).toBe(` --db 'bob'\\''s queue.db'`);
    expect(dbArgument('$HOME/q.db')).toBe(" --db '$HOME/q.db'");
  });

  it("masks a URL's password", () => {
    expect(dbArgument('postgres://llmq@db.internal/jobs')).toBe(' --db postgres://llmq@db.internal/jobs');
    expect(dbArgument('postgres://llmq:s3cret@db.internal/jobs')).toBe(" --db 'postgres://llmq:***@db.internal/jobs'");
  });
});

// After `llmq run --provider mock`, a suggested `llmq run` without the flag would send to OpenAI, and be billed.
describe('the flags a suggested llmq run carries', () => {
  it('is nothing for the default provider and endpoint (or an endpoint still set in the environment)', () => {
    expect(runArguments({ provider: 'openai' })).toBe('');
    expect(runArguments({})).toBe('');
  });

  it('names the provider and the endpoint the run was given, quoted and masked as --db is', () => {
    expect(runArguments({ provider: 'mock' })).toBe(' --provider mock');
    expect(runArguments({ provider: 'openai', baseUrl: 'http://127.0.0.1:11434/v1' })).toBe(' --base-url http://127.0.0.1:11434/v1');
    expect(runArguments({ baseUrl: 'https://u:pw@llm.internal/v1' })).toBe(" --base-url 'https://u:***@llm.internal/v1'");
    // a key some endpoints take in the query (?api-key=...) is never shown; Azure's api-version is,
    // or the pasted command would be answered 404
    expect(runArguments({ baseUrl: 'https://llm.internal/openai/v1?api-key=sk-SECRET123&api-version=2024-10' })).toBe(
      " --base-url 'https://llm.internal/openai/v1?api-key=***&api-version=2024-10'",
    );
    expect(runArguments({ baseUrl: 'https://llm.internal/v1?token=t0k3n&API-Version=2024-10-21-preview' })).toBe(
      " --base-url 'https://llm.internal/v1?token=***&API-Version=2024-10-21-preview'",
    );
  });

  it("carries the offline mock's latency when not the default, and nothing of it for a real provider", () => {
    expect(runArguments({ provider: 'mock', mockLatency: 200 })).toBe(' --provider mock');
    expect(runArguments({ provider: 'mock', mockLatency: 0 })).toBe(' --provider mock --mock-latency 0');
    expect(runArguments({ provider: 'mock', mockLatency: 1500 })).toBe(' --provider mock --mock-latency 1500');
    expect(runArguments({ provider: 'openai', mockLatency: 5 })).toBe('');
  });
});

// `batches cancel` and the batch lane name the endpoint a batch was sent to, as the queue recorded it.
describe('the flags that reach an endpoint the queue recorded', () => {
  it('are --provider mock, --base-url for any other endpoint, and nothing for OpenAI unless the environment names another', () => {
    expect(runArgumentsOfEndpoint('mock', {})).toBe(' --provider mock');
    expect(runArgumentsOfEndpoint('http://127.0.0.1:8000/v1', {})).toBe(' --base-url http://127.0.0.1:8000/v1');
    expect(runArgumentsOfEndpoint('https://api.openai.com/v1', {})).toBe('');
    expect(runArgumentsOfEndpoint('https://api.openai.com/v1', { LLMQ_BASE_URL: 'http://proxy/v1' })).toBe(
      ' --base-url https://api.openai.com/v1',
    );
    expect(runArgumentsOfEndpoint('http://h/v1&x', {})).toBe(" --base-url 'http://h/v1&x'");
  });
});

// A suggested `llmq run` pasted after a budgeted run would otherwise run with no cap at all.
describe('the money flags a suggested llmq run carries', () => {
  it('are the budgets and prices the run was given, and nothing without them', () => {
    expect(moneyArguments({})).toBe('');
    expect(moneyArguments({ budget: 5, budgetTotal: 50.5, price: [2.5, 10], prices: 'my prices.json' })).toBe(
      " --budget 5 --budget-total 50.5 --price 2.5,10 --prices 'my prices.json'",
    );
  });
});

describe('the flags a suggested llmq run carries after a run known by its stored options (status, retry-failed)', () => {
  it('are those of a mock run, or of an endpoint other than OpenAI, and of a lane other than online, and nothing else', () => {
    expect(runArgumentsOfRun({ provider: 'mock' })).toBe(' --provider mock');
    // a pace shared through Redis is shared again, the password masked; a batch run paces nothing there
    expect(runArgumentsOfRun({ provider: 'mock', redis: 'redis://10.0.0.5:6379' })).toBe(' --provider mock --redis redis://10.0.0.5:6379');
    expect(redisArguments({ redis: 'redis://:hunter2@10.0.0.5:6379/2' })).toBe(" --redis 'redis://:***@10.0.0.5:6379/2'");
    expect(runArgumentsOfRun({ provider: 'mock', via: 'batch', redis: 'redis://10.0.0.5:6379' })).toBe(' --via batch --provider mock');
    expect(runArgumentsOfRun({ provider: 'openai-compatible (http://127.0.0.1:11434/v1)' })).toBe(' --base-url http://127.0.0.1:11434/v1');
    expect(runArgumentsOfRun({ provider: 'openai-compatible (https://api.openai.com/v1)' })).toBe('');
    expect(runArgumentsOfRun({ provider: 'openai-compatible (https://api.openai.com/v1)', via: 'batch' })).toBe(' --via batch');
    expect(runArgumentsOfRun({ provider: 'mock', via: 'batch' })).toBe(' --via batch --provider mock');
    expect(runArgumentsOfRun({ provider: 'mock', mockLatency: 20 })).toBe(' --provider mock --mock-latency 20');
    // the endpoint as the run was given it (api-version kept), over the one its provider's name gives
    expect(
      runArgumentsOfRun({ provider: 'openai-compatible (https://x.example/v1)', endpoint: 'https://x.example/v1?api-version=1' }),
    ).toBe(" --base-url 'https://x.example/v1?api-version=1'");
    // stored options are read as they are: what is not a number is left out
    expect(runArgumentsOfRun({ provider: 'mock', mockLatency: '20' })).toBe(' --provider mock');
    expect(runArgumentsOfRun(null)).toBe('');
  });

  it('carry the budget, or USD in place of one that the same amount again would stop at once', () => {
    const mock = { provider: 'mock', budget: 0.5, budgetTotal: 20 };
    expect(runArgumentsOfRun(mock)).toBe(' --provider mock --budget 0.5 --budget-total 20');
    // --budget counts one run: reached, the same again lets the next spend as much again
    expect(runArgumentsOfRun({ ...mock, budgetReached: 'run' })).toBe(' --provider mock --budget 0.5 --budget-total 20');
    // unless it was smaller than one request
    expect(runArgumentsOfRun({ ...mock, budgetReached: 'run', budgetTooSmall: true })).toBe(
      ' --provider mock --budget USD --budget-total 20',
    );
    expect(runArgumentsOfRun({ ...mock, budgetReached: 'total' })).toBe(' --provider mock --budget 0.5 --budget-total USD');
  });
});
