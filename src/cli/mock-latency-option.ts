import { InvalidArgumentError, Option } from 'commander';
import { UsageError } from '../errors.js';
import { durationWithUnitMs } from '../duration.js';
import { DEFAULT_MOCK_LATENCY_MS } from './options.js';

/** `--mock-latency` of run and estimate: how long the offline mock takes to answer. */
export function mockLatencyOption(): Option {
  return new Option('--mock-latency <ms>', 'mock provider: mean latency, in ms or with a unit (200, 200ms, 1.5s)')
    .default(DEFAULT_MOCK_LATENCY_MS)
    .argParser(latencyMs);
}

/** A bare number of milliseconds (`200`), or a duration with its unit (`200ms`, `1.5s`). */
function latencyMs(value: string): number {
  const text = value.trim();
  const ms = /^\d+(\.\d+)?$/.test(text) ? Number(text) : (durationWithUnitMs(text) ?? Number.NaN);
  if (!Number.isFinite(ms) || ms < 0)
    throw new InvalidArgumentError('Expected milliseconds (200) or a duration with its unit (200ms, 1.5s).');
  return Math.round(ms);
}

/**
 * Flags of the offline mock (`--mock-latency`, `--mock-failure-rate`) given with a real provider
 * would be silently ignored: refused, named. `of`: what the command is of ("this run sends to a real
 * one").
 */
export function refuseMockFlags(provider: string, given: readonly string[], of: string): void {
  if (provider === 'mock' || given.length === 0) return;
  const one = given.length === 1;
  throw new UsageError(
    `${given.join(' and ')} ${one ? 'is' : 'are'} for the offline mock provider; ${of}. Add --provider mock, or leave ${one ? 'it' : 'them'} out.`,
  );
}
