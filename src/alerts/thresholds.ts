import { UsageError } from '../errors.js';
import { durationWithUnitMs } from '../duration.js';

/** When a run should raise an alert. Each is optional. */
export interface AlertThresholds {
  /** Jobs this run failed, at least. */
  readonly failed?: number;
  /** The oldest pending job in the queue has waited at least this long (ms). */
  readonly oldestMs?: number;
  /** Share of tries that errored over the last `windowMs`, at least (0..1). */
  readonly errorRate?: number;
  /** @default 300000 (5 minutes) */
  readonly windowMs?: number;
}

/** `90s`, `15m`, `2h`, `1h30m`, or a bare number of seconds. */
export function parseDuration(value: string, flag: string): number {
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Number(text) * 1000;
  const ms = durationWithUnitMs(text);
  if (ms === null) throw new UsageError(`${flag} ${value}: expected a duration such as 90s, 15m, 2h or 1h30m.`);
  return ms;
}

/** `5%` or `0.05`: a share from 0 (excluded) to 1. */
export function parseRate(value: string, flag: string): number {
  const text = value.trim();
  const n = text.endsWith('%') ? Number(text.slice(0, -1)) / 100 : Number(text);
  if (text === '' || !Number.isFinite(n) || n <= 0 || n > 1) {
    throw new UsageError(`${flag} ${value}: expected a share of tries such as 5% or 0.05 (above 0, at most 100%).`);
  }
  return n;
}
