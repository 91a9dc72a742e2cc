import { describe, expect, it } from 'vitest';
import { durationIn } from '../src/cli/options.js';
import { outageText } from '../src/report/format.js';
import { runCli } from './helpers/cli.js';
import { reply } from './helpers/fake-openai.js';
import { seededQueue } from './helpers/seed.js';
import { startFake } from './helpers/start-fake.js';

// A flag of time took only a bare number in its unit, while llmq prints durations with theirs
// (`paused: ... (--max-outage 15m)`): `--max-outage 15m`, typed back, was refused.
describe('flags of time', () => {
  it('take a bare number in their unit, or a duration with its own', () => {
    const minutes = durationIn('minutes', { above: 0 });
    expect(minutes('15')).toBe(15);
    expect(minutes('15m')).toBe(15);
    expect(minutes('90s')).toBe(1.5);
    expect(minutes('1h30m')).toBe(90);
    const seconds = durationIn('seconds', { min: 0, max: 3600 });
    expect(seconds('30')).toBe(30);
    expect(seconds('0')).toBe(0);
    expect(seconds('2m')).toBe(120);
    expect(seconds('500ms')).toBe(0.5);
    expect(seconds('1h')).toBe(3600);
  });

  it('read back what llmq prints beside --max-outage, whatever its value (5m 00s, two words, was refused)', () => {
    const minutes = durationIn('minutes', { above: 0 });
    for (const given of [0.5, 1.5, 5, 15, 60, 90, 61.25]) {
      const printed = /\(--max-outage (\S+)\)$/.exec(outageText(0, given * 60_000, 1000))?.[1];
      expect(printed, String(given)).toBeDefined();
      expect(minutes(printed!), printed).toBeCloseTo(given, 5);
    }
    expect(outageText(0, 90 * 60_000, 1000)).toBe('down 1s (--max-outage 1h30m)');
  });

  it('take a bare number as Number reads it, as they always did (.5, 1e3)', () => {
    expect(durationIn('seconds', { above: 0 })('.5')).toBe(0.5);
    expect(durationIn('seconds', { min: 0, max: 3600 })('1e3')).toBe(1000);
  });

  it('refuse what is not a duration, or out of range, saying both forms', () => {
    const minutes = durationIn('minutes', { above: 0 });
    for (const bad of ['0', '0s', 'soon', '-5', '15 m', '15x', ''])
      expect(() => minutes(bad), bad).toThrow('Expected minutes greater than 0, or a duration with its unit (15m, 90s, 2h).');
    const seconds = durationIn('seconds', { min: 0.05, max: 3600 });
    for (const bad of ['10ms', '2h', 'auto'])
      expect(() => seconds(bad), bad).toThrow('Expected seconds from 0.05 to 3600, or a duration with its unit (30s, 2m, 500ms).');
  });

  it('are taken by run with their units (batch-cli and outage-poison-first run with 100ms, 3s, 30s and 50ms)', async () => {
    const db = await seededQueue(1);
    const r = await runCli([
      'run',
      '--db',
      db,
      '--provider',
      'mock',
      '--mock-latency',
      '0',
      '--json',
      '--max-outage',
      '15m',
      '--grace',
      '2m',
      '--retry-delay',
      '500ms',
      '--timeout',
      '1m30s',
    ]);
    expect(r.code, r.stderr).toBe(0);
    const start = r.stdout
      .split('\n')
      .map((l) => (l ? JSON.parse(l) : null))
      .find((e) => e?.event === 'run:start');
    expect(start, r.stdout).toBeTruthy();
    const refused = await runCli(['run', '--db', db, '--provider', 'mock', '--timeout', 'soon']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      "argument 'soon' is invalid. Expected auto, or seconds greater than 0, or a duration with its unit (30s, 2m, 500ms).",
    );
  }, 30_000);

  it('reach the run in their unit: --timeout 300ms cuts a hung request in a third of a second, not 300 s', async () => {
    const db = await seededQueue(3);
    const fake = await startFake({ latencyMs: 5 });
    // the first request hangs: cut at its timeout, its job is sent again and answered
    fake.respond((q) => (q.index === 1 ? reply.hang() : undefined));
    const started = Date.now();
    const r = await runCli(['run', '--db', db, '--base-url', fake.url, '--timeout', '300ms', '--json'], { timeoutMs: 30_000 });
    expect(r.code, r.stderr).toBe(0);
    const end = r.stdout
      .split('\n')
      .map((l) => (l ? JSON.parse(l) : null))
      .find((e) => e?.event === 'run:end');
    expect(end).toMatchObject({ done: 3, failed: 0, requests: 4 });
    expect(fake.received).toBe(4);
    expect(Date.now() - started).toBeLessThan(20_000);
  }, 30_000);
});
