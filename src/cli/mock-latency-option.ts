import { InvalidArgumentError, Option } from 'commander';
import { parseDuration } from '../alerts/thresholds.js';
import { DEFAULT_MOCK_LATENCY_MS } from './options.js';

/** `--mock-latency` of run and estimate: how long the offline mock takes to answer. */
export function mockLatencyOption(): Option {
  return new Option('--mock-latency <ms>', 'mock provider: mean latency, in ms or with a unit (200, 200ms, 1.5s)')
    .default(DEFAULT_MOCK_LATENCY_MS)
    .argParser(latencyMs);
}

/** A bare number of milliseconds (`200`), or a duration with its unit (`200ms`, `1.5s`). */
function latencyMs(value: string): number {
  let ms = Number.NaN;
  if (/^\s*\d+(\.\d+)?\s*$/.test(value)) ms = Number(value);
  else {
    try {
      ms = parseDuration(value, '--mock-latency');
    } catch {}
  }
  if (!Number.isFinite(ms) || ms < 0)
    throw new InvalidArgumentError('Expected milliseconds (200) or a duration with its unit (200ms, 1.5s).');
  return Math.round(ms);
}
